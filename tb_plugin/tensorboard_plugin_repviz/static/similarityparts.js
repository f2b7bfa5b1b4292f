// The Similarity view's parts that need no view state: which snapshots a layers × layers heatmap can be drawn at,
// the layer identification test across two runs, and the small scatter of each representation of a hovered cell.
import { pointColors } from "./colors.js";
import { fitCanvas } from "./overlay.js";

/** Sorted snapshots that every layer of every run in `runs` stored (where the server draws a heatmap). @returns {number[]} */
export function sharedSteps(runs) {
  const layers = runs.flatMap((r) => r.layers.map((l) => new Set(l.steps)));
  if (!layers.length) return [];
  return [...layers[0]].filter((s) => layers.every((set) => set.has(s))).sort((a, b) => a - b);
}

/**
 * Kornblith et al. (2019)'s test across two runs: in how many rows whose layer the columns also hold is that layer
 * the most alike column (the highest similarity, the lowest distance). Null for one run, or no shared layer.
 * @returns {?{hits: number, rows: number}}
 */
export function identification(matrix) {
  if (matrix.rows[0][0] === matrix.cols[0][0]) return null;
  const cols = matrix.cols.map((k) => k[1]);
  const sign = matrix.higher_is_similar ? 1 : -1;
  let hits = 0;
  let rows = 0;
  matrix.rows.forEach(([, layer], i) => {
    if (!cols.includes(layer)) return;
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
