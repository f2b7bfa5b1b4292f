// Every request of the Repviz tab goes through this module: relative URLs against the iframe's
// <base href="plugin/repviz/">, binary arrays decoded once and cached, the run index polled with its ETag.
// A failed request throws a RepvizError carrying the server's one-line message; callers show it, and never
// read a failure as "nothing there".

/**
 * @typedef {{name: string, class: string, stored_shape: number[], output_shape: (number|null)[],
 *            reduction: object, steps: number[]}} Layer
 * @typedef {{key: string, method: string, params: object, align: string, default: boolean,
 *            steps: Object<string, number[]>}} Embedding
 * @typedef {{name: string, n_probe: number, step_unit: string, has_labels: boolean, n_classes: number,
 *            class_names: string[]|null, has_thumbnails: boolean, thumbnail_shape: number[]|null,
 *            probe_group: string, prediction_steps: number[], layers: Layer[], embeddings: Embedding[]}} Run
 * @typedef {{runs: Run[], methods: string[], meta: string[]}} Index
 * @typedef {{id: string, run: string, layer: string, method: string, state: string,
 *            progress: ?{stage: string, done: number, total: number, fraction: ?number, message: string},
 *            error: ?string, key: ?string}} Job
 */

/** A request that failed, with the server's message (or the network's). */
export class RepvizError extends Error {
  /** @param {string} message @param {number} status */
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

const THUMBNAIL_BLOCK = 256; // thumbnails per request: a hover fetches its neighbours too
const POLL_MS = 3000;

/** URL of `route` with query parameters, relative to the plugin base. */
function url(route, params = {}) {
  const query = new URLSearchParams(params).toString();
  return query ? `${route}?${query}` : route;
}

/** Fetch and throw a RepvizError unless the response is 2xx (or 304 when allowed). */
async function request(route, params, init = {}) {
  let response;
  try {
    response = await fetch(url(route, params), { credentials: "same-origin", ...init });
  } catch (e) {
    throw new RepvizError(`cannot reach the TensorBoard server (${e.message})`, 0);
  }
  if (response.ok || response.status === 304) return response;
  let message = `${route}: HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) message = body.error;
  } catch {
    // not JSON: keep the status line
  }
  throw new RepvizError(message, response.status);
}

/** The shape the server sends with a binary array, e.g. "1000,2" -> [1000, 2]. */
function shapeOf(response) {
  const header = response.headers.get("X-Repviz-Shape") || "";
  return header.split(",").filter(Boolean).map(Number);
}

/** Data access for the page: one instance per page. */
export class Model {
  constructor() {
    /** @type {?Index} */
    this.index = null;
    this._etag = null;
    this._cache = new Map(); // url -> Promise of the decoded value
    this._thumbs = new Map(); // run -> Map(block start -> Promise<{shape, pixels}>)
    this._pollTimer = null;
  }

  /** Read the run index now (always, or only if changed when `ifChanged`). Returns whether it changed. */
  async loadRuns(ifChanged = false) {
    const headers = ifChanged && this._etag ? { "If-None-Match": this._etag } : {};
    const response = await request("runs", {}, { headers, cache: "no-cache" });
    if (response.status === 304) return false;
    this._etag = response.headers.get("ETag");
    this.index = await response.json();
    return true;
  }

  /**
   * Poll the run index every few seconds; `onChange(index)` runs when it changed, `onError(error)` when a poll
   * failed (polling goes on).
   */
  startPolling(onChange, onError) {
    this.stopPolling();
    const tick = async () => {
      try {
        if (await this.loadRuns(true)) onChange(this.index);
      } catch (e) {
        onError(e);
      }
      this._pollTimer = setTimeout(tick, POLL_MS);
    };
    this._pollTimer = setTimeout(tick, POLL_MS);
  }

  stopPolling() {
    clearTimeout(this._pollTimer);
    this._pollTimer = null;
  }

  /** Cached binary GET decoded by `Type`; a failure is not cached, so the next attempt asks again. */
  _array(route, params, Type) {
    const key = url(route, params);
    if (!this._cache.has(key)) {
      const promise = request(route, params).then(async (response) => ({
        shape: shapeOf(response),
        data: new Type(await response.arrayBuffer()),
      }));
      promise.catch(() => this._cache.delete(key));
      this._cache.set(key, promise);
    }
    return this._cache.get(key);
  }

  /** Embedding coordinates, n×2 row-major. @returns {Promise<Float32Array>} */
  async coords(run, layer, step, key) {
    return (await this._array("coords", { run, layer, step, key }, Float32Array)).data;
  }

  /** Class code per probe point (-1: none). @returns {Promise<Int32Array>} */
  async labels(run) {
    return (await this._array("labels", { run }, Int32Array)).data;
  }

  /** Probe ids (stable across runs of one probe group). @returns {Promise<Float64Array>} */
  async ids(run) {
    return (await this._array("ids", { run }, Float64Array)).data;
  }

  /** Predicted class and confidence per point at `step`. @returns {Promise<{cls: Float32Array, conf: Float32Array}>} */
  async predictions(run, step) {
    const { data } = await this._array("predictions", { run, step }, Float32Array);
    const n = data.length / 2;
    return { cls: data.subarray(0, n), conf: data.subarray(n) };
  }

  /** Representation, record and embedding details for the info line. */
  async info(run, layer, step, key) {
    const key_ = url("info", { run, layer, step, key });
    if (!this._cache.has(key_)) {
      const promise = request("info", { run, layer, step, key }).then((r) => r.json());
      promise.catch(() => this._cache.delete(key_));
      this._cache.set(key_, promise);
    }
    return this._cache.get(key_);
  }

  /**
   * The thumbnail of point `index`: {shape: [h, w(, c)], pixels: Uint8Array}. Blocks of neighbours are fetched
   * once and kept.
   */
  async thumbnail(run, index) {
    if (!this._thumbs.has(run)) this._thumbs.set(run, new Map());
    const blocks = this._thumbs.get(run);
    const start = Math.floor(index / THUMBNAIL_BLOCK) * THUMBNAIL_BLOCK;
    if (!blocks.has(start)) {
      const promise = request("thumbnails", { run, start, count: THUMBNAIL_BLOCK }).then(async (response) => ({
        shape: shapeOf(response),
        data: new Uint8Array(await response.arrayBuffer()),
      }));
      promise.catch(() => blocks.delete(start));
      blocks.set(start, promise);
    }
    const { shape, data } = await blocks.get(start);
    const size = shape.slice(1).reduce((a, b) => a * b, 1);
    const offset = (index - start) * size;
    if (index - start >= shape[0]) throw new RepvizError(`no thumbnail for point ${index}`, 404);
    return { shape: shape.slice(1), pixels: data.subarray(offset, offset + size) };
  }

  /** Start (or join) the background computation of `method` for one layer. @returns {Promise<Job>} */
  async compute(run, layer, method) {
    const response = await request("compute", {}, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ run, layer, method }),
    });
    return (await response.json()).job;
  }

  /** Recent background jobs. @returns {Promise<Job[]>} */
  async jobs() {
    const response = await request("jobs", {}, { cache: "no-cache" });
    return (await response.json()).jobs;
  }
}
