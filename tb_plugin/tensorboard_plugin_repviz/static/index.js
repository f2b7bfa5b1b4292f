// The Repviz tab. TensorBoard loads this module in an iframe whose page has <base href="plugin/repviz/"> and
// calls render(). State lives here; model.js fetches, views.js builds DOM, scatter.js draws.
//
// Instrumentation (read by tests/browser and benchmarks/bench_plugin.py, nothing else):
//   window.__repvizStats = {draws, n, drawnMs, transitions, transitionFrames}
//   draws: completed draws; n: points in the last one; drawnMs: from the user's choice of a representation to
//   its draw having completed; transitionFrames: frame intervals (ms) during the last animated transition.
import { Model } from "./model.js";
import { Scatter, normalise } from "./scatter.js";
import * as V from "./views.js";

const { h } = V;

// Tableau 10, then grey for "no class".
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#bab0ac"];
const NO_CLASS = "#c7c7c7";
const CORRECT = ["#9aa5b1", "#d62728", NO_CLASS];
const RAMP_STOPS = [[215, 48, 39], [252, 174, 97], [44, 123, 182]];
const PLAY_MS = 1300;

/** Colour of category i of n (Tableau 10, then evenly spaced hues). */
function categoryColor(i) {
  if (i < PALETTE.length) return PALETTE[i];
  return `hsl(${(i * 137.508) % 360}, 55%, 50%)`;
}

/** A ramp of `count` hex colours through RAMP_STOPS (low confidence red, high blue). */
function ramp(count) {
  const hex = (v) => Math.round(v).toString(16).padStart(2, "0");
  return Array.from({ length: count }, (_, i) => {
    const t = (i / (count - 1)) * (RAMP_STOPS.length - 1);
    const k = Math.min(Math.floor(t), RAMP_STOPS.length - 2);
    const f = t - k;
    const c = RAMP_STOPS[k].map((a, j) => a + f * (RAMP_STOPS[k + 1][j] - a));
    return `#${c.map(hex).join("")}`;
  });
}

/** The last element of sorted `steps` that is <= step (or the first). */
function stepAtOrBefore(steps, step) {
  let best = steps[0];
  for (const s of steps) if (s <= step) best = s;
  return best;
}

/** Whether two {run, layer, key, step} choices name the same representation. */
function sameChoice(a, b) {
  return a.run === b.run && a.layer === b.layer && a.key === b.key && a.step === b.step;
}

const COLOR_MODES = [
  { value: "label", label: "label", title: "colour by true class" },
  { value: "prediction", label: "prediction", title: "colour by predicted class" },
  { value: "correct", label: "correct?", title: "correct vs wrong predictions" },
  { value: "confidence", label: "confidence", title: "colour by the prediction's confidence" },
];
const MOUSE_MODES = [
  { value: "pan", label: "pan", title: "drag to pan, wheel to zoom" },
  { value: "lasso", label: "lasso", title: "draw around points to select them" },
  { value: "rectangle", label: "rectangle", title: "drag a rectangle to select points" },
];

class App {
  constructor(root) {
    this.model = new Model();
    this.state = {
      run: null, layer: null, method: null, step: null, colorBy: "label", mode: "pan",
      hidden: new Set(), selectedIds: new Set(), playing: false, hover: null,
    };
    this.error = null;
    this.notes = []; // one-line remarks of finished jobs (e.g. snapshots skipped)
    this.jobs = new Map(); // jobs this page started, by id
    this.view = null; // data of the drawn representation
    this.generation = 0;
    this.choiceTime = performance.now();

    this.el = {
      header: h("header", { class: "bar" }),
      status: h("div", { class: "status" }),
      info: h("div", { class: "info-slot" }),
      canvas: h("canvas", { class: "scatter", "data-testid": "scatter" }),
      overlay: h("div", { class: "overlay" }),
      tools: h("div", { class: "tools" }),
      hover: h("div", {}, V.hoverCard(null)),
      legend: h("div", {}),
      selection: h("div", {}),
      snapshots: V.snapshotBar((p) => this.onSlider(p), () => this.togglePlay()),
    };
    root.append(h("div", { class: "repviz" },
      this.el.header, this.el.status, this.el.info,
      h("main", {},
        h("div", { class: "plot" }, this.el.canvas, this.el.tools, this.el.overlay),
        h("aside", {}, this.el.hover, this.el.legend, this.el.selection)),
      h("footer", {}, this.el.snapshots)));
    this.scatter = new Scatter(this.el.canvas, {
      onHover: (i) => this.onHover(i),
      onSelect: (indices) => this.onLasso(indices),
    });
  }

