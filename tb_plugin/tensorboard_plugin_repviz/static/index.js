// The Repviz tab. TensorBoard loads this module in an iframe whose page has <base href="plugin/repviz/"> and
// calls render(). The App holds the state the views share (run, layer, method, snapshot, colour mode, mouse mode,
// selection by probe id, hovered point), the header, the snapshot bar, the hover card, the selection box and the
// status bar (errors, background jobs: jobs.js); every view is a component behind one interface (view.js) in the VIEWS
// registry below, handed the Model and callbacks, never the App. model.js fetches, dom.js builds DOM, colors.js
// encodes; the header and the status bar (header.js), the metadata search (search.js), the selection box
// (selection.js), the snapshot bar (playback.js) and the PNG and CSV files (exporting.js) are parts of their own.
//
// Adding a view: a module whose class implements view.js's View, and one entry in VIEWS.
//
// A host other than TensorBoard (the notebook widget, a static export) calls start(root, host) instead of render():
// its transport carries the requests (model.js), `initial` chooses what is shown first, `onState` hears every change
// of the shared choices (view, run, layer, method, step, selection, hovered probe id), and the handle start returns
// sets them (`set`) or reads the run index again (`refresh`).
//
// Instrumentation (read by tests/browser and benchmarks/bench_plugin.py, nothing else):
//   window.__repvizStats = {draws, n, drawnMs, transitions, transitionFrames, transitionFrameMs, gridDraws,
//                           gridDrawnMs, gridCells, metaDraws, metaDrawnMs, metaShownMs, metaPoints, metaTrajectories,
//                           metaPositions, overlayDraws, exported, similarityDraws, similarityLayout, similarityShown,
//                           similarityPairs, similarityTweenFrames}
//   draws: completed draws of the main view; n: points in the last one; drawnMs: from the user's choice of a
//   representation to its draw having completed; transitionFrames: frame intervals (ms) during the last animated
//   transition; transitionFrameMs: how long each of its frames took from the frame's start to its picture in the
//   canvas (an interval rounds that up to whole display refreshes); gridDrawnMs: from showing the grid to every
//   cell drawn (gridLayoutMs: of which creating the cells' plots); metaDrawnMs: one draw of the meta map;
//   metaShownMs: from showing the meta map (or picking one) to its first draw, fetch included;
//   metaPositions: [x, y, run, layer, step] of each drawn representation (canvas pixels);
//   overlayDraws: overlay layers set (trails, contours, rings); exported: size of the last PNG export;
//   similarityLayout: {x, y, cell, n, m} of the heatmap's grid (CSS pixels); similarityShown: {step, rows, cols}
//   of the matrix shown (null: none); similarityPairs: draws of the hovered cell's two scatters;
//   similarityTweenFrames: frames drawn between two matrices (the heatmap's animation).
import { resolveCurrent, runNamed, stepAtOrBefore } from "./choice.js";
import * as V from "./dom.js";
import { exportPng } from "./exporting.js";
import { GridView } from "./gridview.js";
import { header, statusParts } from "./header.js";
import { Jobs } from "./jobs.js";
import { MainView } from "./mainview.js";
import { MetaView } from "./metaview.js";
import { Model } from "./model.js";
import { Playback } from "./playback.js";
import { RunsView } from "./runsview.js";
import { Search } from "./search.js";
import { Selection } from "./selection.js";
import { SimilarityView } from "./similarityview.js";

const { h } = V;

/** The views, in the order of the view switch; the first is shown first and shows what another view opens. */
const VIEWS = [MainView, GridView, RunsView, MetaView, SimilarityView];

/** How long the emptied hover card keeps its height for a pointer on its way from the plot to the panels below. */
const CARD_HOLD_MS = 800;

const CHROME_PARTS = ["snapshots", "info", "legend", "selection", "run", "layer", "method", "colour"];

/**
 * @typedef {{view: string, run: ?string, layer: ?string, method: ?string, step: ?number, selectedIds: Set<number>,
 *            hovered: ?number}} Shared  the choices a host observes and sets (`hovered`: the probe id under the mouse)
 * @typedef {{transport?: import("./model.js").Transport, initial?: Partial<Shared> & {runs?: string[]},
 *            onState?: function(Shared): void}} Host
 */

