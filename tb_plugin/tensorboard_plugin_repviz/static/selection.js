// The selection box: how many of the current run's points are selected, a button that clears the selection and
// one that saves the selected points as a CSV file (id, label, prediction at the current snapshot, metadata). It
// owns its slot; the page hands it the shared state and the callback that changes it.
import { runNamed, stepAtOrBefore } from "./choice.js";
import * as V from "./dom.js";
import { exportCsv } from "./exporting.js";

export class Selection {
  /**
   * @param {import("./model.js").Model} model
   * @param {HTMLElement} slot  where the box goes
   * @param {{page: function(): {state: import("./view.js").State, index: import("./model.js").Index},
   *          change: function(Partial<import("./view.js").State>): void, error: function(Error): void}} on
   */
  constructor(model, slot, on) {
    this.model = model;
    this.slot = slot;
    this.on = on;
  }

  /** Probe indices of the current run that are selected, in probe order. @returns {Promise<number[]>} */
  async indices() {
    const { state } = this.on.page();
    const ids = await this.model.ids(state.run);
    const selected = state.selectedIds;
    const out = [];
    ids.forEach((id, i) => {
      if (selected.has(id)) out.push(i);
    });
    return out;
  }

  /** The box for the current run and selection. */
  async render() {
    const token = {};
    this.token = token;
    const { state, index } = this.on.page();
    const run = runNamed(index, state.run);
    let count = 0;
    if (run && state.selectedIds.size) {
      try {
        count = (await this.indices()).length;
      } catch (e) {
        this.on.error(e);
      }
      if (this.token !== token) return;
    }
    this.slot.replaceChildren(V.selectionBar(count, run ? run.n_probe : 0,
      () => this.on.change({ selectedIds: new Set() }), () => this.export()));
  }

  /** The selected points of the current run (id, label, prediction at the current step) as a CSV download. */
  async export() {
    const { state, index } = this.on.page();
    const { run: runName, layer, step } = state;
    const run = runNamed(index, runName);
    const predStep = run.prediction_steps.length ? stepAtOrBefore(run.prediction_steps, step) : null;
    try {
      const [indices, ids, labels, preds, meta] = await Promise.all([this.indices(), this.model.ids(runName),
        this.model.labels(runName), predStep === null ? null : this.model.predictions(runName, predStep),
        this.model.metadataOf(run)]);
      exportCsv(run, layer, indices, { ids, labels, preds, meta });
    } catch (e) {
      this.on.error(e);
    }
  }
}