  async start() {
    this.renderStatus();
    try {
      await this.model.loadRuns();
    } catch (e) {
      this.showError(e);
      this.renderEmpty(V.emptyState("Cannot read the log directory", e.message));
      return;
    }
    this.onIndex();
    this.model.startPolling(() => this.onIndex(), (e) => this.showError(e));
  }

  // --- what is current ---------------------------------------------------------------------------------------

  get index() {
    return this.model.index;
  }

  get run() {
    return this.index.runs.find((r) => r.name === this.state.run) || null;
  }

  /** The stored embedding chosen in the method picker (null for a "compute" entry or nothing). */
  get embedding() {
    const run = this.run;
    return run ? run.embeddings.find((e) => e.key === this.state.method) || null : null;
  }

  /** Snapshot steps of the chosen embedding for the chosen layer. */
  get steps() {
    const e = this.embedding;
    return (e && e.steps[this.state.layer]) || [];
  }

  /** Choose run / layer / method / step that exist, keeping the user's choices where they still apply. */
  resolve() {
    const s = this.state;
    const runs = this.index.runs;
    if (!runs.some((r) => r.name === s.run)) s.run = runs.length ? runs[0].name : null;
    const run = this.run;
    if (!run) return;
    const withEmbeddings = run.layers.filter((l) => run.embeddings.some((e) => (e.steps[l.name] || []).length));
    if (!run.layers.some((l) => l.name === s.layer)) s.layer = (withEmbeddings[0] || run.layers[0] || {}).name ?? null;
    const stored = run.embeddings.filter((e) => (e.steps[s.layer] || []).length);
    const computing = typeof s.method === "string" && s.method.startsWith("compute:") ? s.method.slice(8) : null;
    const computed = computing && stored.find((e) => e.method === computing);
    if (computed) s.method = computed.key; // the job finished (or someone else computed it)
    if (!computing && !stored.some((e) => e.key === s.method)) {
      const previous = run.embeddings.find((e) => e.key === s.method);
      const same = previous && stored.find((e) => e.method === previous.method);
      s.method = (same || stored.find((e) => e.default && e.method === "tsne") || stored.find((e) => e.default) ||
        stored[0] || {}).key ?? null;
    }
    const steps = this.steps;
    if (steps.length && !steps.includes(s.step)) s.step = s.step === null ? steps[steps.length - 1] : stepAtOrBefore(steps, s.step);
  }

  // --- events ------------------------------------------------------------------------------------------------

  onIndex() {
    this.resolve();
    this.renderControls();
    this.update({ transition: true, quiet: true });
  }

  choose(changes, { transition = true } = {}) {
    this.choiceTime = performance.now();
    Object.assign(this.state, changes);
    if (changes.method && changes.method.startsWith("compute:")) this.startCompute(changes.method.slice(8));
    this.resolve();
    this.renderControls();
    this.update({ transition });
  }

  setColorBy(colorBy) {
    this.state.colorBy = colorBy;
    this.state.hidden = new Set();
    this.renderControls();
    this.update({ transition: false });
  }

  setMode(mode) {
    this.state.mode = mode;
    this.scatter.setMode(mode);
    this.renderControls();
  }

