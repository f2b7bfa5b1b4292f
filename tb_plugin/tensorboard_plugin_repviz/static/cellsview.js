// What the Grid and Runs views share: a bar of their own choices over a grid of small multiples (compare.js draws
// the cells), each cell's data (points, colours, probe ids), and the links to the shared state: a hover shows that
// probe point's card, a lasso selects the same probe ids everywhere, a click on a cell opens it in the main view.
// A cell of a snapshot of over CELL_MAX_POINTS points draws a seeded sample of them (points.js), said in the cell,
// and the selected points besides.
// A subclass says which cells to show (`specs`) and builds the bar (`bar`). The grid itself is one board that the
// shown view of small multiples holds: one WebGL context for them all, and only one set of cells in the page.
import { choiceFor, runNamed, sameChoice, stepAtOrBefore } from "./choice.js";
import { colorEncoding } from "./colors.js";
import { Multiples } from "./compare.js";
import { CELL_MAX_POINTS, forRows, gather, idIndex, sampleRows } from "./points.js";
import { normalise } from "./scatter.js";
import * as V from "./dom.js";

const { h } = V;

/**
 * @typedef {import("./compare.js").CellSpec} CellSpec
 * @typedef {{rows: number, cols: number, specs: CellSpec[]}} Cells
 */

const ID_INDEXES = new WeakMap(); // probe ids array -> Map(id -> index)

/** Map from probe id to index in `ids`, built once per array. @returns {Map<number, number>} */
function idIndexOf(ids) {
  if (!ID_INDEXES.has(ids)) ID_INDEXES.set(ids, idIndex(ids));
  return ID_INDEXES.get(ids);
}

/**
 * Points, colours and probe ids of representation `choice` of `run`, coloured by `colorBy` (the label for
 * "change", which needs a pair of representations): every point of the snapshot (`all`, with its probe points
 * `rows`), and what the cell draws: all of them, or above CELL_MAX_POINTS a seeded sample plus the points of
 * `selectedIds` (see `drawnPart`).
 * @param {import("./model.js").Model} model @param {import("./model.js").Run} run
 * @param {import("./choice.js").Choice} choice @param {string} colorBy @param {Set<number>} selectedIds
 * @returns {Promise<import("./compare.js").CellData>}
 */
export async function cellData(model, run, choice, colorBy, selectedIds) {
  const predSteps = run.prediction_steps;
  const predStep = predSteps.length ? stepAtOrBefore(predSteps, choice.step) : null;
  const [coords, labels, probeIds, probePreds, probeMetadata] = await Promise.all([
    model.coords(choice.run, choice.layer, choice.step, choice.key),
    model.labels(choice.run),
    model.ids(choice.run),
    predStep === null ? null : model.predictions(choice.run, predStep),
    colorBy.startsWith("meta:") && (run.metadata || []).length ? model.metadata(choice.run) : null,
  ]);
  const rows = await model.rows(choice.run, choice.layer, choice.step, coords.length / 2, run.n_probe);
  if (rows.length !== coords.length / 2) {
    throw new Error(`the embedding of ${choice.layer} at step ${choice.step} has ${coords.length / 2} rows but the `
      + `snapshot holds ${rows.length} probe points; compute it again with repviz embed`);
  }
  const { ids, labels: rowLabels, preds, metadata } = forRows({ ids: probeIds, labels, preds: probePreds, metadata: probeMetadata }, rows);
  const { x, y } = normalise(coords);
  const colors = colorEncoding({ run, labels: rowLabels, preds, metadata, n: x.length }, colorBy === "change" ? "label" : colorBy);
  const all = { x, y, z: colors.z, ids, rows, nProbe: run.n_probe, idIndex: () => idIndexOf(ids) };
  return drawnPart({ ...all, all, palette: colors.palette, run }, selectedIds);
}

/**
 * The part of a cell's points it draws: all up to CELL_MAX_POINTS, else the seeded sample plus the points of
 * `selectedIds` (`sample`: the rows drawn; `note`: what the cell says about it).
 * @param {import("./compare.js").CellData} data @param {Set<number>} selectedIds
 */
