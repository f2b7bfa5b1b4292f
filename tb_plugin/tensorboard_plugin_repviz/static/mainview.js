// The Main view: one representation as a scatter (regl-scatterplot), animated from snapshot to snapshot, with its
// overlays (trails of the selection, density contours, rings around a point's nearest neighbours), its legend,
// info line and side panels (points whose neighbourhood changed most, a point's nearest neighbours). It keeps
// drawing while another view is shown, so its picture, legend and info line stay current. It always draws every
// point of a snapshot; a snapshot may hold a subset of the probe (points.js): points are kept by probe point, and
// between snapshots of different subsets the points in both move while the others fade out or in. What it draws is
// fetched in maindata.js, the overlay layers are built in mainlayers.js, the legend and side panels in mainpanels.js.
import { embeddingOf, runNamed, sameChoice, stepsOf } from "./choice.js";
import { colorEncoding } from "./colors.js";
import * as V from "./dom.js";
import { changeBase, loadDrawing, nearest } from "./maindata.js";
import { MAX_TRAILS, overlayLayers, placedAt, placedExtent } from "./mainlayers.js";
import { changePanel, fillThumbs, knnPanel, legendOf, nothingToDraw, placedNoteLines, tools } from "./mainpanels.js";
import { Overlay } from "./overlay.js";
import { crossFrames, idIndex as idIndexOf, rowOf, sameRows } from "./points.js";
import { normalise, Scatter } from "./scatter.js";

const { h } = V;

/** @implements {import("./view.js").View} */
export class MainView {
  /**
   * @param {import("./model.js").Model} model
   * @param {import("./view.js").ViewEvents} events
   */
  constructor(model, events) {
    this.name = "main";
    this.label = "Main";
    this.title = "one representation";
    this.chrome = { snapshots: true, info: true, legend: true, selection: true, run: true, layer: true, method: true, colour: true };
    this.model = model;
    this.events = events;
    /** @type {?import("./view.js").Page} */
    this.page = null;
    this.drawn = null; // data of the drawn representation
    this.generation = 0;
    this.trails = false;
    this.contours = false;
    this.changeVs = "previous"; // "previous" snapshot or "layer:<name>"
    this.focusId = null; // probe id whose nearest neighbours are listed
    this.knn = null; // {id, index, neighbors, distances} of the focused point in the drawn representation
  }

  /** @param {HTMLElement} el @param {import("./view.js").SideSlots} side */
  mount(el, side) {
    this.side = side;
    this.el = {
      canvas: h("canvas", { class: "scatter", "data-testid": "scatter" }),
      overlayCanvas: h("canvas", { class: "overlay-canvas", "data-testid": "overlay" }),
      overlay: h("div", { class: "overlay" }),
      tools: h("div", { class: "tools" }),
      toolNote: h("span", { class: "tool-note", hidden: true }),
    };
    el.classList.add("plot");
    el.append(this.el.canvas, this.el.overlayCanvas, this.el.tools, this.el.overlay);
    this.scatter = new Scatter(this.el.canvas, {
      onHover: (i) => this.onHover(i),
      onSelect: (indices) => this.onLasso(indices),
      onView: () => this.overlay.redraw(),
    }, { inset: () => this.inset() });
    this.overlay = new Overlay(this.el.overlayCanvas, this.scatter);
    // another run's probes placed into the drawn layout (repviz place): rings over it, a note, their hover cards
    this.el.placedNote = h("div", { class: "placed-note", "data-testid": "placed-note", hidden: true });
    el.append(this.el.placedNote);
    this.el.canvas.addEventListener("mousemove", (e) => this.hoverPlaced(e));
    this.el.canvas.addEventListener("mouseleave", () => {
      this.overPlaced = false;
      this.events.hover(null); // the card describes a point under the mouse only
    });
  }

  /** CSS pixels of the canvas that the tools (top) and the note on placed points (bottom) cover. */
  inset() {
    const { tools, placedNote } = this.el;
    return { top: tools.offsetTop + tools.offsetHeight,
      bottom: placedNote && !placedNote.hidden ? this.el.canvas.clientHeight - placedNote.offsetTop : 0 };
  }

