// Colour encodings of the Repviz tab: which colour each probe point gets in a colour mode, and the legend
// entries that go with it. Pure functions of the data (shared by the main view, the grid cells and previews).

// Tableau 10, then grey for "no class".
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#bab0ac"];
/** Colour of points with no class (no label, no prediction). @type {string} */
export const NO_CLASS = "#c7c7c7";
const CORRECT = ["#9aa5b1", "#d62728", NO_CLASS];
const CONFIDENCE_STOPS = [[215, 48, 39], [252, 174, 97], [44, 123, 182]]; // unsure red ... sure blue
const CHANGE_STOPS = [[198, 219, 239], [253, 174, 97], [165, 15, 21]]; // kept pale blue ... changed dark red
const NUMBER_STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]]; // viridis
const NUMBER_BINS = 32;
const VALUE_BINS = 32; // colours of a value in [0, 1] (confidence, neighbourhood change)
/** Colours a metadata column gives its most common values; the rest are "other". */
export const MAX_META_CATEGORIES = 20;

/** Colour of category i (Tableau 10, then evenly spaced hues). */
export function categoryColor(i) {
  if (i < PALETTE.length) return PALETTE[i];
  return `hsl(${(i * 137.508) % 360}, 55%, 50%)`;
}

// A run's colour: its network group (the name before the first "/") picks the hue by a hash of it, the rest of its
// name a shade of the hue (by its trailing number, so seed0, seed1 and seed2 differ, else by a hash), so a run keeps
// its colour when runs are added or removed. repviz/export.py's run_colour is the same rule.
const RUN_HUES = PALETTE.slice(0, 9); // Tableau 10 less its grey, which would read as "no run"
const RUN_SHADES = [0, -0.3, 0.35]; // mixed with black (< 0) or white (> 0)

/** FNV-1a (32 bits) of the UTF-8 bytes of `text`. */
function fnv1a(text) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

/** Hex colour of run `name`, from its name alone (see RUN_SHADES). */
export function runColor(name) {
  const slash = name.indexOf("/");
  const base = RUN_HUES[fnv1a(slash < 0 ? name : name.slice(0, slash)) % RUN_HUES.length];
  const number = slash < 0 ? null : name.match(/[0-9]+$/);
  // a number's value modulo 3 is its digits' sum modulo 3 (exact for numbers of any length)
  const shade = slash < 0 ? 0 : number ? [...number[0]].reduce((sum, d) => sum + Number(d), 0) : fnv1a(name);
  const t = RUN_SHADES[shade % RUN_SHADES.length];
  const target = t < 0 ? 0 : 255;
  const channel = (i) => {
    const v = parseInt(base.slice(i, i + 2), 16);
    return Math.round(v + (target - v) * Math.abs(t)).toString(16).padStart(2, "0");
  };
  return `#${channel(1)}${channel(3)}${channel(5)}`;
}

/** A ramp of `count` hex colours through `stops` (RGB triples). */
export function ramp(count, stops = CONFIDENCE_STOPS) {
  const hex = (v) => Math.round(v).toString(16).padStart(2, "0");
  return Array.from({ length: count }, (_, i) => {
    const t = (i / (count - 1)) * (stops.length - 1);
    const k = Math.min(Math.floor(t), stops.length - 2);
    const f = t - k;
    const c = stops[k].map((a, j) => a + f * (stops[k + 1][j] - a));
    return `#${c.map(hex).join("")}`;
  });
}

/** The ramp of the neighbourhood-change colour mode. */
export function changeRamp(count) {
  return ramp(count, CHANGE_STOPS);
}

/**
 * Per-point colour (z, an index into the palette), palette and legend entries for colour mode `colorBy`; a mode
 * the data cannot show (no predictions, no change values) falls back to the label. A value in [0, 1] (confidence,
 * change) takes one of VALUE_BINS colours of a ramp, grey where it has none (`missing` counts those: a point a
 * snapshot of another probe subset does not hold, or one without a prediction).
 * @param {{run: object, labels: Int32Array, preds: ?{cls: Float32Array, conf: Float32Array},
 *          change?: ?Float32Array, n: number}} data
 * `colorBy` "meta:<column>" colours by a probe metadata column (`data.metadata`, see metaEncoding); "label" of a
 * run whose target has no classes but a column of values (`run.target.column`, a scalar target) colours by it.
 * @param {"label"|"prediction"|"correct"|"confidence"|"change"|string} colorBy
 */
