// The snapshot bar: a slider over the current representation's snapshots and play/pause, which steps through them
// every PLAY_MS. It owns the bar's element and the playing state; the page hands it the shared state and the
// callback that changes it.
import { runNamed, stepsOf } from "./choice.js";
import * as V from "./dom.js";

const PLAY_MS = 1300;

export class Playback {
  /**
   * @param {{page: function(): {state: import("./view.js").State, index: import("./model.js").Index},
   *          change: function(Partial<import("./view.js").State>): void}} on
   */
  constructor(on) {
    this.on = on;
    this.playing = false;
    this.el = V.snapshotBar((position) => this.seek(position), () => this.toggle());
  }

  /** The snapshots of the current representation, in order. */
  steps() {
    const { state, index } = this.on.page();
    return stepsOf(index, state);
  }

  seek(position) {
    const steps = this.steps();
    if (steps.length) this.on.change({ step: steps[position] });
  }

  toggle() {
    this.playing = !this.playing;
    clearInterval(this.timer);
    if (this.playing) {
      const steps = this.steps();
      if (steps.indexOf(this.on.page().state.step) === steps.length - 1) this.on.change({ step: steps[0] });
      this.timer = setInterval(() => {
        const all = this.steps();
        const next = all.indexOf(this.on.page().state.step) + 1;
        if (next >= all.length) this.toggle();
        else this.on.change({ step: all[next] });
      }, PLAY_MS);
    }
    this.render();
  }

  /** Show the current snapshot, its position among the others and the run's fits. */
  render() {
    const { state, index } = this.on.page();
    const steps = stepsOf(index, state);
    const run = runNamed(index, state.run);
    const unit = (run && run.step_unit) || "step";
    V.setSnapshotBar(this.el, steps, Math.max(steps.indexOf(state.step), 0), unit, this.playing, run && run.fits);
  }
}
