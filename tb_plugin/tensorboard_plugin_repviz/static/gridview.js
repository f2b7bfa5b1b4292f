// The Grid view: small multiples of layers (or runs) by snapshots (or runs), every cell the same method as the
// main view where stored, linked by probe id (cellsview.js).
import { embeddingOf, layersAcross, runNamed, spread, stepsOf } from "./choice.js";
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
    // layers × runs: each run's layer paired with the row's, a run with other layers by relative depth, each once
    const pairs = this.rows === "layers" && colAxis === "runs"
      ? new Map(colItems.map((c) => [c.run, layersAcross(runNamed(index, c.run), run, rowItems.map((r) => r.layer))]))
      : null;
    const specs = [];
    rowItems.forEach((r, i) => {
      for (const c of colItems) {
        const pair = pairs ? pairs.get(c.run)[i] : { how: "same" };
        specs.push(pair.how === "same" ? this.spec({ ...r, ...c }, title) : this.pairedSpec(r.layer, c.run, pair, run, title));
      }
    });
    return { rows: rowItems.length, cols: colItems.length, specs };
  }

  /**
   * The cell of run `other` in the row of layer `name` of `run` when `other` records other layers: its layer at
   * the same relative depth, said in the cell's note, or an empty cell saying that this layer is in a row above.
   * @returns {import("./cellsview.js").CellSpec}
   */
  pairedSpec(name, other, pair, run, title) {
    const spec = this.spec({ run: other, layer: pair.layer }, title);
    if (pair.how === "depth") return { ...spec, note: `paired by depth with ${name}` };
    if (!spec.choice) return spec; // nothing stored above either
    const count = (n) => `${n} layer${n === 1 ? "" : "s"}`;
    const layers = this.page.index.runs.find((r) => r.name === other).layers.length;
    return { id: `above|${other}|${pair.layer}|${name}`, choice: null, title: `${other} · ${pair.layer}`,
      message: `in the row above (${other} records ${count(layers)}, ${run.name} ${count(run.layers.length)})` };
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