class App {
  /** @param {HTMLElement} root @param {Host} host */
  constructor(root, host = {}) {
    this.host = host;
    this.model = new Model(host.transport);
    /** @type {import("./view.js").State} */
    this.state = {
      run: null, layer: null, method: null, step: null, colorBy: "label", mode: "pan",
      hidden: new Set(), selectedIds: new Set(), hover: null, pair: null, only: false,
    };
    this.hoveredId = null; // the probe id of state.hover, once known
    const initial = host.initial || {};
    for (const key of ["run", "layer", "method", "step", "selectedIds"]) if (initial[key] !== undefined) this.state[key] = initial[key];
    this.error = null;
    this.jobs = new Jobs(this.model, {
      onChange: () => {
        this.renderStatus();
        this.renderViews();
      },
      onFinished: () => this.onJobFinished(),
      onError: (e) => this.showError(e),
    });
    this.since = performance.now();
    const shared = { page: () => ({ state: this.state, index: this.index }), change: (changes) => this.change(changes),
      error: (e) => this.showError(e) };
    this.playback = new Playback(shared);
    /** @type {import("./view.js").View[]} */
    this.views = VIEWS.map((View) => new View(this.model, this.events()));
    this.shown = this.views[0];

    this.el = {
      root: h("div", { class: "repviz", "data-view": this.shown.name }),
      header: h("header", { class: "bar" }),
      status: h("div", { class: "status" }),
      info: h("div", { class: "info-slot" }),
      stage: h("div", { class: "stage" }),
      hover: h("div", { class: "hover-slot" }, V.hoverCard(null)),
      search: h("div", { class: "search-slot" }),
      legend: h("div", { class: "legend-slot" }),
      selection: h("div", { class: "selection-slot" }),
      panels: h("div", { class: "panels" }),
      snapshots: this.playback.el,
    };
    this.search = new Search(this.model, this.el.search, shared);
    this.selection = new Selection(this.model, this.el.selection, shared);
    this.el.footer = h("footer", {}, this.el.snapshots);
    this.el.aside = h("aside", { onpointerleave: () => this.releaseCard(true) },
      this.el.hover, this.el.search, this.el.legend, this.el.selection, this.el.panels);
    this.el.root.append(this.el.header, this.el.status, this.el.info, h("main", {}, this.el.stage, this.el.aside),
      this.el.footer);
    root.append(this.el.root);
    const side = { info: this.el.info, legend: this.el.legend, panels: this.el.panels };
    this.stageOf = new Map(this.views.map((view) => {
      const el = h("div", { class: "view", "data-name": view.name });
      this.el.stage.append(el);
      view.mount(el, side);
      return [view, el];
    }));
    this.applyChrome();
    window.addEventListener("resize", () => this.views.forEach((view) => view.resize()));
  }

  /** The callbacks every view reports through. @returns {import("./view.js").ViewEvents} */
  events() {
    return {
      change: (changes) => this.change(changes),
      open: (choice) => this.open(choice),
      show: (name, changes) => {
        this.change(changes);
        this.setView(name);
      },
      select: (ids) => this.change({ selectedIds: ids }),
      hover: (point) => this.showPoint(point),
      card: (node) => this.el.hover.replaceChildren(node),
      job: (start, describe, onDone) => this.jobs.start(start, describe, onDone),
      error: (e) => this.showError(e),
    };
  }

  async start() {
    this.renderStatus();
    try {
      await this.model.loadRuns();
    } catch (e) {
      this.showError(e);
      this.el.stage.append(h("div", { class: "overlay shown" }, V.emptyState("Cannot read the log directory", e.message)));
      return;
    }
    this.onIndex();
    const initial = this.host.initial || {};
    for (const view of this.views) if (view.preset) view.preset(initial);
    if (initial.view) this.setView(initial.view);
    this.model.startPolling(() => this.onIndex(), (e) => this.showError(e));
  }

  /** Read the run index again now (a host that knows it changed); the page redraws if it did. */
  async refresh() {
    try {
      if (await this.model.loadRuns(true)) this.onIndex();
    } catch (e) {
      this.showError(e);
    }
  }

  /** Set shared choices from the host (`view`, `run`, `layer`, `method`, `step`, `selectedIds`, `hovered`). */
  set(changes) {
    if (!this.index) return;
    const { view, hovered, ...rest } = changes;
    if (view !== undefined && this.views.some((v) => v.name === view)) this.setView(view);
    if (Object.keys(rest).length) this.change(rest);
    if (hovered !== undefined) this.hoverProbe(hovered);
  }

  /** Show the hover card of the current run's point with probe id `id` (null: none). */
  async hoverProbe(id) {
    if (id === null) return this.showPoint(null);
    const ids = await this.model.ids(this.state.run);
    const index = ids.indexOf(id);
    if (index >= 0) this.showPoint({ run: this.state.run, index, step: this.state.step });
  }

  /** Tell the host the shared choices (after every change of them). */
  notify() {
    if (!this.host.onState || !this.index) return;
    const { run, layer, method, step, selectedIds } = this.state;
    this.host.onState({ view: this.shown.name, run, layer, method, step, selectedIds, hovered: this.hoveredId });
  }