  /** @param {import("./view.js").Page} page */
  render(page) {
    const last = this.page;
    this.page = page;
    const s = page.state;
    const was = last ? last.state : null;
    const representation = (st) => [st.run, st.layer, st.method, st.step].join("\u0000");
    const moved = !was || representation(s) !== representation(was);
    const recoloured = !was || s.colorBy !== was.colorBy;
    const filtered = was && (s.only !== was.only || (s.only && s.selectedIds !== was.selectedIds));
    if (!was || s.mode !== was.mode) this.scatter.setMode(s.mode);
    if (moved || recoloured || page.index !== last.index || page.jobs !== last.jobs) {
      this.update({ transition: !recoloured, quiet: !moved && !recoloured });
    } else {
      if (s.hidden !== was.hidden || filtered) this.applyHidden();
      if (s.selectedIds !== was.selectedIds) {
        this.unfocusUnlessSelected();
        this.scatter.select(this.selectedIndices());
        this.refreshOverlay();
      }
    }
    if (!was || s.mode !== was.mode) this.renderTools();
    else if (s.selectedIds !== was.selectedIds) this.renderToolNote();
    if (page.view === this.name && (!last || last.view !== this.name)) {
      this.renderPanels();
      this.overlay.redraw();
    }
  }

  resize() {
    this.overlay.redraw();
  }

  canvases() {
    this.overlay.drawNow();
    return [this.el.canvas, this.el.overlayCanvas];
  }

  // --- what is current ---------------------------------------------------------------------------------------

  get run() {
    return runNamed(this.page.index, this.page.state.run);
  }

  /** Whether `chosen` is still what the pickers say. */
  isCurrent(chosen) {
    const s = this.page.state;
    return sameChoice(chosen, { run: s.run, layer: s.layer, key: s.method, step: s.step });
  }

  selectedIndices() {
    if (!this.drawn) return [];
    const { idIndex } = this.drawn;
    const out = [];
    for (const id of this.page.state.selectedIds) {
      const i = idIndex.get(id);
      if (i !== undefined) out.push(i);
    }
    return out;
  }

  /** Indices of points whose category is not hidden and, with "hide the rest" on, that are selected (null when
   * every point shows). */
  visibleIndices() {
    const { hidden, only, selectedIds } = this.page.state;
    const byClass = hidden.size && this.drawn.colors.items;
    const bySelection = only && selectedIds.size;
    if (!byClass && !bySelection) return null;
    const { z } = this.drawn.colors;
    const ids = this.drawn.ids;
    const out = [];
    for (let i = 0; i < z.length; i++) {
      if ((!byClass || !hidden.has(z[i])) && (!bySelection || selectedIds.has(ids[i]))) out.push(i);
    }
    return out;
  }

  applyHidden() {
    if (!this.drawn) return;
    this.scatter.filter(this.visibleIndices());
    this.scatter.select(this.selectedIndices());
    this.renderLegend();
    if (this.placed && this.placed.current.length) this.refreshOverlay(); // their rings hide with their class
  }

  // --- drawing -------------------------------------------------------------------------------------------------

  /** Fetch what the current choice needs and draw it; a newer choice made meanwhile wins. */
  async update({ transition, quiet = false }) {
    const generation = ++this.generation;
    const page = this.page;
    const { state: s, index } = page;
    const run = this.run;
    const chosen = { run: s.run, layer: s.layer, key: s.method, step: s.step };
    if (!run || !embeddingOf(index, s) || !stepsOf(index, s).length) {
      this.renderEmpty(nothingToDraw(run, s, page.jobs));
      return;
    }
    const base = s.colorBy === "change" ? changeBase(run, s, this.changeVs) : null;
    let data;
    try {
      data = await loadDrawing(this.model, run, s, base, this.events.error);
    } catch (e) {
      if (generation !== this.generation) return;
      this.events.error(e);
      if (!this.drawn) this.renderEmpty(V.emptyState("Could not load this embedding", e.message));
      return;
    }
    if (generation !== this.generation || !this.isCurrent(chosen)) return;
    if (quiet && this.drawn && sameChoice(this.drawn.chosen, chosen) && !this.el.overlay.classList.contains("shown")) {
      this.drawn.run = run; // arrays of one representation never change: only the index was re-read
      return;
    }
    this.renderEmpty(null);
    if (this.drawn && this.drawn.run.name !== run.name) this.events.hover(null);
    const { x, y, centre, half } = normalise(data.coords);
    const n = x.length;
    const idIndex = this.drawn && this.drawn.ids === data.ids ? this.drawn.idIndex : idIndexOf(data.ids);
    const previous = this.drawn;
    const drawn = { run, chosen, ...data, x, y, n, idIndex, frame: { centre, half } };
    this.drawn = drawn;
    const colors = colorEncoding(drawn, s.colorBy);
    drawn.colors = colors;
    const crossing = transition && previous && previous.run.name === run.name && !sameRows(previous.rows, drawn.rows);
    if (crossing) await this.crossFade(previous, drawn);
    if (this.drawn !== drawn) return;
    this.scatter.setColors(colors.palette);
    await this.scatter.draw({ x, y, z: colors.z }, {
      transition: transition && !crossing,
      selected: this.selectedIndices(),
      visible: this.visibleIndices(),
    });
    if (this.drawn !== drawn) return; // a newer representation replaced this one: its update renders the rest
    const stats = window.__repvizStats;
    stats.draws += 1;
    stats.n = n;
    stats.drawnMs = performance.now() - page.since;
    this.renderLegend();
    this.renderInfo(chosen);
    if (this.focusId !== null && !idIndex.has(this.focusId)) this.focusId = null;
    this.knn = null;
    if (this.focusId !== null) this.loadKnn();
    else this.renderPanels();
    this.refreshOverlay();
  }