export function drawnPart(data, selectedIds) {
  const { all } = data;
  const sample = sampleRows(all.rows, all.nProbe, all.ids, selectedIds);
  const part = (values) => (sample ? gather(values, sample) : values);
  const ids = part(all.ids);
  const notes = [];
  if (all.rows.length !== all.nProbe) notes.push(`${V.fmt(all.rows.length)} of ${V.fmt(all.nProbe)} points`);
  if (sample) {
    const extra = sample.length - CELL_MAX_POINTS; // selected points outside the sample
    notes.push(`${V.fmt(CELL_MAX_POINTS)} of ${V.fmt(all.rows.length)} drawn (seeded sample)${extra ? ` and ${V.fmt(extra)} selected` : ""}`);
  }
  return { ...data, x: part(all.x), y: part(all.y), z: part(all.z), ids, idIndex: idIndexOf(ids), sample,
    note: notes.join(" · ") };
}

/**
 * The grid element and its plots, moved into the view of small multiples that is shown. Hidden views keep their
 * size (visibility), so a board left in a hidden view is not resized, and its cells are not drawn again on return.
 */
class Board {
  constructor() {
    this.el = h("div", { class: "grid", "data-testid": "grid" });
    /** @type {?CellsView} */
    this.owner = null;
    this.multiples = new Multiples(this.el, {
      onHover: (id, choice) => this.owner.onHover(id, choice),
      onSelect: (ids) => this.owner.onSelect(ids),
      onOpen: (choice) => this.owner.onOpen(choice),
    });
  }

  /** Put the board in `view`'s element, under its bar. */
  take(view) {
    if (this.owner === view) return;
    this.owner = view;
    view.el.append(this.el);
  }
}

let board = null; // created when a view of small multiples is first shown

/** The base of a view of small multiples; subclasses define `specs(page)` and `bar(page)`. */
export class CellsView {
  /**
   * @param {import("./model.js").Model} model
   * @param {import("./view.js").ViewEvents} events
   */
  constructor(model, events) {
    this.model = model;
    this.events = events;
    /** @type {?import("./view.js").Page} */
    this.page = null;
    this.generation = 0;
  }

  /** @param {HTMLElement} el */
  mount(el) {
    el.classList.add("compare");
    this.el = el;
    this.barEl = h("div", { class: "view-bar" });
    el.append(this.barEl);
  }

  /** The plots of the board (valid while this view is shown). @returns {Multiples} */
  get multiples() {
    return board.multiples;
  }

  /**
   * Nothing while hidden; every cell drawn again when the view is shown or the colours change; new cells only when
   * the choice or the index changed; the mouse mode and the selection applied in place.
   * @param {import("./view.js").Page} page
   */
  render(page) {
    const last = this.page;
    this.page = page;
    if (page.view !== this.name) return;
    board ??= new Board();
    board.take(this);
    const s = page.state;
    const was = last && last.view === this.name ? last.state : null; // null: just shown
    if (!was || s.mode !== was.mode) this.multiples.setMode(s.mode);
    if (!was || s.colorBy !== was.colorBy) {
      this.draw({ force: true });
      return;
    }
    if (s.selectedIds !== was.selectedIds) this.select(s.selectedIds);
    const same = page.index === last.index && sameChoice({ ...s, key: s.method }, { ...was, key: was.method });
    if (!same) this.draw({ quiet: true });
    else if (s.mode !== was.mode) this.renderBar();
  }

  resize() {
    if (board && board.owner === this) this.multiples.resize();
  }

  canvases() {
    return [this.multiples.snapshot()];
  }

  /** The stored representation closest to `partial` in the page's index (see choice.js). */
  choiceFor(partial) {
    return choiceFor(this.page.index, this.page.state, partial);
  }