  get index() {
    return this.model.index;
  }

  // --- the shared state ----------------------------------------------------------------------------------------

  /** What every view is shown. @returns {import("./view.js").Page} */
  page() {
    return { view: this.shown.name, state: this.state, index: this.index, jobs: this.jobs.list, since: this.since };
  }

  /** Give every view the new page. */
  renderViews() {
    const page = this.page();
    for (const view of this.views) view.render(page);
  }

  onIndex() {
    this.state = { ...this.state, ...resolveCurrent(this.index, this.state) };
    this.renderControls();
    this.selection.render();
    this.search.render();
    this.renderViews();
    this.notify();
  }

  /**
   * Change the shared state: a new representation (run, layer, method, step) is resolved against the index and
   * timed; a new colour mode shows every category again; "compute:<method>" starts that computation.
   * @param {Partial<import("./view.js").State>} changes
   */
  change(changes) {
    const next = { ...this.state, ...changes };
    const chooses = ["run", "layer", "method", "step"].some((k) => k in changes);
    if (chooses) {
      this.since = performance.now();
      if (typeof changes.method === "string" && changes.method.startsWith("compute:")) this.startCompute(next, changes.method.slice(8));
      Object.assign(next, resolveCurrent(this.index, next));
    }
    if ("colorBy" in changes) next.hidden = new Set();
    if (("run" in changes || "layer" in changes) && !("pair" in changes)) next.pair = null; // the pickers leave a pair
    this.state = next;
    if (chooses || "colorBy" in changes || "mode" in changes) this.renderControls();
    if ("selectedIds" in changes || chooses) this.selection.render();
    if ("run" in changes || "only" in changes) this.search.render();
    if ("run" in changes) this.search.rerun();
    this.renderViews();
    this.notify();
  }

  setView(name) {
    if (!this.index) return; // the log directory could not be read: the message stays
    if (name === this.shown.name) return; // the view shown: its panels and card stay
    this.shown = this.views.find((view) => view.name === name);
    this.el.root.dataset.view = name;
    this.applyChrome();
    this.renderControls();
    this.el.panels.replaceChildren();
    this.showPoint(null); // a card or preview describes the view left
    this.releaseCard(true); // the panels below are the new view's: none to keep in place
    this.renderViews();
    this.notify();
  }

  /** Show the shown view's element and the shared parts it uses; hide the others (they keep their size). */
  applyChrome() {
    for (const [view, el] of this.stageOf) el.classList.toggle("off", view !== this.shown);
    this.el.root.dataset.hide = CHROME_PARTS.filter((part) => !this.shown.chrome[part]).join(" ");
  }

  /** Open representation `choice` in the main view. */
  open(choice) {
    this.setView(this.views[0].name);
    this.change({ run: choice.run, layer: choice.layer, method: choice.key, step: choice.step });
  }

  showError(e) {
    this.error = e ? e.message || String(e) : null;
    this.renderStatus();
  }

  // --- the hover card --------------------------------------------------------------------------

  /** The hover card of probe point `point` (null: the empty card), with its prediction at or before its step. */
  async showPoint(point) {
    const token = {};
    this.hoverToken = token;
    this.state = { ...this.state, hover: point };
    const run = point && runNamed(this.index, point.run);
    if (!run) {
      this.setHovered(null);
      this.holdCard();
      this.el.hover.replaceChildren(V.hoverCard(null));
      return;
    }
    this.releaseCard(true);
    const { index, step } = point;
    const predSteps = run.prediction_steps;
    const predStep = predSteps.length ? stepAtOrBefore(predSteps, step) : null;
    const [labels, ids, preds, meta] = await Promise.all([this.model.labels(run.name), this.model.ids(run.name),
      predStep === null ? null : this.model.predictions(run.name, predStep), this.model.metadataOf(run)]);
    if (this.hoverToken !== token) return;
    this.setHovered(ids[index]);
    // A text probe (a text column, no thumbnails) shows its text where an image probe shows its thumbnail.
    const textColumn = meta && !run.has_thumbnails ? meta.columns.find((c) => c.card_text) : null;
    const names = run.class_names || null;
    const className = (c) => (c < 0 || !Number.isFinite(c) ? "–" : names ? names[c] : String(c));
    const card = {
      index,
      id: ids[index],
      label: className(labels[index]),
      prediction: preds ? className(preds.cls[index]) : "–",
      confidence: preds ? preds.conf[index] : null,
      correct: preds && labels[index] >= 0 ? preds.cls[index] === labels[index] : null,
      thumb: null,
      thumbText: run.has_thumbnails ? "loading…" : "no thumbnail",
      text: textColumn ? V.metaText(textColumn.values[index]) : null,
      find: () => this.search.regExp(),
      placed: point.placed || null,
      meta: meta ? meta.columns.filter((c) => c !== textColumn).map((c) => ({ name: c.name, value: V.metaText(c.values[index]) || "–" })) : [],
    };
    this.el.hover.replaceChildren(V.hoverCard(card));
    if (!run.has_thumbnails) return;
    try {
      const { shape, pixels } = await this.model.thumbnail(run.name, index);
      if (this.hoverToken !== token) return;
      card.thumb = V.thumbnailCanvas(shape, pixels);
      this.el.hover.replaceChildren(V.hoverCard(card));
    } catch (e) {
      this.showError(e);
    }
  }

