// The parts the Main view shows around its scatter: the tools, the message when there is nothing to draw, the
// legend, the side panels (the points whose neighbourhood changed most, a point's nearest neighbours) and the note
// on points placed into the layout. DOM builders with callbacks, as dom.js's; the view decides when to show them.
import { changeRamp, ramp } from "./colors.js";
import * as V from "./dom.js";
import { MAX_TRAILS } from "./mainlayers.js";

const { h } = V;

const TOP_CHANGED = 12;
const LEGEND_TITLES = { label: "Label", prediction: "Prediction", correct: "Prediction vs label", confidence: "Confidence",
  change: "Neighbourhood change" };

/** The class name of code `c` in the drawn run ("" for none). */
function className(drawn, c) {
  const names = drawn.run.class_names;
  return c < 0 || !Number.isFinite(c) ? "" : names ? names[c] : String(c);
}

/**
 * The tools: mouse mode (`mode`), reset, and the trails and contours toggles (`on`: whether each is on).
 * @param {{mode: function(string), reset: function(), toggle: function(string)}} callbacks
 */
export function tools(mode, on, callbacks) {
  return [
    V.segmented("mode", V.MOUSE_MODES, mode, callbacks.mode),
    V.resetButton("zoom out to all points", callbacks.reset),
    h("button", {
      type: "button", class: on.trails ? "on" : null, "data-testid": "trails", text: "Trails",
      title: `paths of the selected points (at most ${MAX_TRAILS}) across the snapshots of this layer`,
      "aria-pressed": String(on.trails), onclick: () => callbacks.toggle("trails"),
    }),
    h("button", {
      type: "button", class: on.contours ? "on" : null, "data-testid": "contours", text: "Contours",
      title: "density contours (per class when colouring by label)", "aria-pressed": String(on.contours),
      onclick: () => callbacks.toggle("contours"),
    }),
  ];
}

/**
 * What the Main view shows instead of a scatter: no run in the log directory (`run` null), an embedding being
 * computed (one of `jobs`), or none of the chosen layer yet.
 * @param {import("./view.js").State} s
 */
export function nothingToDraw(run, s, jobs) {
  if (!run) {
    return V.emptyState("No repviz data in this log directory",
      h("span", {}, "Add ", V.code("repviz.ActivationLogger"), " to ", V.code("model.fit"),
        " callbacks; runs appear here while training writes them."));
  }
  const job = jobs.find((j) => j.run === s.run && j.layer === s.layer && `compute:${j.method}` === s.method);
  return job && job.state !== "failed"
    ? V.emptyState(`Computing ${job.method} for ${s.layer}…`, "The points appear when the first snapshot is embedded.")
    : V.emptyState(`No embedding of ${s.layer || "this run"} yet`,
      h("span", {}, "Run ", V.code(`repviz embed ${"logs"}`), " or pick a method to compute it in the method menu.",
        (run.placed_into || []).length ? ` Its points are placed into the layouts of run ${run.placed_into.join(", ")}: `
          + "pick that run to see them there." : ""));
}

/**
 * The legend of colour encoding `colors` (colors.js): a ramp for values, or the categories, which `setHidden`
 * hides or shows (`hiddenCodes`: the codes hidden now).
 */
export function legendOf(colors, hiddenCodes, setHidden) {
  const title = LEGEND_TITLES[colors.mode] || colors.title;
  if (colors.range) { // a metadata column of numbers
    const { lo, hi, stops, missing } = colors.range;
    return V.rampLegend(title, stops, V.fmt(lo, 3), V.fmt(hi, 3), missing ? `${V.fmt(missing)} missing (grey)` : null);
  }
  if (!colors.items) {
    const ends = colors.mode === "change" ? ["0 (same neighbours)", "1 (all new)"] : ["0 (unsure)", "1 (sure)"];
    const stops = colors.mode === "change" ? changeRamp(8) : ramp(8);
    const grey = colors.mode === "change" ? "not in the snapshot compared with" : "without a prediction";
    return V.rampLegend(title, stops, ...ends, colors.missing ? `${V.fmt(colors.missing)} ${grey} (grey)` : null);
  }
  const items = colors.items;
  const hidden = new Set([...hiddenCodes].map((code) => items.findIndex((it) => it.index === code)).filter((i) => i >= 0));
  const codeOf = (i) => items[i].index;
  return V.legend(title, items, hidden,
    (i) => {
      const next = new Set(hiddenCodes);
      if (next.has(codeOf(i))) next.delete(codeOf(i));
      else next.add(codeOf(i));
      setHidden(next);
    },
    (i) => setHidden(new Set(items.filter((_, j) => j !== i).map((it) => it.index))),
    () => setHidden(new Set()));
}