  onSlider(position) {
    const steps = this.steps;
    if (!steps.length) return;
    this.choose({ step: steps[position] });
  }

  togglePlay() {
    const s = this.state;
    s.playing = !s.playing;
    clearInterval(this.playTimer);
    if (s.playing) {
      const steps = this.steps;
      if (steps.indexOf(s.step) === steps.length - 1) this.choose({ step: steps[0] });
      this.playTimer = setInterval(() => {
        const all = this.steps;
        const next = all.indexOf(this.state.step) + 1;
        if (next >= all.length) this.togglePlay();
        else this.choose({ step: all[next] });
      }, PLAY_MS);
    }
    this.renderFooter();
  }

  onLasso(indices) {
    const view = this.view;
    if (!view) return;
    this.state.selectedIds = new Set(indices.map((i) => view.ids[i]));
    this.renderSelection();
  }

  clearSelection() {
    this.state.selectedIds = new Set();
    this.scatter.select([]);
    this.renderSelection();
  }

  showError(e) {
    this.error = e ? e.message || String(e) : null;
    this.renderStatus();
  }

  // --- drawing -----------------------------------------------------------------------------------------------

  /** Fetch what the current choice needs and draw it; a newer choice made meanwhile wins. */
  async update({ transition, quiet = false }) {
    const generation = ++this.generation;
    const s = this.state;
    const run = this.run;
    const chosen = { run: s.run, layer: s.layer, key: s.method, step: s.step };
    if (!run) {
      this.renderEmpty(V.emptyState("No repviz data in this log directory",
        h("span", {}, "Add ", V.code("repviz.ActivationLogger"), " to ", V.code("model.fit"),
          " callbacks; runs appear here while training writes them.")));
      return;
    }
    if (!this.embedding || !this.steps.length) {
      const job = [...this.jobs.values()].find((j) => j.run === s.run && j.layer === s.layer && `compute:${j.method}` === s.method);
      this.renderEmpty(job && job.state !== "failed"
        ? V.emptyState(`Computing ${job.method} for ${s.layer}…`, "The points appear when the first snapshot is embedded.")
        : V.emptyState(`No embedding of ${s.layer || "this run"} yet`,
          h("span", {}, "Run ", V.code(`repviz embed ${"logs"}`), " or pick a method to compute it in the method menu.")));
      return;
    }
    const predSteps = run.prediction_steps;
    const predStep = predSteps.length ? stepAtOrBefore(predSteps, s.step) : null;
    let data;
    try {
      const [coords, labels, ids, preds] = await Promise.all([
        this.model.coords(s.run, s.layer, s.step, s.method),
        this.model.labels(s.run),
        this.model.ids(s.run),
        predStep === null ? null : this.model.predictions(s.run, predStep),
      ]);
      data = { coords, labels, ids, preds };
    } catch (e) {
      if (generation !== this.generation) return;
      this.showError(e);
      if (!this.view) this.renderEmpty(V.emptyState("Could not load this embedding", e.message));
      return;
    }
    if (generation !== this.generation || !this.isCurrent(chosen)) return;
    if (quiet && this.view && sameChoice(this.view.chosen, chosen) && !this.el.overlay.classList.contains("shown")) {
      this.view.run = run; // arrays of one representation never change: only the index was re-read
      return;
    }
    this.renderEmpty(null);
    if (this.view && this.view.run.name !== run.name) this.el.hover.replaceChildren(V.hoverCard(null));
    const { x, y } = normalise(data.coords);
    const n = x.length;
    const idIndex = this.view && this.view.ids === data.ids ? this.view.idIndex : new Map(Array.from(data.ids, (id, i) => [id, i]));
    this.view = { run, chosen, ...data, x, y, n, idIndex };
    const colors = this.colorEncoding();
    this.view.colors = colors;
    this.scatter.setColors(colors.by, colors.palette);
    const started = this.choiceTime;
    await this.scatter.draw({ x, y, z: colors.z, w: colors.w }, {
      transition,
      selected: this.selectedIndices(),
      visible: this.visibleIndices(),
    });
    if (generation === this.generation) {
      const stats = window.__repvizStats;
      stats.draws += 1;
      stats.n = n;
      stats.drawnMs = performance.now() - started;
    }
    this.renderLegend();
    this.renderSelection();
    this.renderInfo(chosen);
  }

