// The Repviz tab. TensorBoard loads this module in an iframe whose page has <base href="plugin/repviz/"> and
// calls render(). State lives here; model.js fetches, views.js builds DOM, scatter.js, compare.js, metamap.js
// and overlay.js draw, colors.js encodes.
//
// Four views share the state (run, layer, method, snapshot, selection by probe id): Main (one scatter with
// trails, contours, neighbourhood change and nearest neighbours), Grid (small multiples), Runs (runs side by
// side) and Meta map (one point per representation).
//
// Instrumentation (read by tests/browser and benchmarks/bench_plugin.py, nothing else):
//   window.__repvizStats = {draws, n, drawnMs, transitions, transitionFrames, gridDraws, gridDrawnMs, gridCells,
//                           metaDraws, metaDrawnMs, metaShownMs, metaPoints, metaTrajectories, metaPositions, overlayDraws,
//                           exported}
//   draws: completed draws of the main view; n: points in the last one; drawnMs: from the user's choice of a
//   representation to its draw having completed; transitionFrames: frame intervals (ms) during the last animated
//   transition; gridDrawnMs: from showing the grid to every cell drawn (gridLayoutMs: of which creating the
//   cells' plots); metaDrawnMs: one draw of the meta map;
//   metaShownMs: from showing the meta map (or picking one) to its first draw, fetch included;
//   metaPositions: [x, y, run, layer, step] of each drawn representation (canvas pixels);
//   overlayDraws: overlay layers set (trails, contours, rings); exported: size of the last PNG export.
import { sameChoice, stepAtOrBefore } from "./choice.js";
import { categoryColor, changeRamp, colorEncoding, pointColors, ramp } from "./colors.js";
import { GridView, SIDE_RUNS } from "./gridview.js";
import { MetaView } from "./metaview.js";
import { Model } from "./model.js";
import { Overlay } from "./overlay.js";
import { normalise, Scatter, toPlot } from "./scatter.js";
import * as V from "./views.js";

const { h } = V;

const PLAY_MS = 1300;
const MAX_TRAILS = 500; // the trails route's bound
const K_NEIGHBORS = 10;
const TOP_CHANGED = 12;

