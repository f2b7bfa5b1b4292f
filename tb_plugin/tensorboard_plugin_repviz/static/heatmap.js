// A labelled heatmap on a 2-D canvas: one cell per (row, column) value coloured on viridis, row labels on the left,
// column labels below, a colour bar with its ticks and title on the right, values written in the cells when they
// are large enough to read, the hovered cell outlined, holes (a representation left out) grey and hatched with
// their reason as the hover's tooltip. Changing to values of the same shape can be animated.
// Hover and click report the cell under the mouse; similarityview.js decides what they mean.
import { prefersReducedMotion, shown } from "./dom.js";
import { fitCanvas } from "./overlay.js";

// matplotlib's viridis at nine even stops (perceptually uniform, legible in grey, colour-blind safe)
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
  [53, 183, 121], [110, 206, 88], [253, 231, 37]];
const MISSING = "#e0e0e0";
const HATCH = "#9e9e9e";
const FONT = "Roboto, Arial, sans-serif";
const MAX_CELL = 96; // CSS pixels: a 2 × 2 matrix stays a compact picture
const ANNOTATE_CELL = 30; // cells at least this wide carry their value
const TWEEN_MS = 240;
const BAR = { gap: 18, width: 14, ticks: 44, title: 18 };
const LABEL_PX = 14; // labels closer than this are thinned to every k-th (the hovered one is always written)

/** [r, g, b] of viridis at t in [0, 1]. */
export function viridis(t) {
  const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
  const k = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - k;
  return VIRIDIS[k].map((a, j) => Math.round(a + f * (VIRIDIS[k + 1][j] - a)));
}

/**
 * The colour scale of `values`: [0, 1] when every finite value lies in it (CKA, similarities), else the values'
 * range, so one measure keeps one scale across snapshots where it can.
 * @param {number[][]} values @returns {{lo: number, hi: number}}
 */
export function scaleOf(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const row of values) {
    for (const v of row) {
      if (v === null || !Number.isFinite(v)) continue;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
  }
  if (!(lo <= hi) || (lo >= 0 && hi <= 1)) return { lo: 0, hi: 1 };
  return hi > lo ? { lo, hi } : { lo: lo - 0.5, hi: hi + 0.5 };
}

/** Diagonal lines over the cell at (x, y), `size` pixels wide: a hole, not a value. */
function hatch(ctx, x, y, size) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(x, y, size, size);
  ctx.clip();
  ctx.strokeStyle = HATCH;
  ctx.lineWidth = 1;
  ctx.beginPath();
  const step = Math.max(4, Math.min(8, size / 4));
  for (let d = -size; d < size; d += step) {
    ctx.moveTo(x + d, y + size);
    ctx.lineTo(x + d + size, y);
  }
  ctx.stroke();
  ctx.restore();
}

/** Up to about five round tick values in [lo, hi]. */
function ticks(lo, hi) {
  const raw = (hi - lo) / 4;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step) out.push(Number(v.toPrecision(6)));
  return out;
}

