// The page's header and status bar: the view switch, the run, layer and method pickers (the embeddings stored for
// the layer, and a "compute …" entry for each method not stored yet), the colour controls and the Export PNG button;
// the status bar's error, notes and background jobs. DOM builders with callbacks, as dom.js's; the page decides
// when to show them.
import { runNamed } from "./choice.js";
import * as V from "./dom.js";

const { h } = V;

const COLOR_MODES = [
  { value: "label", label: "label", title: "colour by true class" },
  { value: "prediction", label: "prediction", title: "colour by predicted class" },
  { value: "correct", label: "correct?", title: "correct vs wrong predictions" },
  { value: "confidence", label: "confidence", title: "colour by the prediction's confidence" },
  { value: "change", label: "change", title: "neighbourhood change in the original space (1 − Jaccard of the 10 nearest neighbours)" },
];

/**
 * The header's parts for the shared `state` over `index`: the switch of `views` (`shown` chosen), the pickers and
 * the colour controls (each control's `data-control` names the chrome part that hides it) and the export button.
 * @param {{view: function(string): void, change: function(Partial<import("./view.js").State>): void,
 *          exportPng: function(): void}} on
 */
export function header(index, state, views, shown, on) {
  const s = state;
  const run = runNamed(index, s.run);
  const runOptions = index.runs.map((r) => ({ value: r.name, label: `${r.name} (${V.fmt(r.n_probe)})` }));
  // a run written through the store by other code may not name its layers' classes
  const layerOptions = run ? run.layers.map((l) => ({ value: l.name, label: l.class ? `${l.name} · ${l.class}` : l.name })) : [];
  const methodOptions = [];
  let method = s.method;
  if (run) {
    const stored = run.embeddings.filter((e) => (e.steps[s.layer] || []).length);
    const counts = {};
    for (const e of stored) counts[e.method] = (counts[e.method] || 0) + 1;
    const about = Object.fromEntries(index.choices.methods.map((m) => [m.name, m.description || ""]));
    for (const e of stored) {
      methodOptions.push({ value: e.key, title: about[e.method],
        label: counts[e.method] > 1 ? `${e.method} · ${e.key}${e.default ? " (default)" : ""}` : e.method });
    }
    for (const { name, description } of index.choices.methods) {
      if (!stored.some((e) => e.method === name)) {
        methodOptions.push({ value: `compute:${name}`, title: description,
          label: `compute ${name}${description ? ` — ${description}` : ""}…` });
      }
    }
    // nothing stored chosen: a placeholder shows, so that choosing any entry (the first too) is a change
    if (!methodOptions.some((o) => o.value === s.method)) {
      methodOptions.unshift({ value: "", label: "choose a method…", disabled: true });
      method = ""; // selected: a browser would show the first entry that can be chosen
    }
  }
  const hasPreds = Boolean(run && run.prediction_steps.length);
  const hasLabels = Boolean(run && run.has_labels);
  const colorModes = COLOR_MODES.filter((m) => !((m.value !== "label" && m.value !== "change" && !hasPreds) ||
    (m.value === "correct" && !hasLabels)));
  const control = (name, el) => {
    el.dataset.control = name; // hidden on a view whose chrome leaves it out
    return el;
  };
  return [
    V.segmented("view", views.map((v) => ({ value: v.name, label: v.label, title: v.title })), shown.name, on.view),
    control("run", V.picker("Run", "run", runOptions, s.run, (v) => on.change({ run: v }))),
    control("layer", V.picker("Layer", "layer", layerOptions, s.layer, (v) => on.change({ layer: v }))),
    control("method", V.picker(shown.methodLabel || "Method", "method", methodOptions, method, (v) => on.change({ method: v }))),
    h("span", { class: "spacer" }),
    // the colour controls and the button wrap to a second line together, if at all
    h("span", { class: "bar-end" }, h("span", { class: "picker", "data-control": "colour" }, h("span", { text: shown.colourLabel || "Colour" }),
      V.segmented("color", colorModes, s.colorBy, (v) => on.change({ colorBy: v })),
      run && (run.metadata || []).length ? h("select", {
        name: "color-column", "aria-label": "colour by a metadata column", class: s.colorBy.startsWith("meta:") ? "on" : null,
        onchange: (e) => on.change({ colorBy: e.target.value || "label" }),
      }, [{ value: "", label: "column…" }, ...run.metadata.map((c) => ({ value: `meta:${c.name}`, label: `${c.name} (${c.kind})` }))]
        .map((o) => h("option", { value: o.value, text: o.label, selected: o.value === s.colorBy }))) : null),
    h("button", { type: "button", class: "export", "data-testid": "export-png", text: "Export PNG",
      title: "save this view as drawn (overlays included) as a PNG file", onclick: () => on.exportPng() })),
  ];
}

/**
 * The status bar's parts: `error` (null: none) with `dismissError`, and the notes and background jobs of `jobs`
 * (jobs.js), each dismissable (a job cancellable).
 * @param {import("./jobs.js").Jobs} jobs
 */
export function statusParts(error, dismissError, jobs) {
  const parts = [];
  if (error) parts.push(V.errorBanner(error, dismissError));
  jobs.notes.forEach((note, i) => parts.push(V.note(note, () => jobs.dismissNote(i))));
  for (const [id, job] of jobs.entries()) parts.push(V.jobView(job, () => jobs.dismiss(id), () => jobs.cancel(id)));
  return parts;
}
