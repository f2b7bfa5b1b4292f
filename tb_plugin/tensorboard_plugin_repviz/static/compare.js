// Linked small multiples: a grid of small scatters of the same probe points (layers x snapshots, runs side by
// side), all drawn through ONE WebGL context (regl-scatterplot's createRenderer). Points are linked by probe
// id: a hover in one cell highlights that probe in every cell, a lasso selects the same ids everywhere, a click
// on a cell asks to open it in the main view. cellsview.js says which cells to show and gives their data.
//
// The highlight in the other cells is drawn on each cell's 2-D overlay (a ring and a cross-hair at the point's
// screen position), not by re-drawing their WebGL pictures: a hover then costs one WebGL draw (the hovered cell),
// not one per cell.
import { fitCanvas } from "./overlay.js";
import { Scatter, sharedRenderer } from "./scatter.js";
import { h, shown } from "./dom.js";

const CLICK_PX = 4; // a press that moves less than this is a click, not a pan or a lasso

/**
 * @typedef {{id: string, title: string, choice: object, note?: string, message?: string}} CellSpec  id: what it
 *   shows (same id, same picture); `note`: said under the title; `message`: what an empty cell (no choice) says
 * @typedef {{x: Float32Array, y: Float32Array, z: Float32Array, ids: Float64Array,
 *            idIndex: Map<number, number>, palette: string[], all: object, sample: ?Int32Array,
 *            note: string}} CellData  what a cell draws (its points' probe ids in `ids`); `all`: every point of
 *   the snapshot (x, y, ids, idIndex()), of which the cell draws the rows `sample` (null: all), as `note` says
 */

/** The grid of small multiples: lays out cells, draws them, links hover and selection by probe id. */
export class Multiples {
  /**
   * @param {HTMLElement} root where the grid goes
   * @param {{onHover: function(?number, object): void, onSelect: function(Set<number>): void,
   *          onOpen: function(object): void}} handlers  ids are probe ids, objects the cells' choices
   */
  constructor(root, handlers) {
    this.root = root;
    this.handlers = handlers;
    this.renderer = null; // created on first use: a page that never opens the grid makes no second context
    this.cells = [];
    this.shape = [0, 0];
    this.mode = "pan";
  }

  /** Lay out `specs` (row-major) in `rows` x `cols` cells; cells whose id is unchanged keep their plot. */
  layout(specs, rows, cols) {
    if (!this.renderer) this.renderer = sharedRenderer();
    const keep = new Map(this.cells.map((c) => [c.spec.id, c]));
    const cells = specs.map((spec) => {
      const old = keep.get(spec.id);
      if (old) {
        keep.delete(spec.id);
        old.spec = spec;
        return old;
      }
      return this._cell(spec);
    });
    for (const cell of keep.values()) cell.scatter.destroy();
    this.cells = cells;
    this.shape = [rows, cols];
    this.root.style.setProperty("--cols", String(cols));
    this.root.style.setProperty("--rows", String(rows));
    this.root.replaceChildren(...cells.map((c) => c.el));
    this.resize();
    this.setMode(this.mode);
  }

  /** Size the shared drawing buffer to one cell (all cells are equal). */
  resize() {
    const first = this.cells[0];
    if (!first) return;
    const { width, height } = first.canvas.getBoundingClientRect();
    if (width > 0 && height > 0) this.renderer.resize(Math.ceil(width), Math.ceil(height));
  }

  _cell(spec) {
    const canvas = h("canvas", { class: "cell-canvas" });
    const mark = h("canvas", { class: "cell-mark" });
    const title = h("button", { type: "button", class: "cell-title", title: "open in the main view" });
    const note = h("span", { class: "cell-note", "data-testid": "cell-note", hidden: true });
    const el = h("div", { class: "cell", "data-testid": "cell" }, title, h("div", { class: "cell-plot" }, canvas, mark, note));
    const cell = { spec, canvas, mark, note, el, title, data: null, drawn: false, marked: null };
    title.addEventListener("click", () => this.handlers.onOpen(cell.spec.choice));
    cell.scatter = new Scatter(canvas, {
      onHover: (i) => this._hover(cell, i),
      onSelect: (indices) => this._select(cell, indices),
      onView: () => this._mark(cell, cell.marked),
    }, { renderer: this.renderer, small: true, // a fitted cell keeps its points above its note
      inset: () => ({ top: 0, bottom: note.hidden ? 0 : note.offsetHeight + 2 }) });
    canvas.addEventListener("mouseleave", () => {
      this.highlight(null);
      this.handlers.onHover(null, null);
    });
    let down = null;
    canvas.addEventListener("pointerdown", (e) => {
      down = [e.clientX, e.clientY];
    });
    canvas.addEventListener("pointerup", (e) => {
      if (down && Math.hypot(e.clientX - down[0], e.clientY - down[1]) < CLICK_PX && this.mode === "pan") {
        this.handlers.onOpen(cell.spec.choice);
      }
      down = null;
    });
    return cell;
  }