/** The nearest neighbours of the focused point (`knn`: {index, neighbors, distances}, rows of `drawn`). */
export function knnPanel(drawn, knn, onFocus) {
  const { index, neighbors, distances } = knn;
  return V.pointList(`Nearest neighbours of #${drawn.ids[index]}`,
    `In the original ${drawn.chosen.layer} activations (not the 2-D map); ringed in the plot.`,
    neighbors.map((j, r) => ({ index: j, text: `#${drawn.ids[j]} ${className(drawn, drawn.labels[j])}`, value: V.fmt(distances[r], 2) })),
    onFocus, "knn");
}

/**
 * The points whose neighbourhood changed most against `drawn.base`, with the picker of what to compare with
 * (`changeVs`: "previous" or "layer:<name>", `onVs(value)`) and `layer`, the drawn layer. Returns the panel and
 * the rows it lists.
 */
export function changePanel(drawn, layer, changeVs, onVs, onFocus) {
  const run = drawn.run;
  const options = [{ value: "previous", label: "previous snapshot" },
    ...run.layers.filter((l) => l.name !== layer).map((l) => ({ value: `layer:${l.name}`, label: `layer ${l.name}` }))];
  const vs = V.picker("vs", "change-vs", options, changeVs, onVs);
  if (!drawn.change) {
    return [h("section", { class: "points", "data-testid": "changed" }, h("h3", { text: "Neighbourhood change" }), vs,
      h("p", { class: "hint", text: drawn.base ? "Not available (see the message above)." : "The first snapshot has no previous one: pick a layer to compare with." })), []];
  }
  const order = Array.from(drawn.change.keys()).filter((i) => Number.isFinite(drawn.change[i]))
    .sort((a, b) => drawn.change[b] - drawn.change[a]).slice(0, TOP_CHANGED);
  let mean = 0;
  let counted = 0; // points of a snapshot of another probe subset have no value (NaN)
  for (const v of drawn.change) {
    if (Number.isFinite(v)) {
      mean += v;
      counted += 1;
    }
  }
  mean /= Math.max(counted, 1);
  const base = drawn.base;
  const list = V.pointList("Changed most",
    `vs ${base.layer === layer ? `${run.step_unit} ${base.step}` : base.layer}: mean ${V.fmt(mean, 2)}; click one for its neighbours.`,
    order.map((i) => ({ index: i, text: `#${drawn.ids[i]} ${className(drawn, drawn.labels[i])}`, value: V.fmt(drawn.change[i], 2) })),
    onFocus, "changed");
  list.insertBefore(vs, list.children[1]);
  return [list, order];
}

/** Thumbnails of rows `indices` of snapshot `drawn` in the entries of `list` (a pointList), one after the other. */
export async function fillThumbs(model, list, drawn, indices, onError) {
  if (!drawn.run.has_thumbnails) return;
  for (const i of indices) {
    try {
      const { shape, pixels } = await model.thumbnail(drawn.run.name, drawn.rows[i]);
      V.fillThumb(list, i, V.thumbnailCanvas(shape, pixels));
    } catch (e) {
      onError(e);
      return;
    }
  }
}

/** The note naming the runs placed into this layout (the rings' legend), and those placed before it changed. */
export function placedNoteLines(placed) {
  return placed.map((p) => (p.stale
    ? `${p.run}: placed before this layout was computed again (run repviz place again)`
    : `\u25ef ${p.run}: ${p.n} points placed into this layout${p.scores && p.scores.knn_accuracy !== undefined
      ? `, 10-NN accuracy ${V.fmt(p.scores.knn_accuracy, 2)}` : ""}`));
}
