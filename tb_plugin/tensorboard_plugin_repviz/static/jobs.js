// The background jobs this page started (an embedding computed on demand, a meta-SNE map): asked for through the
// Model, polled while any is queued or running, cancelled on request, and remembered until dismissed when they
// fail. A finished job's own callback runs first, then the page's (which reads the index again).

const POLL_MS = 1000;

/** What a job computes, in a note. */
function describe(job) {
  return job.kind === "meta" ? "meta-SNE map" : `${job.method} of ${job.layer}`;
}

/**
 * @typedef {import("./model.js").Job} Job
 * @typedef {{onChange: function(): void, onFinished: function(): Promise<void>, onError: function(Error): void}} JobEvents
 *   `onChange`: the list or a job's progress changed; `onFinished`: at least one job finished (the index has news);
 *   `onError`: the job list could not be read
 */

/** The page's background jobs, polled while any runs. */
export class Jobs {
  /** @param {import("./model.js").Model} model @param {JobEvents} events */
  constructor(model, events) {
    this.model = model;
    this.events = events;
    this._jobs = new Map(); // id -> {job, onDone}
    /** @type {Job[]} the jobs' current states, a new array at every change (views compare it by identity) */
    this.list = [];
    /** @type {string[]} one-line remarks of finished jobs (e.g. snapshots skipped) */
    this.notes = [];
    this._timer = 0;
  }

  /**
   * Track the job that `start()` asks the server for, described by `describe` until it answers (or as failed);
   * `onDone(job)` runs once it has finished, before `onFinished`.
   * @param {function(): Promise<Job>} start @param {object} describe @param {function(Job): void} [onDone]
   */
  async start(start, describe, onDone = () => {}) {
    try {
      const job = await start();
      this._jobs.set(job.id, { job: { ...describe, ...job }, onDone });
    } catch (e) {
      this._jobs.set(`local-${JSON.stringify(describe)}`, { job: { id: "", ...describe, state: "failed", error: e.message }, onDone });
    }
    this._changed();
    this.poll();
  }

  /** Forget the jobs for which `test(job)` holds (e.g. a failed one that is asked for again). */
  forget(test) {
    for (const [id, { job }] of this._jobs) if (test(job)) this._jobs.delete(id);
    this._changed();
  }

  /** [id, job] of every tracked job, for the status bar. @returns {Array<[string, Job]>} */
  entries() {
    return [...this._jobs].map(([id, { job }]) => [id, job]);
  }

  dismiss(id) {
    this._jobs.delete(id);
    this._changed();
  }

  /** Cancel job `id` on the server and stop tracking it; a failure is reported through `onError`. */
  async cancel(id) {
    try {
      await this.model.cancel(id);
      this.dismiss(id);
    } catch (e) {
      this.events.onError(e);
    }
  }

  dismissNote(i) {
    this.notes.splice(i, 1);
    this.events.onChange();
  }

  async poll() {
    clearTimeout(this._timer);
    const active = () => this.list.some((j) => j.state === "queued" || j.state === "running");
    if (!active()) return;
    try {
      let finished = false;
      for (const job of await this.model.jobs()) {
        const mine = this._jobs.get(job.id);
        if (!mine) continue;
        const before = mine.job;
        mine.job = { ...before, ...job };
        if (job.state === "cancelled") { // by another tab that had asked for it too, or from a script
          this._jobs.delete(job.id);
          this.notes.push(`${describe(job)}: cancelled`);
        } else if (job.state === "done" && before.state !== "done") {
          finished = true;
          mine.onDone(mine.job);
          this._jobs.delete(job.id);
          if (job.error) this.notes.push(`${describe(job)}: ${job.error}`);
        }
      }
      this.list = this._current();
      if (finished) await this.events.onFinished(); // the views see the new index and the job gone together
      this.events.onChange();
    } catch (e) {
      this.events.onError(e);
    }
    if (active()) this._timer = setTimeout(() => this.poll(), POLL_MS);
  }

  _current() {
    return [...this._jobs.values()].map(({ job }) => job);
  }

  _changed() {
    this.list = this._current();
    this.events.onChange();
  }
}
