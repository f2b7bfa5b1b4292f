// The Grid and Runs views: which cells to show (layers or runs by snapshots or runs; two or three runs side by
// side at the same layer depth and snapshot), their data, and the links between them and the page's state (the
// hover card, the selection by probe id, opening a cell in the main view). compare.js draws the cells.
import { stepAtOrBefore, spread } from "./choice.js";
import { colorEncoding } from "./colors.js";
import { Multiples } from "./compare.js";
import { normalise } from "./scatter.js";
import * as V from "./views.js";

const { h } = V;

const GRID_COLS = 6; // snapshots shown in the grid, spread from the first to the last
const GRID_ROWS = 6;
export const SIDE_RUNS = 3;
const GRID_ROW_AXES = [{ value: "layers", label: "layers" }, { value: "runs", label: "runs" }];
const GRID_COL_AXES = [{ value: "snapshots", label: "snapshots" }, { value: "runs", label: "runs" }];

export class GridView {
  /** @param {object} app the page's App (state, model, pickers) */
  constructor(app) {
    this.app = app;
    this.generation = 0;
    this.idIndexes = new Map(); // probe ids array -> Map(id -> index)
    this.multiples = new Multiples(app.el.grid, {
      onHover: (id, choice) => this.onHover(id, choice),
      onSelect: (ids) => this.onSelect(ids),
      onOpen: (choice) => app.open(choice),
    });
  }

  /** The cells of the grid (or of the runs view): {rows, cols, specs}. */
  specs() {
    const app = this.app;
    const s = app.state;
    const run = app.run;
    const unit = (run && run.step_unit) || "step";
    const spec = (partial, title) => {
      const choice = app.choiceFor(partial);
      return choice
        ? { id: `${choice.run}|${choice.layer}|${choice.key}|${choice.step}`, choice, title: title(choice) }
        : { id: `missing|${JSON.stringify(partial)}`, choice: null, title: "nothing stored" };
    };
    if (s.view === "runs") {
      const cols = s.sideRuns.map((name) => ({ run: name }));
      return { rows: 1, cols: cols.length, specs: cols.map((c) => spec(c, (ch) => `${ch.run} · ${ch.layer} · ${unit} ${ch.step}`)) };
    }
    const method = app.embedding ? app.embedding.method : null;
    const rowItems = s.gridRows === "runs"
      ? app.index.runs.slice(0, GRID_ROWS).map((r) => ({ run: r.name }))
      : run.layers.filter((l) => run.embeddings.some((e) => (e.steps[l.name] || []).length && (!method || e.method === method)))
        .slice(0, GRID_ROWS).map((l) => ({ layer: l.name }));
    const colAxis = s.gridRows === "runs" && s.gridCols === "runs" ? "snapshots" : s.gridCols;
    const colItems = colAxis === "runs"
      ? app.index.runs.slice(0, GRID_COLS).map((r) => ({ run: r.name }))
      : spread(app.steps, GRID_COLS).map((step) => ({ step }));
    const withRun = s.gridRows === "runs" || colAxis === "runs";
    const title = (ch) => `${withRun ? `${ch.run} · ` : ""}${ch.layer} · ${unit} ${ch.step}`;
    const specs = [];
    for (const r of rowItems) for (const c of colItems) specs.push(spec({ ...r, ...c }, title));
    return { rows: rowItems.length, cols: colItems.length, specs };
  }