export function colorEncoding(data, colorBy) {
  const { run, labels, preds, change, n } = data;
  const targetColumn = colorBy === "label" && run.target ? run.target.column : null;
  const name = colorBy.startsWith("meta:") ? colorBy.slice(5) : targetColumn;
  const column = name && data.metadata ? data.metadata.columns.find((c) => c.name === name) : null;
  if (column && column.values.length === n) return metaEncoding(column, colorBy);
  const usable = colorBy === "change" ? Boolean(change) : colorBy === "label" || (Boolean(preds) && !colorBy.startsWith("meta:"));
  const mode = usable ? colorBy : "label";
  const z = new Float32Array(n);
  const names = run.class_names || Array.from({ length: run.n_classes }, (_, i) => String(i));
  const classes = names.length;
  if (mode === "confidence" || mode === "change") {
    const values = mode === "confidence" ? preds.conf : change;
    let missing = 0;
    for (let i = 0; i < n; i++) {
      if (Number.isFinite(values[i])) z[i] = Math.round(Math.min(Math.max(values[i], 0), 1) * (VALUE_BINS - 1));
      else {
        z[i] = VALUE_BINS;
        missing += 1;
      }
    }
    const stops = mode === "confidence" ? ramp(VALUE_BINS) : changeRamp(VALUE_BINS);
    return { z, palette: [...stops, NO_CLASS], mode, items: null, missing };
  }
  let categories;
  if (mode === "correct") {
    categories = ["correct", "wrong", "no label"];
    for (let i = 0; i < n; i++) z[i] = labels[i] < 0 || preds.cls[i] < 0 ? 2 : preds.cls[i] === labels[i] ? 0 : 1;
  } else {
    const source = mode === "label" ? labels : preds.cls;
    categories = [...names, mode === "label" ? "no label" : "no prediction"];
    for (let i = 0; i < n; i++) z[i] = source[i] >= 0 && source[i] < classes ? source[i] : classes;
  }
  const palette = mode === "correct" ? CORRECT : [...names.map((_, i) => categoryColor(i)), NO_CLASS];
  const counts = new Array(categories.length).fill(0);
  for (let i = 0; i < n; i++) counts[z[i]] += 1;
  const items = categories.map((name, i) => ({ name, color: palette[i], count: counts[i], index: i }))
    .filter((item) => item.count > 0 || item.index < categories.length - 1);
  return { z, palette, mode, items };
}

/**
 * Colours of a metadata column: a kind the server draws on a scale (`colours: "scale"`: numbers) in viridis, in
 * NUMBER_BINS steps from its smallest to its largest value, missing ones grey (`range` for the legend); any other
 * as categories, its MAX_META_CATEGORIES most common values each a colour and the rest "other" (legend `items`,
 * which can be hidden).
 * @param {{name: string, kind: string, colours: string, values: (string|number|boolean|null)[]}} column @param {string} mode
 */
export function metaEncoding(column, mode) {
  const { values } = column;
  const n = values.length;
  const z = new Float32Array(n);
  if (column.colours === "scale") {
    const finite = values.filter((v) => v !== null && Number.isFinite(v));
    const lo = finite.length ? finite.reduce((a, b) => Math.min(a, b)) : 0;
    const hi = finite.length ? finite.reduce((a, b) => Math.max(a, b)) : 1;
    const span = hi > lo ? hi - lo : 1;
    const palette = [...ramp(NUMBER_BINS, NUMBER_STOPS), NO_CLASS];
    for (let i = 0; i < n; i++) {
      const v = values[i];
      z[i] = v === null || !Number.isFinite(v) ? NUMBER_BINS : Math.round(((v - lo) / span) * (NUMBER_BINS - 1));
    }
    return { z, palette, mode, items: null, title: column.name,
      range: { lo, hi, stops: ramp(8, NUMBER_STOPS), missing: n - finite.length } };
  }
  const counts = new Map();
  for (const v of values) counts.set(String(v), (counts.get(String(v)) || 0) + 1);
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, MAX_META_CATEGORIES);
  const code = new Map(top.map(([value], i) => [value, i]));
  const other = top.length;
  for (let i = 0; i < n; i++) z[i] = code.get(String(values[i])) ?? other;
  const palette = [...top.map((_, i) => categoryColor(i)), NO_CLASS];
  const items = top.map(([value, count], i) => ({ name: value === "" ? "(empty)" : value, color: palette[i], count, index: i }));
  if (counts.size > top.length) items.push({ name: `other (${counts.size - top.length} values)`, color: NO_CLASS, count: n - top.reduce((a, [, c]) => a + c, 0), index: other });
  return { z, palette, mode, items, title: column.name };
}

/** The colour of each point as drawn, e.g. for trails and previews. */
export function pointColors(colors) {
  return Array.from(colors.z, (z) => colors.palette[z]);
}
