// The Similarity view: how alike two representations are, as a heatmap (heatmap.js) of the layers of one run
// against the layers of another (or the same) at one snapshot, with a slider that animates it over training, or of
// one layer's snapshots against each other. Hovering a cell shows the two representations' scatters side by side,
// linked by probe id to the shared hover and selection; a click opens the pair in the Runs view. A heatmap not
// computed yet offers a button that computes it (every snapshot) in a background job. A representation the server
// left out (constant over the probe, as a dead layer is) is a hatched hole whose hover says why, and any layer can
// be left out of the picture from the list under it. The measures and kernels are the server's (the run index's
// `choices.similarity`). The bar, the notes, the list and the overlay are built in similaritypanels.js, the parts
// that need no view state in similarityparts.js.
import { cellData } from "./cellsview.js";
import { choiceFor, runNamed, stepAtOrBefore } from "./choice.js";
import * as V from "./dom.js";
import { Heatmap } from "./heatmap.js";
import { pointAt } from "./overlay.js";
import { drawPair, heatmapLabels, sharedSteps, withoutHidden } from "./similarityparts.js";
import { layerList, missingOverlay, pickerBar, summaryNotes } from "./similaritypanels.js";

const { h } = V;

const PLAY_MS = 900;
const HIT_PX = 6;

/** @implements {import("./view.js").View} */
export class SimilarityView {
  /**
   * @param {import("./model.js").Model} model
   * @param {import("./view.js").ViewEvents} events
   */
  constructor(model, events) {
    this.name = "similarity";
    this.label = "Similarity";
    this.title = "how alike representations are (CKA, Procrustes): layers × layers of two runs, or one layer over training";
    // its own pickers choose the runs and the layer; the header's Colour, said to be the pair's, colours the pair's
    // scatters (drawn in the main view's method, which their captions name: the Method menu lists another run's)
    this.chrome = { snapshots: false, info: false, legend: false, selection: true, run: false, layer: false, method: false,
      colour: true };
    this.colourLabel = "Colour of the pair's scatters";
    this.model = model;
    this.events = events;
    /** @type {?import("./view.js").Page} */
    this.page = null;
    // what the heatmap shows (resolved against the index when shown)
    this.pick = { mode: "layers", run: null, run2: null, layer: null, step: null, measure: null, kernel: null, debiased: true };
    this.run2Alone = false; // run2 is run only because no other run of its probe set was listed yet
    this.full = null; // the matrix as the server sent it
    this.matrix = null; // the matrix drawn: the server's without the hidden layers
    this.hidden = new Set(); // labels (labelOf) of the rows and columns left out of the picture by the user
    this.missing = false; // the chosen heatmap is not computed
    this.failure = null; // why the chosen heatmap cannot be drawn (the server's one line)
    this.computedBy = null; // {pick, line}: what this page's job for a pick (key without step) computed
    this.token = null;
    this.playing = false;
    this.pair = null; // {cell, sides: [{key, data, title, points}, ...]} of the hovered cell
    this.hoverId = null;
  }

  /** @param {HTMLElement} el */
  mount(el) {
    el.classList.add("simview");
    this.barEl = h("div", { class: "view-bar" });
    this.canvas = h("canvas", { class: "sim-canvas", "data-testid": "similarity" });
    this.overlayEl = h("div", { class: "overlay" });
    this.pairEl = h("section", { class: "sim-pair", "data-testid": "pair" });
    this.summaryEl = h("section", { class: "sim-summary", "data-testid": "similarity-summary" });
    this.slider = V.snapshotBar((p) => this.setStep(this.steps()[p]), () => this.togglePlay());
    const [play, slider, step] = this.slider.children; // test ids of its own: the page's bar has the shared ones
    play.dataset.testid = "similarity-play";
    slider.dataset.testid = "similarity-slider";
    step.dataset.testid = "similarity-step";
    el.append(this.barEl, h("div", { class: "sim-body" }, h("div", { class: "sim-heat" }, this.canvas, this.overlayEl),
      h("div", { class: "sim-side" }, this.pairEl, this.summaryEl)),
      this.slider);
    this.heatmap = new Heatmap(this.canvas, { onHover: (cell) => this.onHover(cell), onOpen: (cell) => this.onOpen(cell) });
    this.clearPair();
  }

  /**
   * Nothing while hidden (a running animation stops); the bar and the heatmap again when shown or when the index
   * changed; the job's progress as it comes; the pair's scatters again when the colours, the selection or the
   * hovered point changed.
   * @param {import("./view.js").Page} page
   */
  render(page) {
    const last = this.page;
    this.page = page;
    if (page.view !== this.name) {
      if (this.playing) this.togglePlay();
      return;
    }
    const shown = last && last.view === this.name;
    if (!shown || page.index !== last.index) {
      this.resolve();
      this.update();
      return;
    }
    if (page.jobs !== last.jobs) this.renderOverlay();
    if (page.state.colorBy !== last.state.colorBy) this.showPair(this.pair && this.pair.cell);
    else if (page.state.selectedIds !== last.state.selectedIds) this.drawPair();
  }

