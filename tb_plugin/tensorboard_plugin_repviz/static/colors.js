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

/** Colour of category i (Tableau 10, then evenly spaced hues). */
export function categoryColor(i) {
  if (i < PALETTE.length) return PALETTE[i];
  return `hsl(${(i * 137.508) % 360}, 55%, 50%)`;
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
 * Per-point category (z), value (w), palette and legend entries for colour mode `colorBy`; a mode the data cannot
 * show (no predictions, no change values) falls back to the label.
 * @param {{run: object, labels: Int32Array, preds: ?{cls: Float32Array, conf: Float32Array},
 *          change?: ?Float32Array, n: number}} data
 * @param {"label"|"prediction"|"correct"|"confidence"|"change"} colorBy
 */
export function colorEncoding(data, colorBy) {
  const { run, labels, preds, change, n } = data;
  const usable = colorBy === "change" ? Boolean(change) : colorBy === "label" || Boolean(preds);
  const mode = usable ? colorBy : "label";
  const z = new Float32Array(n);
  const w = new Float32Array(n);
  const names = run.class_names || Array.from({ length: run.n_classes }, (_, i) => String(i));
  const classes = names.length;
  if (mode === "confidence" || mode === "change") {
    const values = mode === "confidence" ? preds.conf : change;
    for (let i = 0; i < n; i++) w[i] = Number.isFinite(values[i]) ? Math.min(Math.max(values[i], 0), 1) : 0;
    return { by: "value", z, w, palette: mode === "confidence" ? ramp(32) : changeRamp(32), mode, items: null };
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
  return { by: "category", z, w, palette, mode, items };
}

/** The colour of each point as drawn (category palette, or the ramp at w), e.g. for trails and previews. */
export function pointColors(colors) {
  const n = colors.z.length;
  const out = new Array(n);
  const last = colors.palette.length - 1;
  for (let i = 0; i < n; i++) {
    out[i] = colors.by === "category" ? colors.palette[colors.z[i]] : colors.palette[Math.round(colors.w[i] * last)];
  }
  return out;
}