  /**
   * Animate from drawing `from` to `to`, snapshots of different probe subsets: the points in both move, those
   * in one only fade out or in where they are. Hover is ignored meanwhile: row numbers are those of the frames.
   */
  async crossFade(from, to) {
    const frames = crossFrames({ rows: from.rows, x: from.x, y: from.y, z: from.colors.z },
      { rows: to.rows, x: to.x, y: to.y, z: to.colors.z });
    const selectedIds = this.page.state.selectedIds;
    const selected = [];
    for (let k = 0; k < frames.points.length; k++) {
      const r = rowOf(to.rows, frames.points[k]);
      const id = r >= 0 ? to.ids[r] : from.ids[rowOf(from.rows, frames.points[k])];
      if (selectedIds.has(id)) selected.push(k);
    }
    this.fading = true;
    try {
      await this.scatter.draw(frames.start, { fade: true, selected, keepMode: true });
      if (this.drawn !== to) return;
      await this.scatter.draw(frames.end, { fade: true, selected, transition: true, keepMode: true });
    } finally {
      this.fading = false;
    }
  }

  // --- overlays: trails, contours, nearest neighbours -----------------------------------------------------------

  /** Fetch and set every overlay layer of the drawn representation. */
  async refreshOverlay() {
    const drawn = this.drawn;
    if (!drawn) return;
    const layers = overlayLayers(this.model, drawn, {
      contours: this.contours, trails: this.trails, colorBy: this.page.state.colorBy,
      selected: this.selectedIndices().sort((a, b) => a - b), placed: this.placedOf(drawn), hidden: this.hiddenPlaced(),
      knn: this.knn,
    });
    for (const layer of layers) {
      try {
        const [name, layerData] = await layer;
        if (this.drawn !== drawn) return;
        this.overlay.set(name, layerData);
        if (layerData) window.__repvizStats.overlayDraws += 1;
      } catch (e) {
        this.events.error(e);
      }
    }
  }

  /** A selection other than the focused point alone ends the focus: its neighbours' rings and list go. */
  unfocusUnlessSelected() {
    const selected = this.page.state.selectedIds;
    if (this.focusId === null || (selected.size === 1 && selected.has(this.focusId))) return;
    this.focusId = null;
    this.knn = null;
    this.renderPanels();
  }

  /** Focus point `index` of the drawn representation: its nearest neighbours in the original space. */
  focus(index) {
    this.focusId = this.drawn.ids[index];
    this.loadKnn();
  }

  async loadKnn() {
    const drawn = this.drawn;
    const index = drawn.idIndex.get(this.focusId);
    try {
      const { neighbors, distances } = await nearest(this.model, drawn, index);
      if (this.drawn !== drawn) return;
      this.knn = { id: this.focusId, index, neighbors, distances };
    } catch (e) {
      this.events.error(e);
      this.knn = null;
    }
    this.renderPanels();
    this.refreshOverlay();
  }

  // --- events of the scatter and the tools ---------------------------------------------------------------------

  onHover(index) {
    if (this.overPlaced) return; // a placed point's card is shown
    const drawn = this.drawn;
    if (index === null || !drawn || index >= drawn.n || this.fading) return; // keep the last card meanwhile
    this.events.hover({ run: drawn.run.name, index: drawn.rows[index], step: drawn.chosen.step });
  }

  /** The sets of points placed into the layout of `drawn` that are current (fetched once per drawing). */
  placedOf(drawn) {
    if (!this.placed || this.placed.drawn !== drawn) {
      const { run, layer, key, step } = drawn.chosen;
      const sets = this.model.placed(run, layer, step, key).then(({ placed }) => {
        if (this.drawn === drawn) this.renderPlacedNote(placed);
        return placed.filter((p) => !p.stale);
      });
      this.placed = { drawn, sets, current: [] };
      sets.then((current) => {
        if (this.placed.drawn !== drawn) return;
        this.placed.current = current;
        this.scatter.include(placedExtent(current, drawn.frame)); // their rings inside the fitted view too
      }, () => {});
    }
    return this.placed.sets;
  }

