// The Meta map view: the stored meta-SNE maps (a picker and their figures, or the form that computes one with the
// options the server lists), hover previews of a representation, and opening one in the main view. metamap.js
// draws the map.
import { cellData } from "./cellsview.js";
import { choiceFor, runNamed } from "./choice.js";
import { NO_CLASS, pointColors, runColor } from "./colors.js";
import { MetaMap, metaRows } from "./metamap.js";
import { drawPreview } from "./overlay.js";
import * as V from "./dom.js";

const { h } = V;

/** @implements {import("./view.js").View} */
export class MetaView {
  /**
   * @param {import("./model.js").Model} model
   * @param {import("./view.js").ViewEvents} events
   */
  constructor(model, events) {
    this.name = "meta";
    this.label = "Meta map";
    this.title = "the meta-SNE map: one point per representation";
    // the map shows every run and layer: the header's Method and Colour apply to its previews only
    this.chrome = { snapshots: false, info: false, legend: false, selection: false, run: false, layer: false, method: true,
      colour: true };
    this.methodLabel = "Method of the previews";
    this.colourLabel = "Colour of the previews";
    this.model = model;
    this.events = events;
    /** @type {?import("./view.js").Page} */
    this.page = null;
    this.chosen = null; // the name of the map shown
    this.hoverRow = null;
  }

  /** @param {HTMLElement} el @param {import("./view.js").SideSlots} side */
  mount(el, side) {
    this.side = side;
    this.barEl = h("div", { class: "view-bar" });
    this.canvas = h("canvas", { class: "meta-canvas", "data-testid": "meta" });
    el.classList.add("metaview");
    el.append(this.barEl, h("div", { class: "meta-wrap" }, this.canvas));
    this.map = new MetaMap(this.canvas, {
      onHover: (row) => this.onHover(row),
      onOpen: (row) => this.onOpen(row),
    });
  }

  /** Nothing while hidden; the chosen map again when the view is shown or the run index changed (new maps, runs'
   * colours). */
  render(page) {
    const last = this.page;
    this.page = page;
    if (page.view === this.name && (!last || last.view !== this.name || page.index !== last.index)) this.show();
  }

  resize() {
    if (this.page && this.page.view === this.name && this.map.rows.length) this.map.draw();
  }

  canvases() {
    return [this.canvas];
  }

  async show() {
    const started = performance.now();
    const index = this.page.index;
    const names = index.meta || [];
    if (!names.includes(this.chosen)) this.chosen = names[0] ?? null;
    const bar = (result) => V.metaPanel(names, this.chosen, result, index.choices.meta, (name) => {
      this.chosen = name;
      this.show();
    }, (options) => this.compute(options));
    this.barEl.replaceChildren(bar(null));
    if (!this.chosen) {
      this.map.setData({ coords: [] }, [], () => NO_CLASS);
      return;
    }
    const name = this.chosen;
    try {
      const result = await this.model.metaResult(name);
      if (this.chosen !== name || this.page.view !== this.name) return;
      this.barEl.replaceChildren(bar(result));
      const runs = index.runs.map((r) => r.name);
      this.map.setData(result, metaRows(result, index.runs), (run) => (runs.includes(run) ? runColor(run) : "#757575"));
      window.__repvizStats.metaShownMs = performance.now() - started;
      this.side.panels.replaceChildren(this.legend());
    } catch (e) {
      this.events.error(e);
    }
  }

  legend() {
    const rows = this.map.rows;
    const runs = [...new Set(rows.filter((r) => !r.landmark).map((r) => r.run))];
    return V.legend("Runs (darker: deeper layer)", runs.map((name) => ({
      name, color: runColor(name), count: rows.filter((r) => r.run === name).length,
    })), new Set(), () => {}, () => {}, () => {});
  }

  /** The stored 2-D embedding of row `r`'s representation (null when none is stored). */
  choiceOf(r) {
    return choiceFor(this.page.index, this.page.state, { run: r.run, layer: r.layer, step: r.step });
  }

  async onHover(row) {
    if (row === null) {
      this.hoverRow = null;
      this.events.hover(null); // the mouse left the point: its preview goes
      return;
    }
    const r = this.map.rows[row];
    if (r.landmark) {
      this.events.card(V.previewCard("input (landmark)", null, "The probe inputs themselves: every network starts here."));
      return;
    }
    const run = runNamed(this.page.index, r.run);
    const title = `${r.run} · ${r.layer} · ${(run && run.step_unit) || "step"} ${r.step}`;
    const choice = this.choiceOf(r);
    if (!choice) {
      this.events.card(V.previewCard(title, null, "No 2-D embedding stored for this representation."));
      return;
    }
    this.hoverRow = row;
    try {
      const data = await cellData(this.model, runNamed(this.page.index, choice.run), choice, this.page.state.colorBy);
      if (this.hoverRow !== row) return;
      const canvas = h("canvas", { class: "preview-canvas", "data-testid": "preview-canvas" });
      this.events.card(V.previewCard(title, canvas));
      drawPreview(canvas, data.x, data.y, pointColors(data));
    } catch (e) {
      this.events.error(e);
    }
  }

  onOpen(row) {
    const r = this.map.rows[row];
    if (r.landmark) return;
    const choice = this.choiceOf(r);
    if (!choice) {
      this.events.error(new Error(`no 2-D embedding of ${r.layer} in run ${r.run} is stored: run repviz embed`));
      return;
    }
    this.events.open(choice);
  }

  /** Ask the server for a meta-SNE map with `options` ({transform, metric, embedding}); show it once done. */
  compute(options) {
    this.events.job(() => this.model.computeMeta(options), { kind: "meta" }, (job) => {
      this.chosen = job.key || this.chosen;
    });
  }
}