  /** Show `text` as cell i's title, `message` (or nothing) over its plot and `note` (or nothing) under it. */
  label(i, text, message = null, note = null) {
    const cell = this.cells[i];
    cell.title.textContent = shown(text);
    cell.el.dataset.message = message || "";
    cell.el.classList.toggle("empty", Boolean(message));
    cell.note.textContent = shown(note || "");
    cell.note.hidden = !note;
  }

  /**
   * Draw cell i. Resolves when drawn.
   * @param {number} i @param {CellData} data @param {number[]} selected indices in this cell
   */
  async draw(i, data, selected) {
    const cell = this.cells[i];
    cell.data = data;
    this._mark(cell, null);
    cell.scatter.setColors(data.palette);
    await cell.scatter.draw({ x: data.x, y: data.y, z: data.z }, { transition: false, selected });
    cell.drawn = true;
  }

  /**
   * Highlight probe `id` (null: none) in every cell but `except` (which shows its own hover), where the cell's
   * snapshot holds it, drawn in its sample or not.
   */
  highlight(id, except = null) {
    for (const cell of this.cells) {
      if (cell === except || !cell.data) continue;
      const { all } = cell.data;
      const i = id === null ? undefined : all.idIndex().get(id);
      this._mark(cell, i === undefined ? null : [all.x[i], all.y[i]]);
    }
  }

  /** Ring and cross-hair the point at plot coordinates `at` ([x, y]; null: nothing) on the cell's overlay. */
  _mark(cell, at) {
    if (at === null && cell.marked === null) return;
    cell.marked = at;
    const ctx = fitCanvas(cell.mark);
    if (at === null) return;
    const [x, y] = cell.scatter.toScreen(at[0], at[1]);
    const width = cell.mark.clientWidth;
    const height = cell.mark.clientHeight;
    ctx.strokeStyle = "rgba(245, 124, 0, 0.55)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(0, y);
    ctx.lineTo(width, y);
    ctx.moveTo(x, 0);
    ctx.lineTo(x, height);
    ctx.stroke();
    ctx.strokeStyle = "#212121";
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.arc(x, y, 5, 0, 2 * Math.PI);
    ctx.stroke();
  }

  /** Select probe `ids` in every cell. */
  select(ids) {
    for (const cell of this.cells) {
      if (!cell.data) continue;
      const out = [];
      for (const id of ids) {
        const i = cell.data.idIndex.get(id);
        if (i !== undefined) out.push(i);
      }
      cell.scatter.select(out);
    }
  }

  /** Every cell back to all its points (Scatter.fit). */
  reset() {
    for (const cell of this.cells) cell.scatter.reset();
  }

  setMode(mode) {
    this.mode = mode;
    for (const cell of this.cells) cell.scatter.setMode(mode);
  }

  /** One canvas with every cell's picture and title, as drawn. */
  snapshot() {
    const ratio = window.devicePixelRatio || 1;
    const box = this.root.getBoundingClientRect();
    const out = h("canvas", { width: Math.round(box.width * ratio), height: Math.round(box.height * ratio) });
    const ctx = out.getContext("2d");
    ctx.scale(ratio, ratio);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, box.width, box.height);
    ctx.font = "12px Roboto, Arial, sans-serif";
    ctx.fillStyle = "#212121";
    for (const cell of this.cells) {
      const c = cell.canvas.getBoundingClientRect();
      const t = cell.title.getBoundingClientRect();
      ctx.fillText(cell.title.textContent, t.left - box.left + 4, t.top - box.top + 13);
      ctx.drawImage(cell.canvas, c.left - box.left, c.top - box.top, c.width, c.height);
      ctx.drawImage(cell.mark, c.left - box.left, c.top - box.top, c.width, c.height);
    }
    return out;
  }

  _hover(cell, index) {
    const id = index === null || !cell.data ? null : cell.data.ids[index];
    this.highlight(id, cell);
    this.handlers.onHover(id, cell.spec.choice);
  }

  _select(cell, indices) {
    // A click on a point selects it in regl-scatterplot: in the grid a click opens the cell instead.
    if (indices.length < 2 || !cell.data) {
      this.handlers.onSelect(null);
      return;
    }
    this.handlers.onSelect(new Set(indices.map((i) => cell.data.ids[i])));
  }

  /** Free every plot; the shared context goes with the page. */
  clear() {
    for (const cell of this.cells) cell.scatter.destroy();
    this.cells = [];
    this.root.replaceChildren();
  }
}
