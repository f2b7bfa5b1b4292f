// The Similarity view's parts that need no view state: which snapshots a layers × layers heatmap can be drawn at,
// the layer identification test across two runs, the representations a matrix leaves out (its holes) and the
// matrix without the layers the user hid, a matrix's labels and titles as the heatmap draws them, and the small
// scatter of each representation of a hovered cell.
import { pointColors } from "./colors.js";
import { fitCanvas } from "./overlay.js";

/** Sorted snapshots that every layer of every run in `runs` stored (where the server draws a heatmap). @returns {number[]} */
export function sharedSteps(runs) {
  const layers = runs.flatMap((r) => r.layers.map((l) => new Set(l.steps)));
  if (!layers.length) return [];
  return [...layers[0]].filter((s) => layers.every((set) => set.has(s))).sort((a, b) => a - b);
}

/** What a row or column of `matrix` is called in the list of layers to show: its layer (mode "layers") or its
 * step (mode "steps"), so that hiding one hides it as a row and as a column, at every snapshot. */
export function labelOf(mode, key) {
  return mode === "layers" ? key[1] : String(key[2]);
}

/**
 * `matrix` without the rows and columns whose label (labelOf) is in `hidden`; the same object when none is.
 * @param {Set<string>} hidden
 */
export function withoutHidden(matrix, mode, hidden) {
  const keep = (keys) => keys.map((k, i) => (hidden.has(labelOf(mode, k)) ? -1 : i)).filter((i) => i >= 0);
  const rows = keep(matrix.rows);
  const cols = keep(matrix.cols);
  if (rows.length === matrix.rows.length && cols.length === matrix.cols.length) return matrix;
  return { ...matrix, rows: rows.map((i) => matrix.rows[i]), cols: cols.map((j) => matrix.cols[j]),
    values: rows.map((i) => cols.map((j) => matrix.values[i][j])) };
}

/**
 * Why each cell of `matrix` is empty (its row's or its column's representation is left out: constant over the
 * probe, as a dead layer is, or unreadable), or null: the server's `left_out` as one reason per cell.
 * @returns {(?string)[][]}
 */
export function holeReasons(matrix) {
  const why = new Map((matrix.left_out || []).map((h) => [h.key.join("\u0000"), h.reason]));
  const reason = (key) => {
    const r = why.get(key.join("\u0000"));
    return r === undefined ? null : `${key[1]} (${key[0]}, step ${key[2]}) is left out: ${r}`;
  };
  const rows = matrix.rows.map(reason);
  const cols = matrix.cols.map(reason);
  return rows.map((r) => cols.map((c) => r || c));
}

/**
 * The heatmap's labels and titles for `matrix` (rows and columns [run, layer, step]) in `mode`, snapshots counted
 * in `unit`; null when every row or every column is hidden.
 */
export function heatmapLabels(matrix, mode, unit) {
  if (!matrix.rows.length || !matrix.cols.length) return null;
  const byLayer = mode === "layers";
  const label = (key) => (byLayer ? key[1] : `${unit} ${key[2]}`);
  const axis = (keys) => (byLayer ? `run ${keys[0][0]} · layers (${unit} ${keys[0][2]})` : `${keys[0][1]} of run ${keys[0][0]} · ${unit}s`);
  return { values: matrix.values, rows: matrix.rows.map(label), cols: matrix.cols.map(label), holes: holeReasons(matrix),
    rowTitle: axis(matrix.rows), colTitle: axis(matrix.cols),
    scaleTitle: `${matrix.scale_title} (${matrix.higher_is_similar ? "higher" : "lower"}: more alike)` };
}

/**
 * Kornblith et al. (2019)'s test across two runs: in how many rows whose layer the columns also hold is that layer
 * the most alike column (the highest similarity, the lowest distance); rows whose layer is a hole are left out.
 * Null for one run, or no shared layer.
 * @returns {?{hits: number, rows: number}}
 */
export function identification(matrix) {
  if (matrix.rows[0][0] === matrix.cols[0][0]) return null;
  const cols = matrix.cols.map((k) => k[1]);
  const sign = matrix.higher_is_similar ? 1 : -1;
  let hits = 0;
  let rows = 0;
  matrix.rows.forEach(([, layer], i) => {
    if (!cols.includes(layer) || matrix.values[i][cols.indexOf(layer)] === null) return; // absent, or a hole
    rows += 1;
    let best = 0;
    matrix.values[i].forEach((v, j) => {
      if (v !== null && (matrix.values[i][best] === null || sign * v > sign * matrix.values[i][best])) best = j;
    });
    if (cols[best] === layer) hits += 1;
  });
  return rows ? { hits, rows } : null;
}

/**
 * A small scatter of `data` (a representation's points from cellData) on a 2-D canvas: unselected points faded
 * while a selection exists, the hovered probe ringed. Returns the points' canvas positions for hit tests.
 * @param {Set<number>} selectedIds @param {?number} hoverId probe id
 */
export function drawPair(canvas, data, selectedIds, hoverId) {
  const ctx = fitCanvas(canvas);
  const size = Math.min(canvas.clientWidth, canvas.clientHeight);
  const half = size / 2 - 4;
  const cx = canvas.clientWidth / 2;
  const cy = canvas.clientHeight / 2;
  const colors = pointColors(data);
  const n = data.x.length;
  const px = new Float32Array(n);
  const py = new Float32Array(n);
  const selecting = selectedIds.size > 0;
  const dot = n > 3000 ? 2 : 3;
  for (const pass of selecting ? [false, true] : [true]) {
    ctx.globalAlpha = pass ? 0.9 : 0.18;
    for (let i = 0; i < n; i++) {
      if (selecting && selectedIds.has(data.ids[i]) !== pass) continue;
      px[i] = cx + data.x[i] * half;
      py[i] = cy - data.y[i] * half;
      ctx.fillStyle = colors[i];
      ctx.fillRect(px[i] - dot / 2, py[i] - dot / 2, dot, dot);
    }
  }
  ctx.globalAlpha = 1;
  const i = hoverId === null ? undefined : data.idIndex.get(hoverId);
  if (i !== undefined) {
    ctx.strokeStyle = "#212121";
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.arc(px[i], py[i], 6, 0, 2 * Math.PI);
    ctx.stroke();
  }
  return { px, py };
}
