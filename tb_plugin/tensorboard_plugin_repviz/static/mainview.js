// The Main view: one representation as a scatter (regl-scatterplot), animated from snapshot to snapshot, with its
// overlays (trails of the selection, density contours, rings around a point's nearest neighbours), its legend,
// info line and side panels (points whose neighbourhood changed most, a point's nearest neighbours). It keeps
// drawing while another view is shown, so its picture, legend and info line stay current. It always draws every
// point of a snapshot; a snapshot may hold a subset of the probe (points.js): points are kept by probe point, and
// between snapshots of different subsets the points in both move while the others fade out or in.
import { embeddingOf, runNamed, sameChoice, stepAtOrBefore, stepsOf } from "./choice.js";
import { categoryColor, changeRamp, colorEncoding, pointColors, ramp } from "./colors.js";
import { Overlay, pointAt } from "./overlay.js";
import { crossFrames, forRows, idIndex as idIndexOf, rowOf, sameRows } from "./points.js";
import { normalise, Scatter, toPlot } from "./scatter.js";
import * as V from "./dom.js";

const { h } = V;

const MAX_TRAILS = 500; // the trails route's bound
const K_NEIGHBORS = 10;
const TOP_CHANGED = 12;
const LEGEND_TITLES = { label: "Label", prediction: "Prediction", correct: "Prediction vs label", confidence: "Confidence",
  change: "Neighbourhood change" };

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
    this.chrome = { snapshots: true, info: true, legend: true, selection: true };
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
    });
    this.overlay = new Overlay(this.el.overlayCanvas, this.scatter);
    // another run's probes placed into the drawn layout (repviz place): rings over it, a note, their hover cards
    this.el.placedNote = h("div", { class: "placed-note", "data-testid": "placed-note", hidden: true });
    el.append(this.el.placedNote);
    this.el.canvas.addEventListener("mousemove", (e) => this.hoverPlaced(e));
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

  /** The representation the neighbourhood change compares with: the previous snapshot, or another layer. */
  changeBase() {
    const s = this.page.state;
    const run = this.run;
    if (this.changeVs.startsWith("layer:")) {
      const layer = run.layers.find((l) => l.name === this.changeVs.slice(6));
      return layer && layer.steps.length ? { run: s.run, layer: layer.name, step: stepAtOrBefore(layer.steps, s.step) } : null;
    }
    const layer = run.layers.find((l) => l.name === s.layer);
    const steps = layer ? layer.steps.filter((t) => t < s.step) : [];
    return steps.length ? { run: s.run, layer: s.layer, step: steps[steps.length - 1] } : null;
  }

  // --- drawing -------------------------------------------------------------------------------------------------

  /** Fetch what the current choice needs and draw it; a newer choice made meanwhile wins. */
  async update({ transition, quiet = false }) {
    const generation = ++this.generation;
    const page = this.page;
    const { state: s, index } = page;
    const run = this.run;
    const chosen = { run: s.run, layer: s.layer, key: s.method, step: s.step };
    if (!run) {
      this.renderEmpty(V.emptyState("No repviz data in this log directory",
        h("span", {}, "Add ", V.code("repviz.ActivationLogger"), " to ", V.code("model.fit"),
          " callbacks; runs appear here while training writes them.")));
      return;
    }
    if (!embeddingOf(index, s) || !stepsOf(index, s).length) {
      const job = page.jobs.find((j) => j.run === s.run && j.layer === s.layer && `compute:${j.method}` === s.method);
      this.renderEmpty(job && job.state !== "failed"
        ? V.emptyState(`Computing ${job.method} for ${s.layer}…`, "The points appear when the first snapshot is embedded.")
        : V.emptyState(`No embedding of ${s.layer || "this run"} yet`,
          h("span", {}, "Run ", V.code(`repviz embed ${"logs"}`), " or pick a method to compute it in the method menu.",
            (run.placed_into || []).length ? ` Its points are placed into the layouts of run ${run.placed_into.join(", ")}: `
              + "pick that run to see them there." : "")));
      return;
    }
    const predSteps = run.prediction_steps;
    const predStep = predSteps.length ? stepAtOrBefore(predSteps, s.step) : null;
    const base = s.colorBy === "change" ? this.changeBase() : null;
    const byColumn = s.colorBy.startsWith("meta:") && (run.metadata || []).length;
    let data;
    try {
      const [coords, labels, ids, preds, change, metadata] = await Promise.all([
        this.model.coords(s.run, s.layer, s.step, s.method),
        this.model.labels(s.run),
        this.model.ids(s.run),
        predStep === null ? null : this.model.predictions(s.run, predStep),
        base ? this.model.neighborhoodChange({ run: s.run, layer: s.layer, step: s.step }, base, K_NEIGHBORS)
          .catch((e) => {
            this.events.error(e);
            return null;
          }) : null,
        byColumn ? this.model.metadata(s.run) : null,
      ]);
      const rows = await this.model.rows(s.run, s.layer, s.step, coords.length / 2, run.n_probe);
      if (rows.length !== coords.length / 2) {
        throw new Error(`the embedding of ${s.layer} at ${run.step_unit} ${s.step} has ${coords.length / 2} rows but the `
          + `snapshot holds ${rows.length} probe points; compute it again with repviz embed`);
      }
      data = { coords, rows, change, predStep, base, ...forRows({ ids, labels, preds, metadata }, rows) };
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
    const s = this.page.state;
    const { run, layer, key, step } = drawn.chosen;
    const at = (cx, cy) => toPlot(drawn.frame, cx, cy);
    const jobs = [];
    if (this.contours) {
      const by = s.colorBy === "label" && drawn.run.has_labels ? "class" : "all";
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
    if (this.trails && selected.length && selected.length <= MAX_TRAILS) {
      jobs.push(this.model.trails(run, layer, key, selected.map((i) => drawn.rows[i])).then(({ steps, m, coords }) => {
        const colors = pointColors(drawn.colors);
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
    jobs.push(this.placedOf(drawn).then((sets) => {
      const points = [];
      const colors = [];
      const hidden = this.hiddenPlaced();
      for (const p of sets) {
        for (let i = 0; i < p.n; i++) {
          if (hidden.has(p.labels[i])) continue;
          points.push(at(p.coords[2 * i], p.coords[2 * i + 1]));
          colors.push(p.labels[i] >= 0 ? categoryColor(p.labels[i]) : "#424242");
        }
      }
      return ["placed", points.length ? { kind: "placed", points, colors } : null];
    }));
    const knn = this.knn;
    const focus = knn ? drawn.idIndex.get(knn.id) : undefined;
    jobs.push(Promise.resolve(["rings", focus === undefined ? null : {
      kind: "rings", focus: [drawn.x[focus], drawn.y[focus]], points: knn.neighbors.map((j) => [drawn.x[j], drawn.y[j]]),
    }]));
    for (const job of jobs) {
      try {
        const [name, layerData] = await job;
        if (this.drawn !== drawn) return;
        this.overlay.set(name, layerData);
        if (layerData) window.__repvizStats.overlayDraws += 1;
      } catch (e) {
        this.events.error(e);
      }
    }
  }

  /** Focus point `index` of the drawn representation: its nearest neighbours in the original space. */
  focus(index) {
    this.focusId = this.drawn.ids[index];
    this.loadKnn();
  }

  async loadKnn() {
    const drawn = this.drawn;
    const index = drawn.idIndex.get(this.focusId);
    const { run, layer, step } = drawn.chosen;
    try {
      const result = await this.model.knn(run, layer, step, drawn.rows[index], K_NEIGHBORS);
      if (this.drawn !== drawn) return;
      const neighbors = result.neighbors.map((p) => rowOf(drawn.rows, p)); // probe points -> rows
      this.knn = { id: this.focusId, index, neighbors, distances: result.distances };
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
      sets.then((current) => { if (this.placed.drawn === drawn) this.placed.current = current; }, () => {});
    }
    return this.placed.sets;
  }

  /** The note naming the runs placed into this layout (the rings' legend), and those placed before it changed. */
  renderPlacedNote(placed) {
    const note = this.el.placedNote;
    const parts = placed.map((p) => (p.stale
      ? `${p.run}: placed before this layout was computed again (run repviz place again)`
      : `\u25ef ${p.run}: ${p.n} points placed into this layout${p.scores && p.scores.knn_accuracy !== undefined
        ? `, 10-NN accuracy ${V.fmt(p.scores.knn_accuracy, 2)}` : ""}`));
    note.replaceChildren(...parts.map((text) => h("div", { text })));
    note.hidden = !parts.length;
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
    const hidden = this.hiddenPlaced();
    const xs = [];
    const ys = [];
    const at = [];
    for (const p of sets) {
      for (let i = 0; i < p.n; i++) {
        if (hidden.has(p.labels[i])) continue;
        const [px, py] = toPlot(drawn.frame, p.coords[2 * i], p.coords[2 * i + 1]);
        const [sx, sy] = this.scatter.toScreen(px, py);
        xs.push(sx);
        ys.push(sy);
        at.push([p, i]);
      }
    }
    const found = xs.length ? pointAt(this.el.canvas, e, xs, ys, 6) : null;
    this.overPlaced = found !== null;
    if (found === null) return;
    const [p, i] = at[found];
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
    const s = this.page.state;
    this.el.tools.replaceChildren(
      V.segmented("mode", V.MOUSE_MODES, s.mode, (v) => this.events.change({ mode: v })),
      h("button", { type: "button", class: "reset", text: "Reset view", title: "zoom out to all points", onclick: () => this.scatter.reset() }),
      h("button", {
        type: "button", class: this.trails ? "on" : null, "data-testid": "trails", text: "Trails",
        title: `paths of the selected points (at most ${MAX_TRAILS}) across the snapshots of this layer`,
        "aria-pressed": String(this.trails), onclick: () => this.toggle("trails"),
      }),
      h("button", {
        type: "button", class: this.contours ? "on" : null, "data-testid": "contours", text: "Contours",
        title: "density contours (per class when colouring by label)", "aria-pressed": String(this.contours),
        onclick: () => this.toggle("contours"),
      }),
      this.el.toolNote,
    );
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
    const colors = this.drawn.colors;
    const title = LEGEND_TITLES[colors.mode] || colors.title;
    if (colors.range) { // a metadata column of numbers
      const { lo, hi, stops, missing } = colors.range;
      this.side.legend.replaceChildren(V.rampLegend(title, stops, V.fmt(lo, 3), V.fmt(hi, 3),
        missing ? `${V.fmt(missing)} missing (grey)` : null));
      return;
    }
    if (!colors.items) {
      const ends = colors.mode === "change" ? ["0 (same neighbours)", "1 (all new)"] : ["0 (unsure)", "1 (sure)"];
      const stops = colors.mode === "change" ? changeRamp(8) : ramp(8);
      const grey = colors.mode === "change" ? "not in the snapshot compared with" : "without a prediction";
      this.side.legend.replaceChildren(V.rampLegend(title, stops, ...ends,
        colors.missing ? `${V.fmt(colors.missing)} ${grey} (grey)` : null));
      return;
    }
    const items = colors.items;
    const hiddenCodes = this.page.state.hidden;
    const hidden = new Set([...hiddenCodes].map((code) => items.findIndex((it) => it.index === code)).filter((i) => i >= 0));
    const codeOf = (i) => items[i].index;
    const setHidden = (next) => this.events.change({ hidden: next });
    this.side.legend.replaceChildren(V.legend(title, items, hidden,
      (i) => {
        const next = new Set(hiddenCodes);
        if (next.has(codeOf(i))) next.delete(codeOf(i));
        else next.add(codeOf(i));
        setHidden(next);
      },
      (i) => setHidden(new Set(items.filter((_, j) => j !== i).map((it) => it.index))),
      () => setHidden(new Set())));
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
    if (drawn && this.page.state.colorBy === "change") parts.push(this.changePanel(drawn));
    if (drawn && this.knn) {
      const { index, neighbors, distances } = this.knn;
      const list = V.pointList(`Nearest neighbours of #${drawn.ids[index]}`,
        `In the original ${drawn.chosen.layer} activations (not the 2-D map); ringed in the plot.`,
        neighbors.map((j, r) => ({ index: j, text: `#${drawn.ids[j]} ${className(drawn, drawn.labels[j])}`, value: V.fmt(distances[r], 2) })),
        (j) => this.focus(j), "knn");
      parts.push(list);
      this.fillThumbs(list, drawn.run, neighbors);
    }
    if (this.page.view === this.name) this.side.panels.replaceChildren(...parts);
  }

  changePanel(drawn) {
    const s = this.page.state;
    const run = drawn.run;
    const options = [{ value: "previous", label: "previous snapshot" },
      ...run.layers.filter((l) => l.name !== s.layer).map((l) => ({ value: `layer:${l.name}`, label: `layer ${l.name}` }))];
    const vs = V.picker("vs", "change-vs", options, this.changeVs, (v) => {
      this.changeVs = v;
      this.update({ transition: false });
    });
    if (!drawn.change) {
      return h("section", { class: "points", "data-testid": "changed" }, h("h3", { text: "Neighbourhood change" }), vs,
        h("p", { class: "hint", text: drawn.base ? "Not available (see the message above)." : "The first snapshot has no previous one: pick a layer to compare with." }));
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
      `vs ${base.layer === s.layer ? `${run.step_unit} ${base.step}` : base.layer}: mean ${V.fmt(mean, 2)}; click one for its neighbours.`,
      order.map((i) => ({ index: i, text: `#${drawn.ids[i]} ${className(drawn, drawn.labels[i])}`, value: V.fmt(drawn.change[i], 2) })),
      (i) => this.focus(i), "changed");
    list.insertBefore(vs, list.children[1]);
    this.fillThumbs(list, run, order);
    return list;
  }

  /** Thumbnails of rows `indices` of the drawn snapshot in the list's entries. */
  async fillThumbs(list, run, indices) {
    if (!run.has_thumbnails) return;
    const { rows } = this.drawn;
    for (const i of indices) {
      try {
        const { shape, pixels } = await this.model.thumbnail(run.name, rows[i]);
        V.fillThumb(list, i, V.thumbnailCanvas(shape, pixels));
      } catch (e) {
        this.events.error(e);
        return;
      }
    }
  }
}

/** The class name of code `c` in the drawn run ("" for none). */
function className(drawn, c) {
  const names = drawn.run.class_names;
  return c < 0 || !Number.isFinite(c) ? "" : names ? names[c] : String(c);
}