  /** A host's first choice (the notebook widget's `runs`): the run, or the two runs, of the heatmap. */
  preset({ runs }) {
    if (!runs || !runs.length) return;
    this.pick.run = runs[0];
    this.pick.run2 = runs[runs.length > 1 ? 1 : 0];
  }

  resize() {
    if (this.page && this.page.view === this.name) {
      this.heatmap.draw();
      this.drawPair();
    }
  }

  canvases() {
    return [this.canvas];
  }

  // --- what is shown -----------------------------------------------------------------------------------------

  /** The run index's choices of a similarity matrix ({measure, kernel, similarities, options: the options each
   * measure takes}), defaults first. */
  get choices() {
    return this.page.index.choices.similarity;
  }

  /** Keep what still exists of the pick; fill the rest from the shared state and the defaults. */
  resolve() {
    const { index, state } = this.page;
    const p = this.pick;
    const names = index.runs.map((r) => r.name);
    if (!names.includes(p.run)) p.run = names.includes(state.run) ? state.run : names[0] ?? null;
    const run = runNamed(index, p.run);
    if (!run) return;
    if (!names.includes(p.run2) || (this.run2Alone && p.run2 === p.run)) {
      // by default another run of the same probe set (seeds, architectures), else the run against itself until
      // one is listed (a run still being recorded joins the index later)
      const other = index.runs.find((r) => r.name !== run.name && r.probe_group === run.probe_group);
      p.run2 = other ? other.name : run.name;
      this.run2Alone = !other;
    }
    const layers = run.layers.map((l) => l.name);
    if (!layers.includes(p.layer)) p.layer = layers.includes(state.layer) ? state.layer : layers[0] ?? null;
    if (!this.choices.measure.includes(p.measure)) p.measure = this.choices.measure[0];
    if (!this.choices.kernel.includes(p.kernel)) p.kernel = this.choices.kernel[0];
    const steps = this.steps();
    if (steps.length && !steps.includes(p.step)) {
      p.step = p.step === null && state.step === null ? steps[steps.length - 1] : stepAtOrBefore(steps, p.step ?? state.step);
    }
  }

  /** The runs of the pick (one when run2 is run). */
  runs() {
    const { index } = this.page;
    const p = this.pick;
    return [runNamed(index, p.run), ...(p.mode === "layers" && p.run2 !== p.run ? [runNamed(index, p.run2)] : [])];
  }

  /** The snapshots the slider offers: those the runs share (mode "layers"). */
  steps() {
    const runs = this.runs();
    return runs.every(Boolean) ? sharedSteps(runs) : [];
  }

  /** Query of the heatmap chosen (the route's fields). */
  query() {
    const p = this.pick;
    const q = { mode: p.mode, run: p.run, measure: p.measure, kernel: p.kernel, debiased: p.debiased ? "1" : "0" };
    if (p.mode === "layers") Object.assign(q, { run2: p.run2, step: p.step });
    else q.layer = p.layer;
    return q;
  }

  /** Whether `job` computes the heatmaps of the pick (any snapshot). */
  isMine(job) {
    if (job.kind !== "similarity" || !job.params) return false;
    const j = job.params;
    const p = this.pick;
    const runs = p.mode === "layers" && p.run2 !== p.run ? [p.run, p.run2] : [p.run];
    return j.mode === p.mode && JSON.stringify(j.runs) === JSON.stringify(runs) && j.measure === p.measure &&
      j.kernel === p.kernel && j.debiased === p.debiased && (p.mode === "layers" || j.layer === p.layer);
  }

  /** The bar, the slider and the heatmap of the pick. */
  update() {
    this.renderBar();
    this.renderSlider();
    this.fetch(false);
  }

  renderBar() {
    const p = this.pick;
    const set = (changes) => {
      if ("mode" in changes && changes.mode !== p.mode) this.hidden.clear(); // layers and steps are not the same labels
      if ("run2" in changes) this.run2Alone = false; // the user's choice, kept
      Object.assign(p, changes);
      this.computedBy = null; // another heatmap: its notes say how its values came
      this.resolve();
      this.clearPair();
      this.update();
    };
    this.barEl.replaceChildren(...pickerBar(this.page.index, p, this.choices, set));
  }