  /**
   * Keep the card's height while it empties, so that the panels below do not move up under a pointer on its way from
   * the plot to them (a click meant for "hide the rest" would land on a legend's "only"): until CARD_HOLD_MS later,
   * or, if the pointer is over the side panel then, until it leaves it. The slot's `data-held` says which.
   */
  holdCard() {
    const slot = this.el.hover;
    slot.style.minHeight = `${slot.getBoundingClientRect().height}px`;
    slot.dataset.held = "moving";
    clearTimeout(this.cardTimer);
    this.cardTimer = setTimeout(() => this.releaseCard(), CARD_HOLD_MS);
  }

  /** The card takes its own height again, unless the pointer is over the side panel (`now`: even then, as when a
   * point fills it or the pointer leaves the panel). */
  releaseCard(now = false) {
    const slot = this.el.hover;
    if (!slot.dataset.held) return;
    if (!now && this.el.aside.matches(":hover")) {
      slot.dataset.held = "pointer"; // released when the pointer leaves the side panel
      return;
    }
    clearTimeout(this.cardTimer);
    slot.style.minHeight = "";
    delete slot.dataset.held;
  }

  /** Remember the hovered probe id and tell the host when it changed. */
  setHovered(id) {
    if (id === this.hoveredId) return;
    this.hoveredId = id;
    this.notify();
  }

  // --- background jobs ---------------------------------------------------------------------------------------

  /** Compute `method` for the layer of `current` in the background (the method picker's "compute …" entries). */
  startCompute(current, method) {
    const { run, layer } = current;
    this.jobs.forget((job) => job.state === "failed" && job.run === run && job.layer === layer && job.method === method);
    this.jobs.start(() => this.model.compute(run, layer, method), { kind: "embed", run, layer, method }, (job) => {
      if (this.state.run === job.run && this.state.layer === job.layer && this.state.method === `compute:${job.method}`) {
        this.state = { ...this.state, method: job.key || this.state.method };
      }
    });
  }

  async onJobFinished() {
    try {
      await this.model.loadRuns();
      this.onIndex();
    } catch (e) {
      this.showError(e);
    }
  }

  // --- the page's own parts ------------------------------------------------------------------------------------

  renderControls() {
    this.el.header.replaceChildren(...header(this.index, this.state, this.views, this.shown, { view: (v) => this.setView(v),
      change: (changes) => this.change(changes), exportPng: () => exportPng(this.shown, this.state) }));
    this.playback.render();
  }

  renderStatus() {
    this.el.status.replaceChildren(...statusParts(this.error, () => this.showError(null), this.jobs));
  }
}

/**
 * Build the page into `root` (the document's body: the page owns its document, as in TensorBoard's iframe) for
 * `host`; returns the handle a host drives it by, or null when the browser gives no WebGL.
 * @param {HTMLElement} root @param {Host} host
 * @returns {?{set: function(Partial<Shared>): void, refresh: function(): Promise<void>}}
 */
export function start(root, host = {}) {
  window.__repvizStats = { draws: 0, n: 0, drawnMs: null, transitions: 0, transitionFrames: [], gridDraws: 0,
    gridDrawnMs: null, gridCells: 0, metaDraws: 0, metaDrawnMs: null, metaShownMs: null, metaPoints: 0, overlayDraws: 0, exported: null };
  let app;
  try {
    app = new App(root, host);
  } catch (e) {
    // regl-scatterplot throws when the browser gives no WebGL context.
    root.replaceChildren(V.emptyState("The Repviz tab needs WebGL", `This browser refused it: ${e.message}`));
    return null;
  }
  app.start();
  return { set: (changes) => app.set(changes), refresh: () => app.refresh() };
}

/** Build the tab into document.body (TensorBoard calls this once per iframe). */
export function render() {
  // Relative to the module, so the iframe's <base href> and --path_prefix cannot misplace it.
  document.head.append(h("link", { rel: "stylesheet", href: new URL("style.css", import.meta.url).href }));
  start(document.body);
}
