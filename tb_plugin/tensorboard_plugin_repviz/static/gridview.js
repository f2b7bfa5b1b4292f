// The Grid view: small multiples of layers (or runs) by snapshots (or runs), every cell the same method as the
// main view where stored, linked by probe id (cellsview.js).
import { embeddingOf, runNamed, spread, stepsOf } from "./choice.js";
import { CellsView } from "./cellsview.js";
import * as V from "./dom.js";

const { h } = V;

const GRID_COLS = 6; // snapshots shown in the grid, spread from the first to the last
const GRID_ROWS = 6;
const ROW_AXES = [{ value: "layers", label: "layers" }, { value: "runs", label: "runs" }];
const COL_AXES = [{ value: "snapshots", label: "snapshots" }, { value: "runs", label: "runs" }];

/** @implements {import("./view.js").View} */
export class GridView extends CellsView {
  /**
   * @param {import("./model.js").Model} model
   * @param {import("./view.js").ViewEvents} events
   */
  constructor(model, events) {
    super(model, events);
    this.name = "grid";
    this.label = "Grid";
    this.title = "small multiples: layers or runs by snapshots or runs";
    this.chrome = { snapshots: false, info: true, legend: true, selection: true, run: true, layer: true, method: true, colour: true };
    this.rows = "layers";
    this.cols = "snapshots";
  }

  /** @param {import("./view.js").Page} page @returns {import("./cellsview.js").Cells} */
  specs(page) {
    const { index, state } = page;
    const run = runNamed(index, state.run);
    const unit = run.step_unit || "step";
    const embedding = embeddingOf(index, state);
    const method = embedding ? embedding.method : null;
    const rowItems = this.rows === "runs"
      ? index.runs.slice(0, GRID_ROWS).map((r) => ({ run: r.name }))
      : run.layers.filter((l) => run.embeddings.some((e) => (e.steps[l.name] || []).length && (!method || e.method === method)))
        .slice(0, GRID_ROWS).map((l) => ({ layer: l.name }));
    const colAxis = this.rows === "runs" && this.cols === "runs" ? "snapshots" : this.cols;
    const colItems = colAxis === "runs"
      ? index.runs.slice(0, GRID_COLS).map((r) => ({ run: r.name }))
      : spread(stepsOf(index, state), GRID_COLS).map((step) => ({ step }));
    const withRun = this.rows === "runs" || colAxis === "runs";
    const title = (ch) => `${withRun ? `${ch.run} · ` : ""}${ch.layer} · ${unit} ${ch.step}`;
    const specs = [];
    for (const r of rowItems) for (const c of colItems) specs.push(this.spec({ ...r, ...c }, title));
    return { rows: rowItems.length, cols: colItems.length, specs };
  }

  /** The axis pickers. @returns {HTMLElement[]} */
  bar() {
    return [
      V.picker("Rows", "grid-rows", ROW_AXES, this.rows, (v) => {
        this.rows = v;
        this.draw();
      }),
      V.picker("Columns", "grid-cols", COL_AXES.filter((a) => !(this.rows === "runs" && a.value === "runs")), this.cols, (v) => {
        this.cols = v;
        this.draw();
      }),
      h("span", { class: "hint", text: "linked by probe id · click a cell to open it" }),
    ];
  }
}