  /** Lay out and draw the grid or the runs view; cells already drawn are kept unless `force`. */
  async render({ force = false, quiet = false } = {}) {
    const app = this.app;
    if (!app.run) return;
    const generation = ++this.generation;
    const started = performance.now();
    this.renderBar();
    const { rows, cols, specs } = this.specs();
    if (quiet && this.multiples.cells.length === specs.length && this.multiples.cells.every((c, i) => c.spec.id === specs[i].id)) return;
    this.multiples.layout(specs, Math.max(rows, 1), Math.max(cols, 1));
    const stats = window.__repvizStats;
    stats.gridLayoutMs = performance.now() - started;
    stats.gridCells = specs.length;
    const draws = this.multiples.cells.map(async (cell, i) => {
      const { choice, title } = cell.spec;
      if (!choice) {
        this.multiples.label(i, title, "no embedding stored");
        return;
      }
      this.multiples.label(i, title);
      if (cell.drawn && !force) return;
      const data = await this.cellData(choice);
      if (generation !== this.generation) return;
      const selected = [];
      for (const id of app.state.selectedIds) {
        const j = data.idIndex.get(id);
        if (j !== undefined) selected.push(j);
      }
      await this.multiples.draw(i, data, selected);
    });
    try {
      await Promise.all(draws);
    } catch (e) {
      app.showError(e);
      return;
    }
    if (generation !== this.generation) return;
    stats.gridDraws += 1;
    stats.gridDrawnMs = performance.now() - started;
  }

  /** Points, colours and ids of one cell. */
  async cellData(choice) {
    const app = this.app;
    const run = app.runNamed(choice.run);
    const predSteps = run.prediction_steps;
    const predStep = predSteps.length ? stepAtOrBefore(predSteps, choice.step) : null;
    const [coords, labels, ids, preds] = await Promise.all([
      app.model.coords(choice.run, choice.layer, choice.step, choice.key),
      app.model.labels(choice.run),
      app.model.ids(choice.run),
      predStep === null ? null : app.model.predictions(choice.run, predStep),
    ]);
    const { x, y } = normalise(coords);
    const colorBy = app.state.colorBy === "change" ? "label" : app.state.colorBy;
    const colors = colorEncoding({ run, labels, preds, n: x.length }, colorBy);
    if (!this.idIndexes.has(ids)) this.idIndexes.set(ids, new Map(Array.from(ids, (id, i) => [id, i])));
    return { x, y, z: colors.z, w: colors.w, by: colors.by, palette: colors.palette, ids, idIndex: this.idIndexes.get(ids), run, labels, preds };
  }

  renderBar() {
    const app = this.app;
    const s = app.state;
    const mode = V.segmented("gridmode", V.MOUSE_MODES, s.mode, (v) => app.setMode(v));
    if (s.view === "runs") {
      const run = app.run;
      app.el.compareBar.replaceChildren(
        h("span", { class: "label", text: "Runs" }),
        V.runChecks(app.index.runs.map((r) => r.name), s.sideRuns, SIDE_RUNS, (names) => {
          s.sideRuns = names.length ? names : s.sideRuns;
          this.render();
        }),
        h("span", { class: "hint", text: `layer depth of ${s.layer}, ${(run && run.step_unit) || "step"} ${s.step}` }),
        h("span", { class: "spacer" }), mode);
      return;
    }
    app.el.compareBar.replaceChildren(
      V.picker("Rows", "grid-rows", GRID_ROW_AXES, s.gridRows, (v) => {
        s.gridRows = v;
        this.render();
      }),
      V.picker("Columns", "grid-cols", GRID_COL_AXES.filter((a) => !(s.gridRows === "runs" && a.value === "runs")),
        s.gridCols, (v) => {
          s.gridCols = v;
          this.render();
        }),
      h("span", { class: "hint", text: "linked by probe id · click a cell to open it" }),
      h("span", { class: "spacer" }), mode);
  }

  onHover(id, choice) {
    const app = this.app;
    if (id === null || !choice) return;
    const run = app.runNamed(choice.run);
    app.model.ids(choice.run).then((ids) => {
      const index = this.idIndexes.has(ids) ? this.idIndexes.get(ids).get(id) : undefined;
      if (index !== undefined) app.showPoint(run, index, choice.step);
    });
  }

  onSelect(ids) {
    const app = this.app;
    if (ids) app.state.selectedIds = ids;
    this.multiples.select(app.state.selectedIds);
    app.scatter.select(app.selectedIndices());
    app.renderSelection();
  }
}