  /** The note naming the runs placed into this layout (the rings' legend), and those placed before it changed. */
  renderPlacedNote(placed) {
    const lines = placedNoteLines(placed);
    this.el.placedNote.replaceChildren(...lines.map((text) => h("div", { text, title: text })));
    this.el.placedNote.hidden = !lines.length;
  }

  /** Class codes whose placed points are not drawn: the classes hidden in the legend when colouring by label. */
  hiddenPlaced() {
    const s = this.page.state;
    return s.colorBy === "label" ? s.hidden : new Set();
  }

  /** Hovering a placed point (drawn over the layout's): its card, from its own run. */
  hoverPlaced(e) {
    const drawn = this.drawn;
    const sets = this.placed && this.placed.drawn === drawn ? this.placed.current : [];
    const found = placedAt(sets, this.hiddenPlaced(), drawn, this.scatter, this.el.canvas, e);
    this.overPlaced = found !== null;
    if (found === null) return;
    const [p, i] = found;
    this.events.hover({ run: p.run, index: p.rows[i], step: drawn.chosen.step, placed: `into ${drawn.run.name}` });
  }

  onLasso(indices) {
    const drawn = this.drawn;
    if (!drawn) return;
    // A click on one point also asks for its nearest neighbours in the original space.
    if (indices.length === 1) this.focus(indices[0]);
    this.events.select(new Set(indices.map((i) => drawn.ids[i])));
  }

  toggle(name) {
    this[name] = !this[name];
    this.renderTools();
    this.refreshOverlay();
  }

  // --- the parts around the scatter ------------------------------------------------------------------------------

  /** The tools: mouse mode, reset, trails and contours toggles, and a remark on the selection. */
  renderTools() {
    this.el.tools.replaceChildren(...tools(this.page.state.mode, this, {
      mode: (v) => this.events.change({ mode: v }), reset: () => this.scatter.reset(), toggle: (name) => this.toggle(name),
    }), this.el.toolNote);
    this.renderToolNote();
  }

  /** The tools' remark on the selection (trails need at most MAX_TRAILS points), updated in place. */
  renderToolNote() {
    const tooMany = this.trails && this.page.state.selectedIds.size > MAX_TRAILS;
    this.el.toolNote.textContent = tooMany ? `trails: select at most ${MAX_TRAILS} points` : "";
    this.el.toolNote.hidden = !tooMany;
  }

  /** A message in place of the scatter (null: the scatter again). */
  renderEmpty(node) {
    this.el.overlay.replaceChildren(...(node ? [node] : []));
    this.el.overlay.classList.toggle("shown", Boolean(node));
    if (node) {
      this.side.info.replaceChildren();
      this.side.legend.replaceChildren();
      this.events.hover(null);
    }
  }

  renderLegend() {
    this.side.legend.replaceChildren(legendOf(this.drawn.colors, this.page.state.hidden,
      (next) => this.events.change({ hidden: next })));
  }

  async renderInfo(chosen) {
    try {
      const info = await this.model.info(chosen.run, chosen.layer, chosen.step, chosen.key);
      if (!this.isCurrent(chosen)) return;
      const embedding = embeddingOf(this.page.index, this.page.state);
      this.side.info.replaceChildren(V.infoLine(info, (embedding && embedding.method) || chosen.key));
    } catch (e) {
      if (this.isCurrent(chosen)) this.side.info.replaceChildren(h("div", { class: "info warn", text: `info: ${e.message}` }));
    }
  }

  /** Side panels: the points that changed most, the focused point's neighbours (only while shown). */
  renderPanels() {
    const drawn = this.drawn;
    const parts = [];
    if (drawn && this.page.state.colorBy === "change") {
      const [panel, rows] = changePanel(drawn, this.page.state.layer, this.changeVs, (v) => {
        this.changeVs = v;
        this.update({ transition: false });
      }, (i) => this.focus(i));
      parts.push(panel);
      fillThumbs(this.model, panel, drawn, rows, this.events.error);
    }
    if (drawn && this.knn) {
      const list = knnPanel(drawn, this.knn, (j) => this.focus(j));
      parts.push(list);
      fillThumbs(this.model, list, drawn, this.knn.neighbors, this.events.error);
    }
    if (this.page.view === this.name) this.side.panels.replaceChildren(...parts);
  }
}