/** Save `blob` as a download named `name`. */
function download(blob, name) {
  const link = h("a", { href: URL.createObjectURL(blob), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

const VIEWS = [
  { value: "main", label: "Main", title: "one representation" },
  { value: "grid", label: "Grid", title: "small multiples: layers or runs by snapshots or runs" },
  { value: "runs", label: "Runs", title: "two or three runs side by side at the same layer depth and snapshot" },
  { value: "meta", label: "Meta map", title: "the meta-SNE map: one point per representation" },
];
const COLOR_MODES = [
  { value: "label", label: "label", title: "colour by true class" },
  { value: "prediction", label: "prediction", title: "colour by predicted class" },
  { value: "correct", label: "correct?", title: "correct vs wrong predictions" },
  { value: "confidence", label: "confidence", title: "colour by the prediction's confidence" },
  { value: "change", label: "change", title: "neighbourhood change in the original space (1 − Jaccard of the 10 nearest neighbours)" },
];

class App {
  constructor(root) {
    this.model = new Model();
    this.state = {
      view: "main", run: null, layer: null, method: null, step: null, colorBy: "label", mode: "pan",
      hidden: new Set(), selectedIds: new Set(), playing: false, hover: null,
      trails: false, contours: false, changeVs: "previous", focusId: null,
      gridRows: "layers", gridCols: "snapshots", sideRuns: [], metaName: null,
    };
    this.error = null;
    this.notes = []; // one-line remarks of finished jobs (e.g. snapshots skipped)
    this.jobs = new Map(); // jobs this page started, by id
    this.view = null; // data of the drawn representation
    this.generation = 0;
    this.choiceTime = performance.now();
    this.knn = null; // {id, neighbors, distances} of the focused point in the drawn representation

    this.el = {
      root: h("div", { class: "repviz", "data-view": "main" }),
      header: h("header", { class: "bar" }),
      status: h("div", { class: "status" }),
      info: h("div", { class: "info-slot" }),
      canvas: h("canvas", { class: "scatter", "data-testid": "scatter" }),
      overlayCanvas: h("canvas", { class: "overlay-canvas", "data-testid": "overlay" }),
      overlay: h("div", { class: "overlay" }),
      tools: h("div", { class: "tools" }),
      toolNote: h("span", { class: "tool-note", hidden: true }),
      hover: h("div", {}, V.hoverCard(null)),
      legend: h("div", { class: "legend-slot" }),
      selection: h("div", { class: "selection-slot" }),
      panels: h("div", { class: "panels" }),
      snapshots: V.snapshotBar((p) => this.onSlider(p), () => this.togglePlay()),
      compareBar: h("div", { class: "view-bar" }),
      grid: h("div", { class: "grid", "data-testid": "grid" }),
      metaBar: h("div", { class: "view-bar" }),
      meta: h("canvas", { class: "meta-canvas", "data-testid": "meta" }),
    };
    this.el.root.append(
      this.el.header, this.el.status, this.el.info,
      h("main", {},
        h("div", { class: "stage" },
          h("div", { class: "plot" }, this.el.canvas, this.el.overlayCanvas, this.el.tools, this.el.overlay),
          h("div", { class: "compare" }, this.el.compareBar, this.el.grid),
          h("div", { class: "metaview" }, this.el.metaBar, h("div", { class: "meta-wrap" }, this.el.meta))),
        h("aside", {}, this.el.hover, this.el.legend, this.el.selection, this.el.panels)),
      h("footer", {}, this.el.snapshots));
    root.append(this.el.root);
    this.scatter = new Scatter(this.el.canvas, {
      onHover: (i) => this.onHover(i),
      onSelect: (indices) => this.onLasso(indices),
      onView: () => this.overlay.redraw(),
    });
    this.overlay = new Overlay(this.el.overlayCanvas, this.scatter);
    this.grid = new GridView(this);
    this.meta = new MetaView(this);
    window.addEventListener("resize", () => {
      this.grid.multiples.resize();
      if (this.state.view === "meta" && this.meta.map.rows.length) this.meta.map.draw();
      this.overlay.redraw();
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
    return this.runNamed(this.state.run);
  }

  runNamed(name) {
    return this.index.runs.find((r) => r.name === name) || null;
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
    s.sideRuns = s.sideRuns.filter((name) => runs.some((r) => r.name === name));
    if (!s.sideRuns.length) s.sideRuns = [s.run, ...runs.map((r) => r.name).filter((n) => n !== s.run)].slice(0, SIDE_RUNS);
  }

  /** The layer of `run` that matches layer `name` of the current run: the same name, else the same depth. */
  layerFor(run, name) {
    if (run.layers.some((l) => l.name === name)) return name;
    const mine = this.run ? this.run.layers.map((l) => l.name) : [];
    const depth = Math.max(mine.indexOf(name), 0);
    const m = run.layers.length;
    if (!m) return null;
    const at = mine.length > 1 ? Math.round((depth / (mine.length - 1)) * (m - 1)) : 0;
    return run.layers[Math.min(at, m - 1)].name;
  }

  /**
   * The stored representation closest to `partial` ({run?, layer?, step?}, the rest from the state): the same
   * method as the main view where stored, the snapshot at or before the step. Null when nothing is stored.
   */
  choiceFor(partial) {
    const s = this.state;
    const run = this.runNamed(partial.run ?? s.run);
    if (!run) return null;
    const layer = partial.layer && run.layers.some((l) => l.name === partial.layer) ? partial.layer : this.layerFor(run, partial.layer ?? s.layer);
    const method = this.embedding ? this.embedding.method : null;
    const stored = run.embeddings.filter((e) => (e.steps[layer] || []).length);
    const e = stored.find((x) => x.method === method && x.default) || stored.find((x) => x.method === method) ||
      stored.find((x) => x.default) || stored[0];
    if (!e) return null;
    const steps = e.steps[layer];
    const wanted = partial.step ?? s.step;
    return { run: run.name, layer, key: e.key, step: wanted === null ? steps[steps.length - 1] : stepAtOrBefore(steps, wanted) };
  }

  // --- events ------------------------------------------------------------------------------------------------

  onIndex() {
    this.resolve();
    this.renderControls();
    this.update({ transition: true, quiet: true });
    if (this.state.view === "grid" || this.state.view === "runs") this.grid.render({ quiet: true });
    if (this.state.view === "meta") this.meta.render();
  }

  choose(changes, { transition = true } = {}) {
    this.choiceTime = performance.now();
    Object.assign(this.state, changes);
    if (changes.method && changes.method.startsWith("compute:")) this.startCompute(changes.method.slice(8));
    this.resolve();
    this.renderControls();
    this.update({ transition });
    if (this.state.view === "grid" || this.state.view === "runs") this.grid.render();
  }

  setView(view) {
    if (!this.index) return; // the log directory could not be read: the message stays
    this.state.view = view;
    this.el.root.dataset.view = view;
    this.renderControls();
    this.el.panels.replaceChildren();
    if (view === "grid" || view === "runs") this.grid.render({ force: true });
    if (view === "meta") this.meta.render();
    if (view === "main") {
      this.renderPanels();
      this.overlay.redraw();
    }
  }

  /** Open representation `choice` in the main view. */
  open(choice) {
    if (!choice) return;
    this.setView("main");
    this.choose({ run: choice.run, layer: choice.layer, method: choice.key, step: choice.step });
  }

  setColorBy(colorBy) {
    this.state.colorBy = colorBy;
    this.state.hidden = new Set();
    this.renderControls();
    this.update({ transition: false });
    if (this.state.view === "grid" || this.state.view === "runs") this.grid.render({ force: true });
  }

  setMode(mode) {
    this.state.mode = mode;
    this.scatter.setMode(mode);
    this.grid.multiples.setMode(mode);
    this.renderControls();
    if (this.state.view !== "main") this.grid.renderBar();
  }

  toggle(name) {
    this.state[name] = !this.state[name];
    this.renderTools();
    this.refreshOverlay();
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
    // A click on one point also asks for its nearest neighbours in the original space.
    if (indices.length === 1) this.focus(indices[0]);
    this.renderSelection();
    this.refreshOverlay();
  }

  clearSelection() {
    this.state.selectedIds = new Set();
    this.scatter.select([]);
    this.grid.multiples.select(this.state.selectedIds);
    this.renderSelection();
    this.refreshOverlay();
  }

  showError(e) {
    this.error = e ? e.message || String(e) : null;
    this.renderStatus();
  }

  // --- the main view -----------------------------------------------------------------------------------------

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
    const base = s.colorBy === "change" ? this.changeBase() : null;
    let data;
    try {
      const [coords, labels, ids, preds, change] = await Promise.all([
        this.model.coords(s.run, s.layer, s.step, s.method),
        this.model.labels(s.run),
        this.model.ids(s.run),
        predStep === null ? null : this.model.predictions(s.run, predStep),
        base ? this.model.neighborhoodChange({ run: s.run, layer: s.layer, step: s.step }, base, K_NEIGHBORS)
          .catch((e) => {
            this.showError(e);
            return null;
          }) : null,
      ]);
      data = { coords, labels, ids, preds, change, predStep, base };
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
    const { x, y, centre, half } = normalise(data.coords);
    const n = x.length;
    const idIndex = this.view && this.view.ids === data.ids ? this.view.idIndex : new Map(Array.from(data.ids, (id, i) => [id, i]));
    const view = { run, chosen, ...data, x, y, n, idIndex, frame: { centre, half } };
    this.view = view;
    const colors = colorEncoding(this.view, s.colorBy);
    this.view.colors = colors;
    this.scatter.setColors(colors.by, colors.palette);
    const started = this.choiceTime;
    await this.scatter.draw({ x, y, z: colors.z, w: colors.w }, {
      transition,
      selected: this.selectedIndices(),
      visible: this.visibleIndices(),
    });
    if (this.view !== view) return; // a newer representation replaced this one: its update renders the rest
    const stats = window.__repvizStats;
    stats.draws += 1;
    stats.n = n;
    stats.drawnMs = performance.now() - started;
    this.renderLegend();
    this.renderSelection();
    this.renderInfo(chosen);
    if (this.state.focusId !== null && !idIndex.has(this.state.focusId)) this.state.focusId = null;
    this.knn = null;
    if (this.state.focusId !== null) this.loadKnn();
    else this.renderPanels();
    this.refreshOverlay();
  }

  /** Whether `chosen` is still what the pickers say. */
  isCurrent(chosen) {
    const s = this.state;
    return sameChoice(chosen, { run: s.run, layer: s.layer, key: s.method, step: s.step });
  }

  /** The representation the neighbourhood change compares with: the previous snapshot, or another layer. */
  changeBase() {
    const s = this.state;
    const run = this.run;
    if (s.changeVs.startsWith("layer:")) {
      const layer = run.layers.find((l) => l.name === s.changeVs.slice(6));
      return layer && layer.steps.length ? { run: s.run, layer: layer.name, step: stepAtOrBefore(layer.steps, s.step) } : null;
    }
    const layer = run.layers.find((l) => l.name === s.layer);
    const steps = layer ? layer.steps.filter((t) => t < s.step) : [];
    return steps.length ? { run: s.run, layer: s.layer, step: steps[steps.length - 1] } : null;
  }

  selectedIndices() {
    if (!this.view) return [];
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

  // --- overlays of the main view: trails, contours, nearest neighbours ----------------------------------------

  /** Fetch and set every overlay layer of the drawn representation. */
  async refreshOverlay() {
    const view = this.view;
    if (!view) return;
    const s = this.state;
    const { run, layer, key, step } = view.chosen;
    const at = (cx, cy) => toPlot(view.frame, cx, cy);
    const jobs = [];
    if (s.contours) {
      const by = s.colorBy === "label" && view.run.has_labels ? "class" : "all";
      jobs.push(this.model.density(run, layer, step, key, by, 4).then((density) => {
        const lines = [];
        for (const c of density.contours) {
          const color = c.class === null || c.class === undefined ? "#424242" : categoryColor(c.class);
          for (const path of c.paths) {
            const points = new Float32Array(path.length);
            for (let i = 0; i < path.length; i += 2) [points[i], points[i + 1]] = at(path[i], path[i + 1]);
            lines.push({ color, points });
          }
        }
        return ["contours", { kind: "contours", lines }];
      }));
    } else jobs.push(Promise.resolve(["contours", null]));
    const selected = this.selectedIndices().sort((a, b) => a - b);
    if (s.trails && selected.length && selected.length <= MAX_TRAILS) {
      jobs.push(this.model.trails(run, layer, key, selected).then(({ steps, m, coords }) => {
        const colors = pointColors(view.colors);
        const paths = selected.map((_, p) => {
          const path = new Float32Array(2 * steps.length);
          for (let t = 0; t < steps.length; t++) {
            const o = 2 * (t * m + p);
            [path[2 * t], path[2 * t + 1]] = at(coords[o], coords[o + 1]);
          }
          return path;
        });
        return ["trails", { kind: "trails", paths, colors: selected.map((i) => colors[i]) }];
      }));
    } else jobs.push(Promise.resolve(["trails", null]));
    const knn = this.knn;
    const focus = knn ? view.idIndex.get(knn.id) : undefined;
    jobs.push(Promise.resolve(["rings", focus === undefined ? null : {
      kind: "rings", focus: [view.x[focus], view.y[focus]], points: knn.neighbors.map((j) => [view.x[j], view.y[j]]),
    }]));
    for (const job of jobs) {
      try {
        const [name, layerData] = await job;
        if (this.view !== view) return;
        this.overlay.set(name, layerData);
        if (layerData) window.__repvizStats.overlayDraws += 1;
      } catch (e) {
        this.showError(e);
      }
    }
  }

  /** Focus point `index` of the drawn representation: its nearest neighbours in the original space. */
  focus(index) {
    this.state.focusId = this.view.ids[index];
    this.loadKnn();
  }

  async loadKnn() {
    const view = this.view;
    const index = view.idIndex.get(this.state.focusId);
    const { run, layer, step } = view.chosen;
    try {
      const result = await this.model.knn(run, layer, step, index, K_NEIGHBORS);
      if (this.view !== view) return;
      this.knn = { id: this.state.focusId, index, neighbors: result.neighbors, distances: result.distances };
    } catch (e) {
      this.showError(e);
      this.knn = null;
    }
    this.renderPanels();
    this.refreshOverlay();
  }

  /** Side panels of the main view: the points that changed most, the focused point's neighbours. */
  renderPanels() {
    const view = this.view;
    const parts = [];
    if (view && this.state.colorBy === "change") {
      parts.push(this.changePanel(view));
    }
    if (view && this.knn) {
      const { index, neighbors, distances } = this.knn;
      const list = V.pointList(`Nearest neighbours of #${view.ids[index]}`,
        `In the original ${view.chosen.layer} activations (not the 2-D map); ringed in the plot.`,
        neighbors.map((j, r) => ({ index: j, text: `#${view.ids[j]} ${this.className(view, view.labels[j])}`, value: V.fmt(distances[r], 2) })),
        (j) => this.focus(j), "knn");
      parts.push(list);
      this.fillThumbs(list, view.run, neighbors);
    }
    if (this.state.view === "main") this.el.panels.replaceChildren(...parts);
  }

  changePanel(view) {
    const s = this.state;
    const run = view.run;
    const options = [{ value: "previous", label: "previous snapshot" },
      ...run.layers.filter((l) => l.name !== s.layer).map((l) => ({ value: `layer:${l.name}`, label: `layer ${l.name}` }))];
    const vs = V.picker("vs", "change-vs", options, s.changeVs, (v) => {
      s.changeVs = v;
      this.update({ transition: false });
    });
    if (!view.change) {
      return h("section", { class: "points", "data-testid": "changed" }, h("h3", { text: "Neighbourhood change" }), vs,
        h("p", { class: "hint", text: view.base ? "Not available (see the message above)." : "The first snapshot has no previous one: pick a layer to compare with." }));
    }
    const order = Array.from(view.change.keys()).filter((i) => Number.isFinite(view.change[i]))
      .sort((a, b) => view.change[b] - view.change[a]).slice(0, TOP_CHANGED);
    let mean = 0;
    for (const v of view.change) mean += Number.isFinite(v) ? v : 0;
    mean /= Math.max(view.n, 1);
    const base = view.base;
    const list = V.pointList("Changed most",
      `vs ${base.layer === s.layer ? `${run.step_unit} ${base.step}` : base.layer}: mean ${V.fmt(mean, 2)}; click one for its neighbours.`,
      order.map((i) => ({ index: i, text: `#${view.ids[i]} ${this.className(view, view.labels[i])}`, value: V.fmt(view.change[i], 2) })),
      (i) => this.focus(i), "changed");
    list.insertBefore(vs, list.children[1]);
    this.fillThumbs(list, run, order);
    return list;
  }

  className(view, c) {
    const names = view.run.class_names;
    return c < 0 || !Number.isFinite(c) ? "" : names ? names[c] : String(c);
  }

  async fillThumbs(list, run, indices) {
    if (!run.has_thumbnails) return;
    for (const i of indices) {
      try {
        const { shape, pixels } = await this.model.thumbnail(run.name, i);
        V.fillThumb(list, i, V.thumbnailCanvas(shape, pixels));
      } catch (e) {
        this.showError(e);
        return;
      }
    }
  }

  // --- hover -------------------------------------------------------------------------------------------------

  onHover(index) {
    this.state.hover = index;
    const view = this.view;
    if (index === null || !view || index >= view.n) return; // keep the last card while the mouse moves on
    this.showPoint(view.run, index, view.chosen.step);
  }

  /** The hover card of point `index` of `run`, with the prediction at (or before) `step`. */
  async showPoint(run, index, step) {
    const token = {};
    this.hoverToken = token;
    const predSteps = run.prediction_steps;
    const predStep = predSteps.length ? stepAtOrBefore(predSteps, step) : null;
    const [labels, ids, preds] = await Promise.all([this.model.labels(run.name), this.model.ids(run.name),
      predStep === null ? null : this.model.predictions(run.name, predStep)]);
    if (this.hoverToken !== token) return;
    const names = run.class_names || null;
    const className = (c) => (c < 0 || !Number.isFinite(c) ? "–" : names ? names[c] : String(c));
    const point = {
      index,
      id: ids[index],
      label: className(labels[index]),
      prediction: preds ? className(preds.cls[index]) : "–",
      confidence: preds ? preds.conf[index] : null,
      correct: preds && labels[index] >= 0 ? preds.cls[index] === labels[index] : null,
      thumb: null,
      thumbText: run.has_thumbnails ? "loading…" : "no thumbnail",
    };
    this.el.hover.replaceChildren(V.hoverCard(point));
    if (!run.has_thumbnails) return;
    try {
      const { shape, pixels } = await this.model.thumbnail(run.name, index);
      if (this.hoverToken !== token) return;
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
          if (job.kind === "meta") {
            this.state.metaName = job.key || this.state.metaName;
          } else if (this.state.run === job.run && this.state.layer === job.layer && this.state.method === `compute:${job.method}`) {
            this.state.method = job.key || this.state.method;
          }
          this.jobs.delete(job.id);
          if (job.error) this.notes.push(`${job.kind === "meta" ? "meta-SNE map" : `${job.method} of ${job.layer}`}: ${job.error}`);
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
      ...m, disabled: (m.value !== "label" && m.value !== "change" && !hasPreds) || (m.value === "correct" && !hasLabels),
    }));
    this.el.header.replaceChildren(
      V.segmented("view", VIEWS, s.view, (v) => this.setView(v)),
      V.picker("Run", "run", runOptions, s.run, (v) => this.choose({ run: v })),
      V.picker("Layer", "layer", layerOptions, s.layer, (v) => this.choose({ layer: v })),
      V.picker("Method", "method", methodOptions, s.method, (v) => this.choose({ method: v })),
      h("span", { class: "spacer" }),
      h("span", { class: "picker" }, h("span", { text: "Colour" }),
        V.segmented("color", colorModes.filter((m) => !m.disabled), s.colorBy, (v) => this.setColorBy(v))),
      h("button", { type: "button", class: "export", "data-testid": "export-png", text: "Export PNG",
        title: "save this view as drawn (overlays included) as a PNG file", onclick: () => this.exportPng() }),
    );
    this.renderTools();
    this.renderFooter();
  }

  /** The main view's tools: mouse mode, reset, trails and contours toggles. */
  renderTools() {
    const s = this.state;
    this.el.tools.replaceChildren(
      V.segmented("mode", V.MOUSE_MODES, s.mode, (v) => this.setMode(v)),
      h("button", { type: "button", class: "reset", text: "Reset view", title: "zoom out to all points", onclick: () => this.scatter.reset() }),
      h("button", {
        type: "button", class: s.trails ? "on" : null, "data-testid": "trails", text: "Trails",
        title: `paths of the selected points (at most ${MAX_TRAILS}) across the snapshots of this layer`,
        "aria-pressed": String(s.trails), onclick: () => this.toggle("trails"),
      }),
      h("button", {
        type: "button", class: s.contours ? "on" : null, "data-testid": "contours", text: "Contours",
        title: "density contours (per class when colouring by label)", "aria-pressed": String(s.contours),
        onclick: () => this.toggle("contours"),
      }),
      this.el.toolNote,
    );
    this.renderToolNote();
  }

  /** The tools' remark on the selection (trails need at most MAX_TRAILS points), updated in place. */
  renderToolNote() {
    const tooMany = this.state.trails && this.state.selectedIds.size > MAX_TRAILS;
    this.el.toolNote.textContent = tooMany ? `trails: select at most ${MAX_TRAILS} points` : "";
    this.el.toolNote.hidden = !tooMany;
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
    const title = { label: "Label", prediction: "Prediction", correct: "Prediction vs label", confidence: "Confidence",
      change: "Neighbourhood change" }[colors.mode];
    if (!colors.items) {
      const ends = colors.mode === "change" ? ["0 (same neighbours)", "1 (all new)"] : ["0 (unsure)", "1 (sure)"];
      const stops = colors.mode === "change" ? changeRamp(8) : ramp(8);
      this.el.legend.replaceChildren(V.rampLegend(title, stops, ...ends));
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
    const count = this.view ? this.selectedIndices().length : this.state.selectedIds.size;
    this.el.selection.replaceChildren(V.selectionBar(count, this.view ? this.view.n : 0,
      () => this.clearSelection(), () => this.exportSelection()));
    this.renderToolNote();
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
    download(new Blob([`${rows.join("\n")}\n`], { type: "text/csv" }), `repviz-selection-${this.state.run}-${this.state.layer}.csv`);
  }

  /** The current view as drawn (WebGL picture and 2-D overlay together) as a PNG download. */
  exportPng() {
    const s = this.state;
    let out;
    if (s.view === "grid" || s.view === "runs") {
      out = this.grid.multiples.snapshot();
    } else {
      const layers = s.view === "meta" ? [this.el.meta] : [this.el.canvas, this.el.overlayCanvas];
      this.overlay.drawNow();
      out = h("canvas", { width: layers[0].width, height: layers[0].height });
      const ctx = out.getContext("2d");
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, out.width, out.height);
      for (const layer of layers) ctx.drawImage(layer, 0, 0, out.width, out.height);
    }
    window.__repvizStats.exported = { view: s.view, width: out.width, height: out.height };
    out.toBlob((blob) => download(blob, `repviz-${s.view}-${s.run}-${s.layer}.png`), "image/png");
  }
}

/** Build the tab into document.body (TensorBoard calls this once per iframe). */
export function render() {
  window.__repvizStats = { draws: 0, n: 0, drawnMs: null, transitions: 0, transitionFrames: [], gridDraws: 0,
    gridDrawnMs: null, gridCells: 0, metaDraws: 0, metaDrawnMs: null, metaShownMs: null, metaPoints: 0, overlayDraws: 0, exported: null };
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
