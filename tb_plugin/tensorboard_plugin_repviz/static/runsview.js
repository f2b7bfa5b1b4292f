// The Runs view: two or three runs side by side at the same layer depth and snapshot, linked by probe id
// (cellsview.js).
import { runNamed } from "./choice.js";
import { CellsView } from "./cellsview.js";
import * as V from "./dom.js";

const { h } = V;

const SIDE_RUNS = 3;

/** @implements {import("./view.js").View} */
export class RunsView extends CellsView {
  /**
   * @param {import("./model.js").Model} model
   * @param {import("./view.js").ViewEvents} events
   */
  constructor(model, events) {
    super(model, events);
    this.name = "runs";
    this.label = "Runs";
    this.title = "two or three runs side by side at the same layer depth and snapshot";
    this.chrome = { snapshots: true, info: true, legend: true, selection: true, run: true, layer: true, method: true, colour: true };
    this.runs = []; // the runs shown, at most SIDE_RUNS
  }

  /** The runs shown: the user's that still exist, else the current run and the next ones. @returns {string[]} */
  shownRuns(page) {
    const names = page.index.runs.map((r) => r.name);
    this.runs = this.runs.filter((name) => names.includes(name));
    if (!this.runs.length) this.runs = [page.state.run, ...names.filter((n) => n !== page.state.run)].slice(0, SIDE_RUNS);
    return this.runs;
  }

  /** @param {import("./view.js").Page} page @returns {import("./cellsview.js").Cells} */
  specs(page) {
    const run = runNamed(page.index, page.state.run);
    const unit = run.step_unit || "step";
    const title = (ch) => `${ch.run} · ${ch.layer} · ${unit} ${ch.step}`;
    const pair = page.state.pair; // representations opened together (the Similarity view's click)
    if (pair) return { rows: 1, cols: pair.length, specs: pair.map((p) => this.spec(p, title)) };
    const runs = this.shownRuns(page);
    return { rows: 1, cols: runs.length, specs: runs.map((name) => this.spec({ run: name }, title)) };
  }

  /** The run check boxes and what is shown. @returns {HTMLElement[]} */
  bar(page) {
    const { index, state } = page;
    const run = runNamed(index, state.run);
    return [
      h("span", { class: "label", text: "Runs" }),
      V.runChecks(index.runs.map((r) => r.name), state.pair ? state.pair.map((p) => p.run) : this.shownRuns(page), SIDE_RUNS, (names) => {
        if (names.length) this.runs = names;
        if (this.page.state.pair) this.events.change({ pair: null });
        this.draw();
      }),
      h("span", { class: "hint", text: state.pair ? "the pair opened from the Similarity view"
        : `layer depth of ${state.layer}, ${(run && run.step_unit) || "step"} ${state.step}` }),
    ];
  }
}