/** `label` as the page shows it (`shown`), cut with an ellipsis to `width` pixels in the context's font. */
function fitText(ctx, label, width) {
  const text = shown(label);
  if (ctx.measureText(text).width <= width) return text;
  let cut = text;
  while (cut.length > 1 && ctx.measureText(`${cut}…`).width > width) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/**
 * @typedef {{values: (?number)[][], rows: string[], cols: string[], rowTitle: string, colTitle: string,
 *            scaleTitle: string, holes?: (?string)[][]}} HeatmapData  values[i][j] of row i and column j (null:
 *   missing); row and column labels; the axes' and the colour bar's titles; why a cell is a hole (null: it is not)
 * @typedef {{i: number, j: number}} Cell
 */

/** A heatmap on a canvas, with hover and click by cell. */
export class Heatmap {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {{onHover: function(?Cell): void, onOpen: function(Cell): void}} handlers
   */
  constructor(canvas, handlers) {
    this.canvas = canvas;
    this.handlers = handlers;
    /** @type {?HeatmapData} */
    this.data = null;
    this.shown = null; // the values drawn (between two matrices while animating)
    this.hovered = null;
    this.marked = null; // a cell kept outlined when the mouse has left (the one whose details are shown)
    this.layout = null;
    this._frame = 0;
    canvas.addEventListener("mousemove", (e) => this._setHover(this.cellAt(e)));
    canvas.addEventListener("mouseleave", () => this._setHover(null));
    canvas.addEventListener("click", (e) => {
      const cell = this.cellAt(e);
      if (cell) handlers.onOpen(cell);
    });
  }

  /**
   * Show `data`; with `animate`, values of the same shape as those shown move to the new ones over a few frames.
   * @param {?HeatmapData} data @param {{animate?: boolean}} options
   */
  setData(data, { animate = false } = {}) {
    cancelAnimationFrame(this._frame);
    const from = this.shown;
    this.data = data;
    const fits = (cell) => cell && data && cell.i < data.rows.length && cell.j < data.cols.length;
    if (!fits(this.hovered)) this.hovered = null;
    if (!fits(this.marked)) this.marked = null;
    const sameShape = from && data && from.length === data.values.length &&
      from.every((row, i) => row.length === data.values[i].length);
    if (!animate || !sameShape || prefersReducedMotion()) {
      this.shown = data ? data.values : null;
      this.draw();
      return;
    }
    const started = performance.now();
    const tick = (now) => {
      const t = Math.min((now - started) / TWEEN_MS, 1);
      this.shown = data.values.map((row, i) => row.map((v, j) => {
        const a = from[i][j];
        return v === null || a === null || !Number.isFinite(a) ? v : a + (v - a) * t;
      }));
      this.draw();
      const stats = window.__repvizStats;
      stats.similarityTweenFrames = (stats.similarityTweenFrames || 0) + 1;
      if (t < 1) this._frame = requestAnimationFrame(tick);
    };
    this._frame = requestAnimationFrame(tick);
  }

  /** The cell under mouse event `e` (null: none). @returns {?Cell} */
  cellAt(e) {
    const L = this.layout;
    if (!L) return null;
    const box = this.canvas.getBoundingClientRect();
    const j = Math.floor((e.clientX - box.left - L.x) / L.cell);
    const i = Math.floor((e.clientY - box.top - L.y) / L.cell);
    return i >= 0 && j >= 0 && i < L.n && j < L.m ? { i, j } : null;
  }

  /** Canvas position [x, y] (CSS pixels) of the centre of cell (i, j) as last drawn. */
  centre(i, j) {
    const L = this.layout;
    return [L.x + (j + 0.5) * L.cell, L.y + (i + 0.5) * L.cell];
  }

  /** Draw at the canvas's current size; counts draws in window.__repvizStats.similarityDraws and leaves the
   * layout (grid origin and cell size, CSS pixels) in similarityLayout. */
  draw() {
    const ctx = fitCanvas(this.canvas);
    this.layout = null;
    if (!this.data || !this.shown) return;
    const width = this.canvas.clientWidth;
    const height = this.canvas.clientHeight;
    const { rows, cols, rowTitle, colTitle, scaleTitle } = this.data;
    const values = this.shown;
    const n = rows.length;
    const m = cols.length;
    const { lo, hi } = scaleOf(this.data.values);
    ctx.font = `bold 12px ${FONT}`; // labels are measured as the hovered row's and column's, in bold
    const labelWidth = Math.min(Math.max(...rows.map((r) => ctx.measureText(r).width), 0) + 10, width * 0.3);
    const colWidth = Math.min(Math.max(...cols.map((c) => ctx.measureText(c).width), 0) + 10, height * 0.3);
    const right = BAR.gap + BAR.width + BAR.ticks + BAR.title;
    const left = 22 + labelWidth; // the row title, rotated, then the labels
    const top = 12;
    // column labels: level when they fit their cell, else slanted (their height is then ~0.71 of their length)
    const spaceW = width - left - right - 8;
    let cell = Math.max(4, Math.min(MAX_CELL, spaceW / m, (height - top - 40 - colWidth * 0.71) / n));
    const level = cols.every((c) => ctx.measureText(c).width + 6 <= cell);
    const labelsHeight = level ? 18 : colWidth * 0.71 + 6;
    const bottom = 22 + labelsHeight;
    cell = Math.max(4, Math.min(MAX_CELL, spaceW / m, (height - top - bottom) / n));
    const x0 = left + Math.max(0, (spaceW - cell * m) / 2);
    const y0 = top + Math.max(0, (height - top - bottom - cell * n) / 2);
    this.layout = { x: x0, y: y0, cell, n, m };

    // cells and their values
    const annotate = cell >= ANNOTATE_CELL;
    let holes = 0;
    ctx.font = `${Math.min(13, Math.floor(cell / 3))}px ${FONT}`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        const v = values[i][j];
        const missing = v === null || !Number.isFinite(v);
        const rgb = missing ? null : viridis((v - lo) / (hi - lo));
        ctx.fillStyle = missing ? MISSING : `rgb(${rgb.join(",")})`;
        ctx.fillRect(x0 + j * cell, y0 + i * cell, cell + 0.5, cell + 0.5);
        if (missing && this.reason({ i, j })) {
          hatch(ctx, x0 + j * cell, y0 + i * cell, cell);
          holes += 1;
        }
        if (annotate && !missing) {
          const light = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 150;
          ctx.fillStyle = light ? "#212121" : "#ffffff";
          ctx.fillText(v.toFixed(2), x0 + (j + 0.5) * cell, y0 + (i + 0.5) * cell);
        }
      }
    }
    ctx.strokeStyle = "#9e9e9e";
    ctx.lineWidth = 1;
    ctx.strokeRect(x0, y0, cell * m, cell * n);

    // labels: the hovered row and column in bold
    const hov = this.hovered || this.marked;
    ctx.fillStyle = "#212121";
    ctx.textAlign = "right";
    const every = Math.ceil(LABEL_PX / cell);
    for (let i = 0; i < n; i++) {
      if (i % every && !(hov && hov.i === i)) continue;
      ctx.font = `${hov && hov.i === i ? "bold " : ""}12px ${FONT}`;
      ctx.fillText(fitText(ctx, rows[i], labelWidth - 8), x0 - 6, y0 + (i + 0.5) * cell);
    }
    for (let j = 0; j < m; j++) {
      if (j % every && !(hov && hov.j === j)) continue;
      ctx.font = `${hov && hov.j === j ? "bold " : ""}12px ${FONT}`;
      const text = fitText(ctx, cols[j], colWidth - 8);
      const x = x0 + (j + 0.5) * cell;
      if (level) {
        ctx.textAlign = "center";
        ctx.textBaseline = "top";
        ctx.fillText(text, x, y0 + n * cell + 5);
      } else {
        ctx.save();
        ctx.translate(x, y0 + n * cell + 6);
        ctx.rotate(-Math.PI / 4);
        ctx.textAlign = "right";
        ctx.textBaseline = "middle";
        ctx.fillText(text, 0, 0);
        ctx.restore();
      }
    }
    ctx.font = `500 12px ${FONT}`;
    ctx.fillStyle = "#616161";
    ctx.textAlign = "center";
    ctx.textBaseline = "bottom";
    ctx.fillText(fitText(ctx, colTitle, cell * m + 40), x0 + (cell * m) / 2, y0 + n * cell + labelsHeight + 20);
    ctx.save();
    ctx.translate(13, y0 + (cell * n) / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textBaseline = "middle";
    ctx.fillText(fitText(ctx, rowTitle, Math.max(cell * n, 60)), 0, 0);
    ctx.restore();

    if (hov) {
      ctx.strokeStyle = "#f57c00";
      ctx.lineWidth = 3;
      ctx.strokeRect(x0 + hov.j * cell + 1.5, y0 + hov.i * cell + 1.5, cell - 3, cell - 3);
    }
    this._colourBar(ctx, x0 + cell * m + BAR.gap, y0, Math.max(cell * n, 120), lo, hi, scaleTitle);
    const stats = window.__repvizStats;
    stats.similarityDraws = (stats.similarityDraws || 0) + 1;
    stats.similarityLayout = { ...this.layout };
    stats.similarityHoles = holes;
  }

  /** Why cell `cell` is a hole, or null. @param {?Cell} cell @returns {?string} */
  reason(cell) {
    const holes = this.data && this.data.holes;
    return (cell && holes && holes[cell.i] && holes[cell.i][cell.j]) || null;
  }

  /** The colour bar at (x, y), `h` pixels tall, with ticks and its title alongside. */
  _colourBar(ctx, x, y, h, lo, hi, title) {
    const gradient = ctx.createLinearGradient(0, y + h, 0, y);
    VIRIDIS.forEach((c, k) => gradient.addColorStop(k / (VIRIDIS.length - 1), `rgb(${c.join(",")})`));
    ctx.fillStyle = gradient;
    ctx.fillRect(x, y, BAR.width, h);
    ctx.strokeStyle = "#9e9e9e";
    ctx.lineWidth = 1;
    ctx.strokeRect(x, y, BAR.width, h);
    ctx.fillStyle = "#212121";
    ctx.font = `11px ${FONT}`;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    for (const v of ticks(lo, hi)) {
      const ty = y + h - ((v - lo) / (hi - lo)) * h;
      ctx.beginPath();
      ctx.moveTo(x + BAR.width, ty);
      ctx.lineTo(x + BAR.width + 4, ty);
      ctx.stroke();
      ctx.fillText(String(v), x + BAR.width + 6, ty);
    }
    ctx.save();
    ctx.translate(x + BAR.width + BAR.ticks + BAR.title / 2, y + h / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.textAlign = "center";
    ctx.font = `500 12px ${FONT}`;
    ctx.fillStyle = "#616161";
    ctx.fillText(fitText(ctx, title, h), 0, 0);
    ctx.restore();
  }

  /** Keep cell `cell` outlined while the mouse is elsewhere (null: none). @param {?Cell} cell */
  mark(cell) {
    this.marked = cell;
    if (!this.hovered) this.draw();
  }

  _setHover(cell) {
    const same = cell === this.hovered || (cell && this.hovered && cell.i === this.hovered.i && cell.j === this.hovered.j);
    if (same) return;
    this.hovered = cell;
    this.canvas.title = this.reason(cell) || ""; // a hole says why on hover
    this.draw();
    this.handlers.onHover(cell);
  }
}
