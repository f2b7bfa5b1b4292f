// Probe points and the rows of a snapshot. A snapshot (and its embedding) may hold a subset of its run's probe:
// row i of its coordinates is probe point rows[i] (the rows route). The page keys hover, selection, trails and the
// comparing views by probe point: this module gathers probe-ordered arrays (ids, labels, predictions, metadata)
// into a snapshot's row order, finds the row of a probe point, builds the two frames of an animation between
// snapshots of different subsets, and draws the seeded sample a grid cell shows above CELL_MAX_POINTS.

/** Above this many points a cell of the Grid or Runs view draws a seeded sample of this many (plus the selection). */
export const CELL_MAX_POINTS = 20000;
/** The seed of the cells' sample: the same probe points in every cell that holds them. */
export const SAMPLE_SEED = 0;

const GATHERED = new WeakMap(); // rows -> WeakMap(probe-ordered array -> gathered copy)

/** Whether `rows` are every probe point of a probe of `nProbe` (positions increase: the length tells). */
export function isWhole(rows, nProbe) {
  return rows.length === nProbe;
}

/** `values` (probe order, typed array or array) at `rows`; the same array when the rows are the whole probe. */
export function gather(values, rows) {
  if (rows.length === values.length) return values;
  if (!GATHERED.has(rows)) GATHERED.set(rows, new WeakMap());
  const cache = GATHERED.get(rows);
  if (!cache.has(values)) {
    const out = new values.constructor(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = values[rows[i]];
    cache.set(values, out);
  }
  return cache.get(values);
}

/**
 * Probe-ordered data (ids, labels, predictions, metadata columns) in the row order of a snapshot.
 * @param {{ids: Float64Array, labels: Int32Array, preds: ?{cls: Float32Array, conf: Float32Array},
 *          metadata: ?{columns: {values: Array}[]}}} data
 * @param {Int32Array} rows
 */
export function forRows(data, rows) {
  const { ids, labels, preds, metadata } = data;
  return {
    ids: gather(ids, rows),
    labels: gather(labels, rows),
    preds: preds && { cls: gather(preds.cls, rows), conf: gather(preds.conf, rows) },
    metadata: metadata && { ...metadata, columns: metadata.columns.map((c) => ({ ...c, values: gather(c.values, rows) })) },
  };
}

/** Map from probe id to its index in `ids`. @returns {Map<number, number>} */
export function idIndex(ids) {
  const out = new Map();
  for (let i = 0; i < ids.length; i++) out.set(ids[i], i);
  return out;
}

/** Whether two snapshots hold the same probe points. */
export function sameRows(a, b) {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The row holding probe point `point` in increasing `rows` (-1: none). */
export function rowOf(rows, point) {
  let lo = 0;
  let hi = rows.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (rows[mid] < point) lo = mid + 1;
    else if (rows[mid] > point) hi = mid - 1;
    else return mid;
  }
  return -1;
}

/**
 * The frames of an animation between two drawings of different probe subsets, over the union of their points.
 * Each drawing: {rows, x, y, z} with z a category; a frame holds
 * x, y, z and w = 1 for a point shown, 0 for one faded out (or not yet in): points in both move, the others stay
 * where they are and fade. `points`: the probe points of the frames' rows.
 * @returns {{points: Int32Array, start: {x, y, z, w}, end: {x, y, z, w}}}
 */
export function crossFrames(from, to) {
  const a = from.rows;
  const b = to.rows;
  const points = [];
  const ia = [];
  const ib = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const pa = i < a.length ? a[i] : Infinity;
    const pb = j < b.length ? b[j] : Infinity;
    const p = Math.min(pa, pb);
    const inA = pa === p;
    const inB = pb === p;
    points.push(p);
    ia.push(inA ? i : -1);
    ib.push(inB ? j : -1);
    if (inA) i++;
    if (inB) j++;
  }
  const n = points.length;
  const frame = () => ({ x: new Float32Array(n), y: new Float32Array(n), z: new Float32Array(n), w: new Float32Array(n) });
  const start = frame();
  const end = frame();
  for (let k = 0; k < n; k++) {
    const [ra, rb] = [ia[k], ib[k]];
    const [sx, sy] = ra >= 0 ? [from.x[ra], from.y[ra]] : [to.x[rb], to.y[rb]];
    const [ex, ey] = rb >= 0 ? [to.x[rb], to.y[rb]] : [sx, sy];
    const z = rb >= 0 ? to.z[rb] : from.z[ra];
    start.x[k] = sx;
    start.y[k] = sy;
    end.x[k] = ex;
    end.y[k] = ey;
    start.z[k] = z;
    end.z[k] = z;
    start.w[k] = ra >= 0 ? 1 : 0;
    end.w[k] = rb >= 0 ? 1 : 0;
  }
  return { points: Int32Array.from(points), start, end };
}

const RANKS = new Map(); // probe size -> rank of each probe point in a seeded shuffle

/** A seeded random order of `n` probe points: rank[p] (mulberry32 Fisher–Yates, seed SAMPLE_SEED). */
function ranks(n) {
  if (!RANKS.has(n)) {
    let state = SAMPLE_SEED >>> 0;
    const random = () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const order = new Uint32Array(n);
    for (let i = 0; i < n; i++) order[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    const rank = new Uint32Array(n);
    for (let i = 0; i < n; i++) rank[order[i]] = i;
    RANKS.set(n, rank);
  }
  return RANKS.get(n);
}

/**
 * The rows a cell draws: all of them up to `max`, else the `max` whose probe points come first in a seeded order
 * of the probe (so cells holding the same points draw the same sample), plus the rows of `extra` probe ids
 * (the selection: drawn even when not in the sample). Increasing row numbers.
 * @param {Int32Array} rows probe points of the cell's rows @param {number} nProbe
 * @param {Float64Array} ids probe ids of the cell's rows @param {Iterable<number>} extra probe ids
 * @returns {?Int32Array} null when every row is drawn
 */
export function sampleRows(rows, nProbe, ids, extra, max = CELL_MAX_POINTS) {
  if (rows.length <= max) return null;
  const rank = ranks(nProbe);
  let cut = max; // the max-th smallest rank among the rows
  if (rows.length !== nProbe) {
    const held = new Uint32Array(rows.length);
    for (let i = 0; i < rows.length; i++) held[i] = rank[rows[i]];
    held.sort();
    cut = held[max];
  }
  const wanted = new Set(extra);
  const out = [];
  for (let i = 0; i < rows.length; i++) if (rank[rows[i]] < cut || (wanted.size && wanted.has(ids[i]))) out.push(i);
  return Int32Array.from(out);
}
