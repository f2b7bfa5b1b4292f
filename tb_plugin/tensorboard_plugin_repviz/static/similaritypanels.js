// The parts the Similarity view shows around its heatmap: the bar of pickers (mode, runs or layer, measure and its
// options), the notes under the pair (the layer identification, how the values came, what the server left out) with
// the list of layers to show, the overlay over a heatmap not computed yet, and the `repviz similarity` command that
// computes it. DOM builders with callbacks, as mainpanels.js's; the view decides when to show them.
import { runNamed } from "./choice.js";
import * as V from "./dom.js";
import { identification, labelOf } from "./similarityparts.js";

const { h } = V;

const MODES = [
  { value: "layers", label: "layers × layers", title: "the layers of two runs (or one) at one snapshot" },
  { value: "steps", label: "snapshots × snapshots", title: "one layer at every snapshot against itself: how training moved it" },
];

/**
 * The bar's pickers of `pick` (the heatmap shown); `set(changes)` applies a choice.
 * @param {{measure: string[], kernel: string[], options: Object<string, string[]>}} choices the run index's
 */
export function pickerBar(index, pick, choices, set) {
  const p = pick;
  const runOptions = index.runs.map((r) => ({ value: r.name, label: r.name }));
  const run = runNamed(index, p.run);
  const parts = [V.segmented("similarity-mode", MODES, p.mode, (v) => set({ mode: v }))];
  parts.push(V.picker(p.mode === "layers" ? "Rows" : "Run", "similarity-run", runOptions, p.run, (v) => set({ run: v })));
  if (p.mode === "layers") {
    parts.push(V.picker("Columns", "similarity-run2", runOptions, p.run2, (v) => set({ run2: v })));
  } else {
    const layers = run ? run.layers.map((l) => ({ value: l.name, label: l.name })) : [];
    parts.push(V.picker("Layer", "similarity-layer", layers, p.layer, (v) => set({ layer: v })));
  }
  const c = choices;
  parts.push(V.picker("Measure", "similarity-measure", c.measure.map((m) => ({ value: m, label: m })), p.measure,
    (v) => set({ measure: v })));
  if (c.options[p.measure].includes("kernel")) {
    parts.push(V.picker("Kernel", "similarity-kernel", c.kernel.map((k) => ({ value: k, label: k })), p.kernel,
      (v) => set({ kernel: v })));
  }
  if (c.options[p.measure].includes("debiased")) {
    parts.push(h("label", { class: "picker", title: "the unbiased HSIC estimator (Song et al. 2007): near 0 for unrelated representations" },
      h("input", { type: "checkbox", name: "similarity-debiased", checked: p.debiased,
        onchange: (e) => set({ debiased: e.target.checked }) }), h("span", { text: "debiased" })));
  }
  return parts;
}

/**
 * What the matrix drawn (`matrix`, `full` as the server sent it) says as a whole (the layer identification across
 * two runs), how its values were obtained (`byJob`: the line of the background job that just computed them, or
 * null) and which representations the server left out.
 */
export function summaryNotes(matrix, full, byJob) {
  const m = matrix;
  const found = m.rows.length && m.cols.length ? identification(m) : null;
  // the values a job of this page just computed are read from the cache: say what the job did instead
  const notes = m.notes.map((note) => h("p", { class: "hint", "data-testid": "similarity-note",
    text: byJob && note.startsWith("read all ") ? `just computed by the background job: ${byJob}` : note }));
  if (found) {
    notes.unshift(h("p", { "data-testid": "identification" }, "Layer identification: ", h("b", { text: `${found.hits} of ${found.rows}` }),
      ` layers of run ${m.rows[0][0]} are most alike the layer of the same name in run ${m.cols[0][0]}.`));
  }
  const left = full.left_out || [];
  if (left.length) {
    const byReason = new Map(); // a reason shared by several layers is said once
    for (const o of left) byReason.set(o.reason, [...(byReason.get(o.reason) || []), o.key[1]]);
    const parts = [...byReason].map(([reason, layers]) => `${layers.join(", ")} (${reason})`);
    notes.push(h("p", { class: "warn", "data-testid": "similarity-left-out",
      text: `Left out (empty cells): ${parts.join("; ")}` }));
  }
  return notes;
}