  /** Under the pair: what the matrix says as a whole (the layer identification across two runs) and how its
   * values were obtained. */
  renderSummary() {
    const m = this.matrix;
    this.summaryEl.classList.toggle("off", !m);
    if (!m) return;
    const byJob = this.computedBy && this.computedBy.pick === this.pickKey() ? this.computedBy.line : null;
    const mode = this.pick.mode;
    const apply = () => {
      this.matrix = withoutHidden(this.full, mode, this.hidden);
      this.clearPair();
      this.heatmap.setData(this.heatmapData(this.matrix));
      this.renderSummary();
    };
    this.summaryEl.replaceChildren(...summaryNotes(m, this.full, byJob), layerList(this.full, mode, this.hidden, apply));
  }

  renderSlider() {
    const steps = this.pick.mode === "layers" ? this.steps() : [];
    const run = runNamed(this.page.index, this.pick.run);
    this.slider.classList.toggle("off", this.pick.mode !== "layers");
    V.setSnapshotBar(this.slider, steps, Math.max(steps.indexOf(this.pick.step), 0), (run && run.step_unit) || "step", this.playing);
  }

  setStep(step) {
    if (step === undefined || step === this.pick.step) return;
    this.pick.step = step;
    this.renderSlider();
    this.fetch(true);
  }

  togglePlay() {
    this.playing = !this.playing;
    clearInterval(this.playTimer);
    if (this.playing) {
      const steps = this.steps();
      if (steps.indexOf(this.pick.step) === steps.length - 1) this.setStep(steps[0]);
      this.playTimer = setInterval(() => {
        const all = this.steps();
        const next = all.indexOf(this.pick.step) + 1;
        if (next >= all.length) this.togglePlay();
        else this.setStep(all[next]);
      }, PLAY_MS);
    }
    this.renderSlider();
  }

  /** Fetch the chosen heatmap and draw it (animated from the last one when `animate`), or offer to compute it. */
  async fetch(animate) {
    const token = {};
    this.token = token;
    const query = this.query();
    let matrix = null;
    let failure = null;
    if (!this.pick.run) return;
    if (this.pick.mode === "layers" && !this.steps().length) {
      failure = `runs ${this.runs().map((r) => r.name).join(" and ")} share no snapshot of every layer`;
    } else {
      try {
        matrix = await this.model.similarity(query);
      } catch (e) {
        if (e.status !== 404) failure = e.message;
      }
    }
    if (this.token !== token) return;
    this.full = matrix;
    this.matrix = matrix && withoutHidden(matrix, this.pick.mode, this.hidden);
    this.missing = matrix === null && failure === null;
    this.failure = failure;
    this.heatmap.setData(matrix && this.heatmapData(this.matrix), { animate });
    const stats = window.__repvizStats;
    stats.similarityShown = matrix
      ? { step: this.pick.step, rows: matrix.rows.length, cols: matrix.cols.length, runs: [this.pick.run, this.pick.run2] }
      : null;
    this.renderOverlay();
    this.renderSummary();
    if (this.pair) this.showPair(this.pair.cell);
  }

  /** The heatmap's labels and titles for `matrix` (null when every row or every column is hidden). */
  heatmapData(matrix) {
    const run = runNamed(this.page.index, this.pick.run);
    return heatmapLabels(matrix, this.pick.mode, (run && run.step_unit) || "step");
  }

  /** Over the heatmap: nothing, or what is missing with the button that computes it (its progress while it runs). */
  renderOverlay() {
    const shown = this.failure !== null || (this.missing && (this.pick.mode === "steps" || this.steps().length > 0));
    this.overlayEl.classList.toggle("shown", shown);
    if (!shown) {
      this.overlayEl.replaceChildren();
      return;
    }
    if (this.failure !== null) {
      this.overlayEl.replaceChildren(V.emptyState("Cannot draw this heatmap", this.failure));
      return;
    }
    const job = this.page.jobs.find((j) => this.isMine(j) && (j.state === "queued" || j.state === "running"));
    this.overlayEl.replaceChildren(missingOverlay(this.pick, this.choices, job, () => this.compute()));
  }

  /** Ask the server for the pick's heatmaps at every snapshot; show the chosen one once done. */
  compute() {
    const body = { ...this.query(), debiased: this.pick.debiased };
    delete body.step; // every snapshot
    const runs = body.run2 && body.run2 !== body.run ? [body.run, body.run2] : [body.run];
    const pick = this.pickKey();
    this.events.job(() => this.model.computeSimilarity(body), { kind: "similarity", method: this.pick.measure, params: { runs } },
      (job) => {
        const line = job.progress && job.progress.message;
        this.computedBy = line ? { pick, line } : null;
        this.fetch(false);
      });
  }

  /** The pick without its snapshot: what one compute job covers. */
  pickKey() {
    const { step, ...rest } = this.pick;
    return JSON.stringify(rest);
  }

  // --- the pair of the hovered cell ----------------------------------------------------------------------------

