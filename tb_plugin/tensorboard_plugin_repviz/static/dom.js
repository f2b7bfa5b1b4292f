// Pure DOM builders of the Repviz tab: each takes data and callbacks and returns elements. No fetching,
// no state: index.js and the views decide what to show and rebuild a part when its data changes.

// Bidirectional controls (embeddings, overrides, isolates, marks): raw in a run, layer or column name they would
// reorder what the page draws ("evil\u202egpj.exe" reads as "evilexe.jpg").
const BIDI_CONTROLS = /[\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` as the page may draw it: every bidirectional control character written as its escape (`\u202e`), as the
 * server's notes write them. Every text the page shows passes here: `h` applies it to text, string children and
 * the `title`, `aria-label` and `placeholder` attributes; canvases and direct `textContent` call it.
 * @param {*} text @returns {string}
 */
export function shown(text) {
  return String(text).replace(BIDI_CONTROLS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * Whether the user asked their system for less motion (`prefers-reduced-motion: reduce`): the views then jump to a
 * new layout or matrix at the next frame instead of animating to it. @returns {boolean}
 */
export function prefersReducedMotion() {
  return window.matchMedia?.("(prefers-reduced-motion: reduce)").matches ?? false;
}

const SHOWN_ATTRIBUTES = new Set(["title", "aria-label", "placeholder"]);

/**
 * Create an element. `attrs` keys starting with "on" add listeners; `class`, `text` and other keys set
 * attributes; children may be nodes, strings or null (skipped). Texts go through `shown`.
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === "text") node.textContent = shown(value);
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value === true ? "" : SHOWN_ATTRIBUTES.has(key) ? shown(value) : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined && child !== false) node.append(typeof child === "string" ? shown(child) : child);
  }
  return node;
}

/**
 * A labelled <select>. Options are {value, label, disabled?, title?}; `onChange(value)`. The select's tooltip is
 * its chosen option's full text (a long one is cut short in the bar).
 * @returns {HTMLElement}
 */
export function picker(label, name, options, value, onChange) {
  const chosen = options.find((o) => o.value === value);
  const select = h("select", { name, "aria-label": label, title: chosen ? chosen.title || chosen.label : null,
    onchange: (e) => onChange(e.target.value) },
  options.map((o) => h("option", { value: o.value, text: o.label, title: o.title, disabled: o.disabled, selected: o.value === value })));
  select.disabled = options.length === 0;
  return h("label", { class: "picker" }, h("span", { text: label }), select);
}

/** Group of toggle buttons; `onChange(value)`. */
export function segmented(name, options, value, onChange) {
  return h("div", { class: "segmented", role: "group", "data-name": name },
    options.map((o) => h("button", {
      type: "button", "data-value": o.value, title: o.title, text: o.label,
      class: o.value === value ? "on" : null, "aria-pressed": String(o.value === value),
      onclick: () => onChange(o.value),
    })));
}

/** The mouse modes of the scatters (main view and grid). */
export const MOUSE_MODES = [
  { value: "pan", label: "pan", title: "drag to pan, wheel to zoom" },
  { value: "lasso", label: "lasso", title: "draw around points to select them" },
  { value: "rectangle", label: "rectangle", title: "drag a rectangle to select points" },
];

/** The "Reset view" button of a view that pans and zooms (`title`: what it does there). */
export function resetButton(title, onReset) {
  return h("button", { type: "button", class: "reset", "data-testid": "reset-view", text: "Reset view", title, onclick: onReset });
}

/** Number with thin grouping, e.g. 70000 -> "70,000". */
export function fmt(value, digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  return Number(value).toFixed(digits);
}

/** A metadata value as the hover card, the search and the CSV write it ("" for a missing one). */
export function metaText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "number" && !Number.isInteger(value) ? String(Number(value.toPrecision(6))) : String(value);
}

const SCORE_NAMES = [
  ["trustworthiness", "trustworthiness"],
  ["continuity", "continuity"],
  ["knn_preservation", "kNN kept"],
  ["knn_accuracy", "10-NN accuracy"],
];

const DTYPES = { "<f4": "float32", "<f2": "float16", "<f8": "float64", float32: "float32", float16: "float16" };

/** Describe a reduction applied at capture ({kind: "none"|"projection"|...}). */
function reductionText(reduction) {
  if (!reduction || reduction.kind === "none" || !reduction.kind) return "none";
  const extra = Object.entries(reduction).filter(([k]) => k !== "kind").map(([k, v]) => `${k} ${v}`);
  return extra.length ? `${reduction.kind} (${extra.join(", ")})` : reduction.kind;
}

/**
 * The info line: representation shape, capture reduction, embedding quality scores.
 * @param {{layer: object, record: object, embedding: object}} info
 */
export function infoLine(info, method) {
  const layer = info.layer || {};
  const record = info.record || {};
  const scores = (info.embedding && info.embedding.scores) || {};
  const shape = record.shape || layer.stored_shape;
  const parts = [
    h("span", {}, h("b", { text: layer.class || "layer" }), ` output (${(layer.output_shape || []).map((d) => d ?? "n").join(", ")})`),
    h("span", { text: `stored ${(shape || []).join(" × ")} ${DTYPES[record.dtype] || record.dtype || ""}`.trim() }),
    h("span", { text: `reduction: ${reductionText(layer.reduction)}` }),
  ];
  const points = info.points;
  if (points && points.subset) {
    parts.push(h("span", { "data-testid": "subset", text: `${fmt(points.n)} of ${fmt(points.of)} points (a probe subset)` }));
  }
  if (record.nonfinite) parts.push(h("span", { class: "warn", text: `${fmt(record.nonfinite)} non-finite values` }));
  if (record.constant) parts.push(h("span", { class: "warn", text: "constant: the same for every probe point (left out)" }));
  if (info.embedding && info.embedding.one_dimensional) parts.push(h("span", { text: "1-D: x = its values, y = a strip per class" }));
  const scoreParts = SCORE_NAMES.filter(([key]) => scores[key] !== undefined)
    .map(([key, name]) => h("span", { class: "score" }, `${name} `, h("b", { text: fmt(scores[key]) })));
  if (scoreParts.length) parts.push(h("span", { class: "method", text: `${method}:` }), ...scoreParts);
  return h("div", { class: "info", "data-testid": "info" }, parts);
}

/**
 * Legend of categories with counts; a click hides/shows one, "only" shows that one alone.
 * @param {{name: string, color: string, count: number}[]} items
 * @param {Set<number>} hidden indices of hidden items
 */
export function legend(title, items, hidden, onToggle, onSolo, onShowAll) {
  return h("section", { class: "legend", "data-testid": "legend" },
    h("h3", {}, title, hidden.size ? h("button", { type: "button", class: "link", text: "show all", onclick: onShowAll }) : null),
    h("ul", {}, items.map((item, i) => h("li", { class: hidden.has(i) ? "off" : null },
      h("button", {
        type: "button", class: "swatch-button", title: hidden.has(i) ? "show" : "hide",
        "aria-pressed": String(!hidden.has(i)), onclick: () => onToggle(i),
      }, h("span", { class: "swatch", style: `background:${item.color}` }), h("span", { class: "name", text: item.name })),
      h("span", { class: "count", text: fmt(item.count) }),
      h("button", { type: "button", class: "link solo", text: "only", title: `show only ${item.name}`, onclick: () => onSolo(i) })))));
}

/** Legend of a continuous colour ramp (`note`: a line below it, e.g. how many values are missing). */
export function rampLegend(title, colors, lo, hi, note = null) {
  return h("section", { class: "legend", "data-testid": "legend" },
    h("h3", { text: title }),
    h("div", { class: "ramp", style: `background:linear-gradient(to right,${colors.join(",")})` }),
    h("div", { class: "ramp-ticks" }, h("span", { text: lo }), h("span", { text: hi })),
    note ? h("p", { class: "hint", text: note }) : null);
}

/**
 * Draw raw thumbnail pixels ([h, w] grey, [h, w, 3|4] colour) into a canvas.
 * @param {number[]} shape @param {Uint8Array} pixels
 * @returns {HTMLCanvasElement}
 */
export function thumbnailCanvas(shape, pixels) {
  const [height, width, channels = 1] = shape;
  const canvas = h("canvas", { class: "thumb", width, height });
  const image = new ImageData(width, height);
  for (let p = 0; p < width * height; p++) {
    const rgba = image.data;
    if (channels === 1) {
      rgba[4 * p] = rgba[4 * p + 1] = rgba[4 * p + 2] = pixels[p];
    } else {
      for (let c = 0; c < 3; c++) rgba[4 * p + c] = pixels[channels * p + c];
    }
    rgba[4 * p + 3] = channels === 4 ? pixels[4 * p + 3] : 255;
  }
  canvas.getContext("2d").putImageData(image, 0, 0);
  return canvas;
}

/**
 * The hover card: thumbnail (or a placeholder while it loads), label, prediction, confidence, probe id, then the
 * probe's metadata columns. A probe with text and no thumbnails shows its text instead (`text`; the parts that
 * match `find`, a search's test, marked).
 * @param {{thumb: ?HTMLCanvasElement, label: string, prediction: string, confidence: ?number, id: number,
 *          index: number, correct: ?boolean, text?: ?string, find?: ?function(string): RegExp|null,
 *          meta?: {name: string, value: string}[]}} point
 */
export function hoverCard(point) {
  if (!point) return h("section", { class: "hover empty", "data-testid": "hover" }, "Hover a point to see its input.");
  const text = typeof point.text === "string" && !point.thumb;
  return h("section", { class: text ? "hover text" : "hover", "data-testid": "hover" },
    text ? h("blockquote", { class: "probe-text", "data-testid": "hover-text" }, marked(point.text, point.find))
      : point.thumb || h("div", { class: "thumb placeholder", text: point.thumbText || "" }),
    h("dl", {},
      h("dt", { text: "label" }), h("dd", { text: point.label }),
      h("dt", { text: "prediction" }),
      h("dd", { class: point.correct === false ? "wrong" : null, text: point.prediction }),
      h("dt", { text: "confidence" }), h("dd", { text: fmt(point.confidence, 3) }),
      h("dt", { text: "probe id" }), h("dd", { text: String(point.id) }),
      point.placed ? [h("dt", { text: "placed" }),
        h("dd", { class: "placed", "data-testid": "hover-placed", text: point.placed, title: point.placed })] : []),
    // the metadata under the thumbnail, the card's whole width: values wrap at spaces, not mid-word
    (point.meta || []).length ? h("dl", { class: "meta" },
      point.meta.flatMap(({ name, value }) => [h("dt", { text: name, title: name }), h("dd", { class: "meta", text: value })])) : null);
}

/** `text` as nodes, the matches of `find()` (a global RegExp, or null: none) in <mark>. */
function marked(text, find) {
  const re = find ? find() : null;
  if (!re || !text) return text || "(empty)";
  const out = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (!m[0]) break;
    out.push(text.slice(last, m.index), h("mark", { text: m[0] }));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}

/**
 * The search box over the probe's metadata: a query (a substring, or /regex/flags), the column it looks in (""
 * any), how many points match (or the query's error), and "hide the rest".
 * @param {{query: string, column: string, only: boolean, count: ?number, error: ?string,
 *          columns: {name: string, kind: string}[]}} search
 * @param {{query: function(string), column: function(string), only: function(boolean)}} on
 */
export function searchBox(search, on) {
  const input = h("input", {
    type: "search", value: search.query, placeholder: "word or /regex/", "aria-label": "search the probe metadata",
    "data-testid": "search", oninput: (e) => on.query(e.target.value),
  });
  const result = search.error ? h("span", { class: "warn", text: search.error })
    : search.count === null ? h("span", { class: "hint", text: "selects the matches" })
      : h("span", {}, h("b", { "data-testid": "search-count", text: fmt(search.count) }), " matching");
  return h("section", { class: "search", "data-testid": "search-box" },
    h("h3", { text: "Search" }),
    h("div", { class: "row" }, input,
      h("select", { name: "search-column", "aria-label": "column", onchange: (e) => on.column(e.target.value) },
        [{ name: "", label: "any column" }, ...search.columns].map((c) => h("option", {
          value: c.name, text: c.label || c.name, selected: c.name === search.column })))),
    h("div", { class: "row" }, result, h("span", { class: "spacer" }),
      h("label", { class: "only", title: "show only the selected points in the main view" },
        h("input", { type: "checkbox", checked: search.only, "data-testid": "only", onchange: (e) => on.only(e.target.checked) }),
        "hide the rest")));
}

/** Selection summary: count, clear and CSV export. */
export function selectionBar(count, total, onClear, onExport) {
  return h("section", { class: "selection", "data-testid": "selection" },
    h("h3", { text: "Selection" }),
    count
      ? h("p", {}, h("b", { "data-testid": "selection-count", text: fmt(count) }), ` of ${fmt(total)} points`)
      : h("p", { class: "hint" }, "Lasso or rectangle: draw around points. The selection follows the same probe ids across snapshots, layers, methods and runs."),
    h("div", { class: "row" },
      h("button", { type: "button", text: "Clear", disabled: !count, onclick: onClear }),
      h("button", { type: "button", text: "Export CSV", disabled: !count, onclick: onExport })));
}

/**
 * Snapshot slider with play/pause and the current step; `setSnapshotBar` updates it in place (so the slider
 * keeps the keyboard focus while the user steps through snapshots).
 */
export function snapshotBar(onInput, onPlay) {
  return h("div", { class: "snapshots" },
    h("button", { type: "button", class: "play", "data-testid": "play", onclick: onPlay }),
    h("input", {
      type: "range", min: "0", step: "1", "aria-label": "snapshot", "data-testid": "slider",
      oninput: (e) => onInput(Number(e.target.value)),
    }),
    h("span", { class: "step", "data-testid": "step" }),
    h("span", { class: "hint" }));
}

/** Which of a run's `fits` (its manifest's, each continuing the step count) trained the state at `step`:
 * " · fit k of n", or "" for a run fitted once. A fit's first snapshot, taken before it trained, is the previous
 * fit's result and counts as the previous fit's. */
export function fitOf(fits, step) {
  if (!fits || fits.length < 2) return "";
  const k = Math.max(1, fits.filter((f) => typeof f.first_step === "number" && f.first_step < step).length);
  return ` · fit ${k} of ${fits.length}`;
}

/** Show `steps` (position: index of the current one) in a bar made by `snapshotBar`; `fits`: the run's fits. */
export function setSnapshotBar(bar, steps, position, unit, playing, fits = []) {
  const [play, slider, step, hint] = bar.children;
  play.disabled = steps.length < 2;
  play.title = playing ? "pause" : "play through the snapshots";
  play.textContent = playing ? "❚❚" : "▶";
  slider.max = String(Math.max(steps.length - 1, 0));
  slider.value = String(position);
  slider.disabled = steps.length < 2;
  step.textContent = steps.length ? shown(`${unit} ${steps[position]}${fitOf(fits, steps[position])}`) : "no snapshot";
  hint.textContent = steps.length ? `${position + 1} / ${steps.length}` : "";
}

/** Why a job waits or how long it has run: "queued: 2 jobs ahead", "running 12 s of at most 600 s". */
export function jobWhen(job) {
  if (job.state === "queued" && typeof job.ahead === "number") {
    return job.ahead ? `queued: ${job.ahead} job${job.ahead === 1 ? "" : "s"} ahead` : "queued: next";
  }
  if (job.state === "running" && typeof job.elapsed === "number") {
    return `running ${Math.round(job.elapsed)} s${job.limit ? ` of at most ${Math.round(job.limit)} s` : ""}`;
  }
  return job.state === "queued" ? "queued" : "";
}

/** A background job's state: why it waits or how long it has run, a progress bar and a Cancel button while it
 * is queued or runs; the one-line reason when it failed. */
export function jobView(job, onDismiss, onCancel) {
  const what = job.kind === "meta" ? "the meta-SNE map"
    : job.kind === "similarity" ? `the ${job.method} heatmaps of ${job.params.runs.join(" × ")}` : `${job.method} of ${job.layer}`;
  if (job.state === "failed") {
    return h("div", { class: "job failed", role: "alert" },
      h("span", { text: `Computing ${what} failed: ${job.error || "unknown reason"}` }),
      h("button", { type: "button", class: "link", text: "dismiss", onclick: onDismiss }));
  }
  const p = job.progress || {};
  const fraction = typeof p.fraction === "number" ? p.fraction : null;
  const when = jobWhen(job);
  return h("div", { class: "job", "data-testid": "job" },
    h("span", { text: `Computing ${what}${p.stage ? ` (${p.stage}${p.total ? ` ${p.done}/${p.total}` : ""})` : ""}…` }),
    h("progress", fraction === null ? {} : { max: "1", value: String(fraction) }),
    when ? h("span", { class: "hint", "data-testid": "job-when", text: when }) : null,
    job.id ? h("button", { type: "button", class: "link", "data-testid": "cancel-job", text: "Cancel",
      title: "stop this job (what it has stored so far is kept)", onclick: onCancel }) : null);
}

/** A message in place of the scatter: what is missing and what to do. */
export function emptyState(title, ...lines) {
  return h("div", { class: "empty-state", "data-testid": "empty" }, h("h2", { text: title }), lines.map((l) => h("p", {}, l)));
}

/** Inline code span. */
export function code(text) {
  return h("code", { text });
}

/** One-line error banner (server messages are shown as they are). */
export function errorBanner(message, onDismiss) {
  return h("div", { class: "error", role: "alert", "data-testid": "error" }, h("span", { text: message }),
    h("button", { type: "button", class: "link", text: "dismiss", onclick: onDismiss }));
}

/** A one-line remark that is no error (e.g. a finished job skipped some snapshots). */
export function note(message, onDismiss) {
  return h("div", { class: "note", role: "status" }, h("span", { text: message }),
    h("button", { type: "button", class: "link", text: "dismiss", onclick: onDismiss }));
}

/**
 * A list of probe points with their thumbnails (filled in later by `fillThumb`) and a value each; a click on an
 * entry calls `onPick(index)`.
 * @param {{index: number, text: string, value: string}[]} items
 */
export function pointList(title, hint, items, onPick, testid) {
  return h("section", { class: "points", "data-testid": testid },
    h("h3", { text: title }),
    hint ? h("p", { class: "hint", text: hint }) : null,
    h("ol", {}, items.map((item) => h("li", {},
      h("button", { type: "button", class: "point", "data-index": String(item.index), onclick: () => onPick(item.index) },
        h("div", { class: "mini placeholder" }),
        h("span", { class: "name", text: item.text }),
        h("span", { class: "count", text: item.value }))))));
}

/** Put thumbnail `canvas` in place of the placeholder of entry `index` of a `pointList`. */
export function fillThumb(list, index, canvas) {
  const slot = list.querySelector(`button[data-index="${index}"] .mini`);
  if (!slot) return;
  canvas.classList.add("mini");
  slot.replaceWith(canvas);
}

/** Check boxes of runs, at most `max` checked; `onChange(names)`. */
export function runChecks(runs, checked, max, onChange) {
  return h("div", { class: "checks", "data-testid": "run-checks" },
    runs.map((name) => h("label", {},
      h("input", {
        type: "checkbox", value: name, checked: checked.includes(name),
        disabled: !checked.includes(name) && checked.length >= max,
        onchange: (e) => onChange(e.target.checked ? [...checked, name] : checked.filter((r) => r !== name)),
      }), h("span", { text: name }))));
}

/**
 * The meta-SNE picker: stored results with their figures, or the form that computes one.
 * @param {string[]} names @param {?string} chosen @param {?object} result the chosen one (for its figures)
 * @param {Object<string, string[]>} options the server's choices per field of the form, default first
 * @param {function(string): void} onPick @param {function(Object<string, string>): void} onCompute the value per field
 */
export function metaPanel(names, chosen, result, options, onPick, onCompute) {
  if (!names.length) {
    const fields = Object.keys(options);
    const form = h("form", { class: "meta-form" },
      fields.map((field) => picker(field[0].toUpperCase() + field.slice(1), field,
        options[field].map((v) => ({ value: v, label: v })), options[field][0], () => {})),
      h("button", { type: "submit", "data-testid": "compute-meta", text: "Compute the meta-SNE map" }));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      onCompute(Object.fromEntries(fields.map((field) => [field, form.elements[field].value])));
    });
    return h("div", { class: "meta-bar" }, h("span", { class: "hint", text: "No meta-SNE map is stored yet." }), form);
  }
  const figures = [];
  if (result) {
    // the share of the variance classical MDS shows: what the map is only where it is that map (not t-SNE's, SMACOF's)
    const mds = !result.params || !result.params.embedding || result.params.embedding === "mds";
    if (mds && result.explained_variance !== null && result.explained_variance !== undefined) {
      figures.push(h("span", {}, "explained variance ", h("b", { text: fmt(result.explained_variance) })));
    }
    if (result.robustness !== null && result.robustness !== undefined) {
      figures.push(h("span", {}, "robustness (dist vs CKA) ", h("b", { text: fmt(result.robustness) })));
    }
    figures.push(h("span", { text: `${fmt(result.keys.length)} representations` }));
    for (const note of result.notes || []) figures.push(h("span", { class: "hint", "data-testid": "meta-note", text: note }));
  }
  return h("div", { class: "meta-bar" },
    picker("Map", "meta", names.map((n) => ({ value: n, label: n })), chosen, onPick),
    h("span", { class: "figures", "data-testid": "meta-figures" }, figures));
}

/** The preview of a representation under the mouse in the meta map. */
export function previewCard(title, canvas, message) {
  return h("section", { class: "preview", "data-testid": "preview" }, h("h3", { text: title }),
    canvas || h("p", { class: "hint", text: message || "" }));
}
