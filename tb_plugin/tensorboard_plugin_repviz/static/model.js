// Every request of the Repviz tab goes through this module: relative URLs against the iframe's
// <base href="plugin/repviz/">, binary arrays decoded once and cached, the run index polled with its ETag.
// A failed request throws a RepvizError carrying the server's one-line message; callers show it, and never
// read a failure as "nothing there". How a request travels is the Model's transport: fetch in the tab; the
// notebook widget and a static export hand in their own (same routes, same Response objects).

/**
 * @typedef {{name: string, class: string, stored_shape: number[], output_shape: (number|null)[],
 *            reduction: object, steps: number[]}} Layer
 * @typedef {{key: string, method: string, params: object, align: string, default: boolean,
 *            steps: Object<string, number[]>}} Embedding
 * @typedef {{name: string, n_probe: number, step_unit: string, has_labels: boolean, n_classes: number,
 *            class_names: string[]|null, has_thumbnails: boolean, thumbnail_shape: number[]|null,
 *            probe_group: string, prediction_steps: number[], layers: Layer[], embeddings: Embedding[],
 *            metadata: {name: string, kind: string, distinct: number}[], metadata_error: ?string,
 *            placed_into: string[]}} Run  placed_into: runs whose layouts its points are placed into
 * @typedef {{name: string, align: string, supervised: boolean, defaults: Object<string, *>}} MethodChoice
 * @typedef {{methods: MethodChoice[], meta: Object<string, string[]>}} Choices  what the server offers, default
 *   first: embedding methods, and the options of a meta-SNE map (transform, metric, embedding)
 * @typedef {{runs: Run[], methods: string[], meta: string[], choices: Choices}} Index
 * @typedef {{id: string, run: string, layer: string, method: string, state: string,
 *            progress: ?{stage: string, done: number, total: number, fraction: ?number, message: string},
 *            error: ?string, key: ?string, ahead: ?number, elapsed: ?number, limit: ?number}} Job  state: queued,
 *   running, done, failed or cancelled; ahead: jobs running or starting before a queued one; elapsed: seconds a
 *   running one has run, of at most limit
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
const TRAIL_CACHE = 16;

/** URL of `route` with query parameters, relative to the plugin base. */
function url(route, params = {}) {
  const query = new URLSearchParams(params).toString();
  return query ? `${route}?${query}` : route;
}

/**
 * How the page's requests travel: `send(route, params, init)` answers a Promise of a Response (status, headers,
 * body as the plugin's HTTP route would send them); `unreachable` names what a failed send could not reach.
 * @typedef {{send: (route: string, params: Object<string, *>, init: RequestInit) => Promise<Response>,
 *            unreachable: string}} Transport
 */

/** The tab's transport: fetch, relative to the plugin's base URL. @type {Transport} */
export const FETCH = {
  send: (route, params, init) => fetch(url(route, params), { credentials: "same-origin", ...init }),
  unreachable: "the TensorBoard server",
};

/** Send through `transport` and throw a RepvizError unless the response is 2xx (or 304 when allowed). */
async function request(transport, route, params, init = {}) {
  let response;
  try {
    response = await transport.send(route, params, init);
  } catch (e) {
    throw new RepvizError(`cannot reach ${transport.unreachable} (${e.message})`, 0);
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

const WHOLE = new Map(); // probe size -> the rows of a snapshot of the whole probe (0, 1, ..., n - 1)

/** The rows of a snapshot that holds every one of `n` probe points (one shared array per size). */
function wholeProbe(n) {
  if (!WHOLE.has(n)) WHOLE.set(n, Int32Array.from({ length: n }, (_, i) => i));
  return WHOLE.get(n);
}

/** An id of this page load, sent with every job it asks for: the server's queue takes turns between tabs. */
function clientId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12)); // randomUUID needs a secure context; this does not
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Data access for the page: one instance per page. */
export class Model {
  /** @param {Transport} transport */
  constructor(transport = FETCH) {
    this.transport = transport;
    this.client = clientId();
    /** @type {?Index} */
    this.index = null;
    this._etag = null;
    this._cache = new Map(); // url -> Promise of the decoded value
    this._thumbs = new Map(); // run -> Map(block start -> Promise<{shape, pixels}>)
    this._trails = new Map(); // the last few trail requests (selections change often: bounded)
    this._pollTimer = null;
  }

  /** `request` through this page's transport. */
  _request(route, params, init) {
    return request(this.transport, route, params, init);
  }