  /** The representations of cell (i, j) of the matrix shown: [run, layer, step] of its row and of its column. */
  keysOf(cell) {
    return [this.matrix.rows[cell.i], this.matrix.cols[cell.j]];
  }

  clearPair() {
    this.pair = null;
    this.heatmap.mark(null);
    this.pairEl.replaceChildren(h("p", { class: "hint", text: "Hover a cell to see both representations' scatters side by side, coloured as the header's \"Colour of the pair's scatters\" says; click it to open the pair in the Runs view." }));
  }

  onHover(cell) {
    if (cell) this.showPair(cell);
  }

  /** Show the scatters of cell `cell`'s two representations (the stored 2-D embeddings closest to the main view's
   * method) with the cell's value. */
  async showPair(cell) {
    if (!cell || !this.matrix || cell.i >= this.matrix.rows.length || cell.j >= this.matrix.cols.length) {
      this.clearPair();
      return;
    }
    const { index, state } = this.page;
    const value = this.matrix.values[cell.i][cell.j];
    const keys = this.keysOf(cell);
    const token = {};
    this.pairToken = token;
    const sides = keys.map(([run, layer, step]) => {
      const choice = choiceFor(index, state, { run, layer, step });
      const unit = (runNamed(index, run) || {}).step_unit || "step";
      return { key: [run, layer, step], choice: choice && choice.layer === layer ? choice : null,
        title: `${run} · ${layer}`, when: `${unit} ${step}`, data: null, points: null };
    });
    this.pair = { cell, value, sides };
    this.heatmap.mark(cell);
    try {
      await Promise.all(sides.map(async (side) => {
        if (side.choice) side.data = await cellData(this.model, runNamed(index, side.key[0]), side.choice, state.colorBy);
      }));
    } catch (e) {
      this.events.error(e);
    }
    if (this.pairToken !== token) return;
    const figures = sides.map((side, k) => {
      const canvas = h("canvas", { class: "pair-canvas", "data-side": String(k) });
      side.canvas = canvas;
      canvas.addEventListener("mousemove", (e) => this.onPairMove(side, e));
      canvas.addEventListener("mouseleave", () => this.setHoverId(null));
      const method = side.choice ? this.methodOf(side.choice, side.key[2]) : "";
      return h("figure", {}, h("figcaption", { title: `${side.title} · ${side.when}` }, h("b", { text: side.title }),
        h("br"), [side.when, method].filter(Boolean).join(" · ")),
        side.data ? canvas : h("p", { class: "hint", text: "No 2-D embedding stored: compute one in the main view (Method) or run repviz embed." }));
    });
    const hole = this.heatmap.reason(cell);
    this.pairEl.replaceChildren(...[ // replaceChildren would write a null as the text "null"
      h("h3", {}, h("span", { text: this.matrix.scale_title }),
        h("b", { "data-testid": "pair-value", text: value === null ? "–" : value.toFixed(3) })),
      hole ? h("p", { class: "warn", "data-testid": "pair-hole", text: hole }) : null,
      h("div", { class: "pair-figures" }, figures)].filter(Boolean));
    this.drawPair();
  }

  /** The method of the embedding `choice` shows, and its snapshot when it is not `step` (none stored there). */
  methodOf(choice, step) {
    const run = runNamed(this.page.index, choice.run);
    const embedding = run.embeddings.find((e) => e.key === choice.key);
    return `${embedding ? embedding.method : choice.key}${choice.step === step ? "" : ` at ${choice.step}`}`;
  }

  /** Draw the pair's scatters with the selection and the hovered probe. */
  drawPair() {
    if (!this.pair) return;
    for (const side of this.pair.sides) {
      if (side.data && side.canvas.isConnected) side.points = drawPair(side.canvas, side.data, this.page.state.selectedIds, this.hoverId);
    }
    const stats = window.__repvizStats;
    stats.similarityPairs = (stats.similarityPairs || 0) + 1;
  }

  /** The probe point under the mouse in one of the pair's scatters: ringed in both, shown in the hover card. */
  onPairMove(side, e) {
    if (!side.points) return;
    const best = pointAt(side.canvas, e, side.points.px, side.points.py, HIT_PX);
    if (best === null) return;
    this.setHoverId(side.data.ids[best]);
    this.events.hover({ run: side.key[0], index: best, step: side.key[2] });
  }

  setHoverId(id) {
    if (id === this.hoverId) return;
    this.hoverId = id;
    this.drawPair();
  }

  /** Open the pair of cell `cell` side by side in the Runs view (at the slider's snapshot in mode "layers"). */
  onOpen(cell) {
    const keys = this.keysOf(cell);
    const pair = keys.map(([run, layer, step]) => (this.pick.mode === "layers" ? { run, layer } : { run, layer, step }));
    const [run, layer, step] = keys[0];
    this.events.show("runs", { run, layer, step, pair });
  }
}