  /** Whether `chosen` is still what the pickers say. */
  isCurrent(chosen) {
    const s = this.state;
    return sameChoice(chosen, { run: s.run, layer: s.layer, key: s.method, step: s.step });
  }

  /** Per-point category (z), value (w), palette and legend entries for the colour mode. */
  colorEncoding() {
    const { run, labels, preds, n } = this.view;
    const mode = this.state.colorBy === "label" || preds ? this.state.colorBy : "label";
    const z = new Float32Array(n);
    const w = new Float32Array(n);
    const names = run.class_names || Array.from({ length: run.n_classes }, (_, i) => String(i));
    const classes = names.length;
    if (mode === "confidence") {
      for (let i = 0; i < n; i++) w[i] = Number.isFinite(preds.conf[i]) ? preds.conf[i] : 0;
      return { by: "value", z, w, palette: ramp(32), mode, items: null };
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

  selectedIndices() {
    const { idIndex } = this.view;
    const out = [];
    for (const id of this.state.selectedIds) {
      const i = idIndex.get(id);
      if (i !== undefined) out.push(i);
    }
    return out;
  }

  /** Indices of points whose category is not hidden (null when nothing is hidden). */
  visibleIndices() {
    const hidden = this.state.hidden;
    if (!hidden.size || !this.view.colors.items) return null;
    const z = this.view.colors.z;
    const out = [];
    for (let i = 0; i < z.length; i++) if (!hidden.has(z[i])) out.push(i);
    return out;
  }

  setHidden(hidden) {
    this.state.hidden = hidden;
    this.scatter.filter(this.visibleIndices());
    this.scatter.select(this.selectedIndices());
    this.renderLegend();
  }

  // --- hover -------------------------------------------------------------------------------------------------

  async onHover(index) {
    this.state.hover = index;
    const view = this.view;
    if (index === null || !view || index >= view.n) return; // keep the last card while the mouse moves on
    const run = view.run;
    const names = run.class_names || null;
    const className = (c) => (c < 0 || !Number.isFinite(c) ? "–" : names ? names[c] : String(c));
    const point = {
      index,
      id: view.ids[index],
      label: className(view.labels[index]),
      prediction: view.preds ? className(view.preds.cls[index]) : "–",
      confidence: view.preds ? view.preds.conf[index] : null,
      correct: view.preds && view.labels[index] >= 0 ? view.preds.cls[index] === view.labels[index] : null,
      thumb: null,
      thumbText: run.has_thumbnails ? "loading…" : "no thumbnail",
    };
    this.el.hover.replaceChildren(V.hoverCard(point));
    if (!run.has_thumbnails) return;
    try {
      const { shape, pixels } = await this.model.thumbnail(run.name, index);
      if (this.state.hover !== index || this.view !== view) return;
      point.thumb = V.thumbnailCanvas(shape, pixels);
      this.el.hover.replaceChildren(V.hoverCard(point));
    } catch (e) {
      this.showError(e);
    }
  }

  // --- background jobs ---------------------------------------------------------------------------------------

  async startCompute(method) {
    const { run, layer } = this.state;
    for (const [id, job] of this.jobs) {
      if (job.state === "failed" && job.run === run && job.layer === layer && job.method === method) this.jobs.delete(id);
    }
    try {
      const job = await this.model.compute(run, layer, method);
      this.jobs.set(job.id, job);
    } catch (e) {
      this.jobs.set(`local-${run}-${layer}-${method}`, { id: "", run, layer, method, state: "failed", error: e.message });
    }
    this.renderStatus();
    this.update({ transition: false });
    this.pollJobs();
  }

  async pollJobs() {
    clearTimeout(this.jobTimer);
    const active = () => [...this.jobs.values()].some((j) => j.state === "queued" || j.state === "running");
    if (!active()) return;
    try {
      const jobs = await this.model.jobs();
      let finished = false;
      for (const job of jobs) {
        if (!this.jobs.has(job.id)) continue;
        const before = this.jobs.get(job.id);
        this.jobs.set(job.id, job);
        if (job.state === "done" && before.state !== "done") {
          finished = true;
          if (this.state.run === job.run && this.state.layer === job.layer && this.state.method === `compute:${job.method}`) {
            this.state.method = job.key || this.state.method;
          }
          this.jobs.delete(job.id);
          if (job.error) this.notes.push(`${job.method} of ${job.layer}: ${job.error}`);
        }
      }
      if (finished) {
        await this.model.loadRuns();
        this.onIndex();
      }
    } catch (e) {
      this.showError(e);
    }
    this.renderStatus();
    if (active()) this.jobTimer = setTimeout(() => this.pollJobs(), 1000);
  }

  // --- rendering of the parts --------------------------------------------------------------------------------

  renderControls() {
    const s = this.state;
    const index = this.index;
    const run = this.run;
    const runOptions = index.runs.map((r) => ({ value: r.name, label: `${r.name} (${V.fmt(r.n_probe)})` }));
    const layerOptions = run ? run.layers.map((l) => ({ value: l.name, label: `${l.name} · ${l.class}` })) : [];
    const methodOptions = [];
    if (run) {
      const stored = run.embeddings.filter((e) => (e.steps[s.layer] || []).length);
      const counts = {};
      for (const e of stored) counts[e.method] = (counts[e.method] || 0) + 1;
      for (const e of stored) {
        methodOptions.push({ value: e.key, label: counts[e.method] > 1 ? `${e.method} · ${e.key}${e.default ? " (default)" : ""}` : e.method });
      }
      for (const m of index.methods) {
        if (!stored.some((e) => e.method === m)) methodOptions.push({ value: `compute:${m}`, label: `compute ${m}…` });
      }
    }
    const hasPreds = Boolean(run && run.prediction_steps.length);
    const hasLabels = Boolean(run && run.has_labels);
    const colorModes = COLOR_MODES.map((m) => ({
      ...m, disabled: (m.value !== "label" && !hasPreds) || (m.value === "correct" && !hasLabels),
    }));
    this.el.header.replaceChildren(
      V.picker("Run", "run", runOptions, s.run, (v) => this.choose({ run: v })),
      V.picker("Layer", "layer", layerOptions, s.layer, (v) => this.choose({ layer: v })),
      V.picker("Method", "method", methodOptions, s.method, (v) => this.choose({ method: v })),
      h("span", { class: "spacer" }),
      h("span", { class: "label", text: "Colour" }),
      V.segmented("color", colorModes.filter((m) => !m.disabled), s.colorBy, (v) => this.setColorBy(v)),
    );
    this.el.tools.replaceChildren(
      V.segmented("mode", MOUSE_MODES, s.mode, (v) => this.setMode(v)),
      h("button", { type: "button", class: "reset", text: "Reset view", title: "zoom out to all points", onclick: () => this.scatter.reset() }),
    );
    this.renderFooter();
  }

  renderFooter() {
    const s = this.state;
    const steps = this.steps;
    const unit = (this.run && this.run.step_unit) || "step";
    V.setSnapshotBar(this.el.snapshots, steps, Math.max(steps.indexOf(s.step), 0), unit, s.playing);
  }

  renderStatus() {
    const parts = [];
    if (this.error) parts.push(V.errorBanner(this.error, () => this.showError(null)));
    this.notes.forEach((note, i) => parts.push(V.note(note, () => {
      this.notes.splice(i, 1);
      this.renderStatus();
    })));
    for (const [id, job] of this.jobs) {
      parts.push(V.jobView(job, () => {
        this.jobs.delete(id);
        this.renderStatus();
      }));
    }
    this.el.status.replaceChildren(...parts);
  }

  renderEmpty(node) {
    this.el.overlay.replaceChildren(...(node ? [node] : []));
    this.el.overlay.classList.toggle("shown", Boolean(node));
    if (node) {
      this.el.info.replaceChildren();
      this.el.legend.replaceChildren();
      this.el.hover.replaceChildren(V.hoverCard(null));
    }
  }

  renderLegend() {
    const colors = this.view.colors;
    const title = { label: "Label", prediction: "Prediction", correct: "Prediction vs label", confidence: "Confidence" }[colors.mode];
    if (!colors.items) {
      this.el.legend.replaceChildren(V.rampLegend(title, colors.palette.filter((_, i) => i % 4 === 0), "0 (unsure)", "1 (sure)"));
      return;
    }
    const items = colors.items;
    const hidden = new Set([...this.state.hidden].map((code) => items.findIndex((it) => it.index === code)).filter((i) => i >= 0));
    const codeOf = (i) => items[i].index;
    this.el.legend.replaceChildren(V.legend(title, items, hidden,
      (i) => {
        const next = new Set(this.state.hidden);
        if (next.has(codeOf(i))) next.delete(codeOf(i));
        else next.add(codeOf(i));
        this.setHidden(next);
      },
      (i) => this.setHidden(new Set(items.filter((_, j) => j !== i).map((it) => it.index))),
      () => this.setHidden(new Set())));
  }

  renderSelection() {
    const count = this.view ? this.selectedIndices().length : 0;
    this.el.selection.replaceChildren(V.selectionBar(count, this.view ? this.view.n : 0,
      () => this.clearSelection(), () => this.exportSelection()));
  }

  async renderInfo(chosen) {
    try {
      const info = await this.model.info(chosen.run, chosen.layer, chosen.step, chosen.key);
      if (!this.isCurrent(chosen)) return;
      const method = (this.embedding && this.embedding.method) || chosen.key;
      this.el.info.replaceChildren(V.infoLine(info, method));
    } catch (e) {
      if (this.isCurrent(chosen)) this.el.info.replaceChildren(h("div", { class: "info warn", text: `info: ${e.message}` }));
    }
  }

  exportSelection() {
    const view = this.view;
    const names = view.run.class_names;
    const name = (c) => (c < 0 || !Number.isFinite(c) ? "" : names ? names[c] : String(c));
    const rows = ["probe_id,label,prediction,confidence"];
    for (const i of this.selectedIndices().sort((a, b) => a - b)) {
      const conf = view.preds ? view.preds.conf[i] : NaN;
      rows.push([view.ids[i], name(view.labels[i]), view.preds ? name(view.preds.cls[i]) : "",
        Number.isFinite(conf) ? conf.toFixed(4) : ""].map((v) => `"${String(v).replace(/"/g, '""')}"`).join(","));
    }
    const blob = new Blob([`${rows.join("\n")}\n`], { type: "text/csv" });
    const link = h("a", { href: URL.createObjectURL(blob), download: `repviz-selection-${this.state.run}-${this.state.layer}.csv` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  }
}

/** Build the tab into document.body (TensorBoard calls this once per iframe). */
export function render() {
  window.__repvizStats = { draws: 0, n: 0, drawnMs: null, transitions: 0, transitionFrames: [] };
  // Relative to the module, so the iframe's <base href> and --path_prefix cannot misplace it.
  document.head.append(h("link", { rel: "stylesheet", href: new URL("style.css", import.meta.url).href }));
  let app;
  try {
    app = new App(document.body);
  } catch (e) {
    // regl-scatterplot throws when the browser gives no WebGL context.
    document.body.replaceChildren(V.emptyState("The Repviz tab needs WebGL", `This browser refused it: ${e.message}`));
    return;
  }
  app.start();
}