  /** Read the run index now (always, or only if changed when `ifChanged`). Returns whether it changed. */
  async loadRuns(ifChanged = false) {
    const headers = ifChanged && this._etag ? { "If-None-Match": this._etag } : {};
    const response = await this._request("runs", {}, { headers, cache: "no-cache" });
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
      const promise = this._request(route, params).then(async (response) => ({
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

  /**
   * The probe point of each of the `nRows` rows of (run, layer, step) in a probe of `nProbe` points (increasing
   * positions): asked of the server only when the snapshot holds a subset of the probe (fewer rows than points).
   * @returns {Promise<Int32Array>}
   */
  async rows(run, layer, step, nRows, nProbe) {
    if (nRows === nProbe) return wholeProbe(nProbe);
    return (await this._array("rows", { run, layer, step }, Int32Array)).data;
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

  /**
   * The probe's metadata columns of `run`, values in probe order (a missing number: null).
   * @returns {Promise<{n: number, columns: {name: string, kind: "category"|"text"|"number", distinct: number,
   *   values: (string|number|boolean|null)[]}[]}>}
   */
  metadata(run) {
    return this._json("metadata", { run });
  }

  /** The metadata columns of `run` (an entry of the index): null when it has none. */
  metadataOf(run) {
    return (run.metadata || []).length ? this.metadata(run.name) : Promise.resolve(null);
  }

  /** Representation, record and embedding details for the info line. */
  info(run, layer, step, key) {
    return this._json("info", { run, layer, step, key });
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
      const promise = this._request("thumbnails", { run, start, count: THUMBNAIL_BLOCK }).then(async (response) => ({
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
    return (await (await this._post("compute", { run, layer, method })).json()).job;
  }

  /** Cached JSON GET; a failure is not cached. */
  _json(route, params) {
    const key = url(route, params);
    if (!this._cache.has(key)) {
      const promise = this._request(route, params).then((r) => r.json());
      promise.catch(() => this._cache.delete(key));
      this._cache.set(key, promise);
    }
    return this._cache.get(key);
  }

  /** POST a JSON body; the decoded response. */
  _post(route, body) {
    return this._request(route, {}, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Repviz-Client": this.client },
      body: JSON.stringify(body),
    });
  }

  /**
   * The k nearest neighbours of probe point `index` in the original activation space of (run, layer, step), as
   * probe points (of the snapshot's subset, if it holds one).
   * @returns {Promise<{index: number, k: number, neighbors: number[], distances: number[]}>}
   */
  knn(run, layer, step, index, k = 10) {
    return this._json("knn", { run, layer, step, index, k });
  }

  /**
   * Per row of `a`, 1 - Jaccard overlap of its k-NN sets in two representations (NaN for a point `b`, a snapshot
   * of another probe subset, does not hold).
   * @returns {Promise<Float32Array>}
   */
  async neighborhoodChange(a, b, k = 10) {
    const params = { run: a.run, layer: a.layer, step: a.step, run2: b.run, layer2: b.layer, step2: b.step, k };
    return (await this._array("neighborhood_change", params, Float32Array)).data;
  }

  /**
   * 2-D coordinates of probe points `indices` at every stored step of (run, layer) in embedding `key` (NaN at a
   * step whose snapshot does not hold the point).
   * @returns {Promise<{steps: number[], m: number, coords: Float32Array}>} coords (n_steps, m, 2) row-major
   */
  async trails(run, layer, key, indices) {
    const key_ = `${run}|${layer}|${key}|${indices.join(",")}`;
    if (!this._trails.has(key_)) {
      const promise = this._post("trails", { run, layer, key, indices }).then(async (response) => ({
        steps: (response.headers.get("X-Repviz-Steps") || "").split(",").filter(Boolean).map(Number),
        m: indices.length,
        coords: new Float32Array(await response.arrayBuffer()),
      }));
      promise.catch(() => this._trails.delete(key_));
      this._trails.set(key_, promise);
      if (this._trails.size > TRAIL_CACHE) this._trails.delete(this._trails.keys().next().value);
    }
    return this._trails.get(key_);
  }

  /**
   * Density contours of a 2-D layout (coords route coordinates), overall or per class.
   * @returns {Promise<{levels: number[], contours: {class: ?number, level: number, paths: number[][]}[]}>}
   */
  density(run, layer, step, key, by = "all", levels = 4) {
    return this._json("density", { run, layer, step, key, by, levels });
  }

  /**
   * Points of other runs placed into the layout `key` of (run, layer, step) (`repviz place`); not cached: a run
   * placed while the tab is open shows at the next drawing.
   * @returns {Promise<{placed: {run: string, n: number, coords: number[], rows: number[], labels: number[],
   *   stale: boolean, scores: object}[]}>}
   */
  async placed(run, layer, step, key) {
    return (await this._request("placed", { run, layer, step, key })).json();
  }

  /**
   * A stored meta-SNE map: keys, coordinates, parameters, figures, and per row its depth and landmark flag.
   * @returns {Promise<{keys: Array, coords: number[][], params: object, explained_variance: ?number,
   *   robustness: ?number, rows: ?{run: string, layer: string, step: number, depth: number, n_layers: number,
   *   landmark: boolean}[]}>}
   */
  metaResult(name) {
    return this._json("meta_result", { name });
  }

  /**
   * Start (or join) the background computation of a meta-SNE map with `options` (a value per field of the index's
   * `choices.meta`). @returns {Promise<Job>}
   */
  async computeMeta(options) {
    return (await (await this._post("compute_meta", options)).json()).job;
  }

  /**
   * The stored similarity heatmap that `query` names ({mode, run, run2 | layer, step, measure, kernel, debiased}):
   * values (rows × cols), rows and cols as [run, layer, step], measure, params, notes, scale_title and
   * higher_is_similar. One not computed yet fails with status 404.
   */
  similarity(query) {
    return this._json("similarity", query);
  }

  /** Start (or join) the background computation of the heatmaps `body` names (every snapshot). @returns {Promise<Job>} */
  async computeSimilarity(body) {
    return (await (await this._post("compute_similarity", body)).json()).job;
  }

  /** Cancel job `id` for this page (a job another tab asked for too goes on for it). @returns {Promise<Job>} */
  async cancel(id) {
    return (await (await this._post("cancel", { id })).json()).job;
  }

  /** Recent background jobs. @returns {Promise<Job[]>} */
  async jobs() {
    const response = await this._request("jobs", {}, { cache: "no-cache" });
    return (await response.json()).jobs;
  }
}