/**
 * Checkboxes of the rows and columns of `full` to show (by layer, or by snapshot over training): unticking one adds
 * its label (labelOf) to `hidden`, ticking it removes it, "hide left-out" adds the holes'; then `apply()`.
 * @param {Set<string>} hidden
 */
export function layerList(full, mode, hidden, apply) {
  const labels = [...new Set([...full.rows, ...full.cols].map((k) => labelOf(mode, k)))];
  const holes = new Set((full.left_out || []).map((o) => labelOf(mode, o.key)));
  const boxes = labels.map((label) => h("label", { class: "picker" },
    h("input", { type: "checkbox", name: "similarity-show", value: label, checked: !hidden.has(label),
      onchange: (e) => {
        if (e.target.checked) hidden.delete(label);
        else hidden.add(label);
        apply();
      } }),
    h("span", { text: holes.has(label) ? `${label} (left out)` : label })));
  const hideHoles = holes.size ? h("button", { type: "button", "data-testid": "hide-left-out", text: "hide left-out",
    onclick: () => {
      holes.forEach((label) => hidden.add(label));
      apply();
    } }) : null;
  const shown = labels.filter((l) => !hidden.has(l)).length;
  return h("details", { class: "sim-layers", "data-testid": "similarity-layers", open: hidden.size > 0 },
    h("summary", { text: `${mode === "layers" ? "Layers" : "Snapshots"} shown: ${shown} of ${labels.length}` }),
    h("div", { class: "sim-layer-boxes" }, boxes, hideHoles));
}

/**
 * Over a heatmap of `pick` not computed yet: what is missing, with the button that computes it (`compute`) or the
 * progress of `job` (the page's job computing it, or undefined), and the shell command that does the same.
 */
export function missingOverlay(pick, choices, job, compute) {
  const p = pick;
  const what = p.mode === "layers"
    ? `The ${p.measure} heatmap of run ${p.run} against run ${p.run2} is not computed yet.`
    : `The ${p.measure} heatmap of ${p.layer} over training (run ${p.run}) is not computed yet.`;
  const scope = p.mode === "layers" ? "every snapshot the runs share" : "every snapshot of the layer";
  const progress = job && job.progress;
  return h("div", { class: "empty-state" },
    h("h2", { text: job ? "Computing…" : "Not computed yet" }),
    h("p", { text: what }),
    job
      ? h("p", {}, h("progress", progress && typeof progress.fraction === "number" ? { max: "1", value: String(progress.fraction) } : {}),
        progress && progress.total ? ` ${progress.done} / ${progress.total}` : "", ` ${V.jobWhen(job)}`)
      : h("button", { type: "button", "data-testid": "compute-similarity", text: `Compute (${scope})`, onclick: compute }),
    h("p", { class: "hint" }, "or from a shell: ", V.code(command(pick, choices))));
}

/** The `repviz similarity` command that computes the heatmap of `pick` (at its snapshot). */
function command(pick, choices) {
  const p = pick;
  const takes = choices.options[p.measure];
  const parts = ["repviz similarity LOGDIR", p.mode === "layers"
    ? `--runs ${[...new Set([p.run, p.run2])].join(",")} --step ${p.step}` : `--runs ${p.run} --layer ${p.layer}`];
  if (p.measure !== choices.measure[0]) parts.push(`--measure ${p.measure}`);
  if (takes.includes("kernel") && p.kernel !== choices.kernel[0]) parts.push(`--kernel ${p.kernel}`);
  if (takes.includes("debiased") && !p.debiased) parts.push("--biased");
  return parts.join(" ");
}