  /** A cell showing the representation closest to `partial`, titled by `title(choice)`. @returns {CellSpec} */
  spec(partial, title) {
    const choice = this.choiceFor(partial);
    return choice
      ? { id: `${choice.run}|${choice.layer}|${choice.key}|${choice.step}`, choice, title: title(choice) }
      : { id: `missing|${JSON.stringify(partial)}`, choice: null, title: "nothing stored" };
  }

  renderBar() {
    const mode = V.segmented("gridmode", V.MOUSE_MODES, this.page.state.mode, (v) => this.events.change({ mode: v }));
    this.barEl.replaceChildren(...this.bar(this.page), h("span", { class: "spacer" }), mode,
      V.resetButton("zoom every cell out to all its points", () => this.multiples.reset()));
  }

  /** Lay out and draw the cells; cells already drawn are kept unless `force`, nothing changes if `quiet` and the
   * cells are the same. */
  async draw({ force = false, quiet = false } = {}) {
    const page = this.page;
    if (!runNamed(page.index, page.state.run)) return;
    const started = performance.now();
    this.renderBar();
    const { rows, cols, specs } = this.specs(page);
    const cells = this.multiples.cells;
    // the same cells: a draw under way (a poll can land during the first) carries on and finishes them
    if (quiet && cells.length === specs.length && cells.every((c, i) => c.spec.id === specs[i].id)) return;
    const generation = ++this.generation;
    const current = () => generation === this.generation && board.owner === this; // no newer draw, still shown
    this.multiples.layout(specs, Math.max(rows, 1), Math.max(cols, 1));
    const stats = window.__repvizStats;
    stats.gridLayoutMs = performance.now() - started;
    stats.gridCells = specs.length;
    const draws = this.multiples.cells.map(async (cell, i) => {
      const { choice, title, message, note } = cell.spec;
      if (!choice) {
        this.multiples.label(i, title, message || "no embedding stored");
        return;
      }
      this.multiples.label(i, title, null, note);
      if (cell.drawn && !force) return;
      const data = await cellData(this.model, runNamed(page.index, choice.run), choice, page.state.colorBy,
        this.page.state.selectedIds);
      if (!current()) return;
      this.multiples.label(i, title, null, [note, data.note].filter(Boolean).join(" · "));
      const selected = [];
      for (const id of this.page.state.selectedIds) {
        const j = data.idIndex.get(id);
        if (j !== undefined) selected.push(j);
      }
      await this.multiples.draw(i, data, selected);
    });
    try {
      await Promise.all(draws);
    } catch (e) {
      this.events.error(e);
      return;
    }
    if (!current()) return;
    stats.gridDraws += 1;
    stats.gridDrawnMs = performance.now() - started;
  }

  /** Select probe `ids` in every cell; a sampled cell that does not draw some of them is drawn again with them. */
  select(ids) {
    this.multiples.select(ids);
    this.multiples.cells.forEach((cell, i) => {
      const data = cell.data;
      if (!data || !data.sample) return;
      const part = drawnPart(data, ids);
      if (part.sample.length === data.sample.length && part.sample.every((r, j) => r === data.sample[j])) return;
      const selected = [];
      for (const id of ids) {
        const j = part.idIndex.get(id);
        if (j !== undefined) selected.push(j);
      }
      this.multiples.label(i, cell.spec.title, null, [cell.spec.note, part.note].filter(Boolean).join(" · "));
      this.multiples.draw(i, part, selected);
    });
  }

  onSelect(ids) {
    if (ids) this.events.select(ids);
    else this.multiples.select(this.page.state.selectedIds); // a click in a cell opens it: keep the selection
  }

  onOpen(choice) {
    if (choice) this.events.open(choice);
  }

  /** A probe point under the mouse in a cell: its card; the mouse leaving a cell (`choice` null): no card. */
  onHover(id, choice) {
    if (!choice) this.events.hover(null);
    if (id === null || !choice) return;
    this.model.ids(choice.run).then((ids) => {
      const index = idIndexOf(ids).get(id);
      if (index !== undefined) this.events.hover({ run: choice.run, index, step: choice.step });
    });
  }
}
