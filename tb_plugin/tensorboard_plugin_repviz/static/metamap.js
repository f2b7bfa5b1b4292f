// The meta-SNE map on a 2-D canvas: one dot per representation coloured by run and shaded by layer depth, each
// layer's snapshots joined in step order with arrow heads, the input landmark marked. Hover and click report the
// row under the mouse; metaview.js shows the preview and opens the representation.
import { drawMetaMap, fitCanvas, pointAt } from "./overlay.js";
import { FIT_MARGIN } from "./scatter.js";

const HIT_PX = 10;
const RING_PX = 10; // radius of the hovered point's ring (overlay.js), and its line

/** `hex` (#rrggbb) mixed with white by `t` in [0, 1]. */
function lighten(hex, t) {
  const c = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return `rgb(${c.map((v) => Math.round(v + (255 - v) * t)).join(",")})`;
}

/**
 * Per row {run, layer, step, depth, n_layers, landmark}: the server's `rows`, or derived from the keys and the
 * run index for a server that sends keys only.
 */
export function metaRows(result, runs) {
  if (Array.isArray(result.rows) && result.rows.length === result.keys.length) return result.rows;
  return result.keys.map(([run, layer, step]) => {
    const info = runs.find((r) => r.name === run);
    const layers = info ? info.layers.map((l) => l.name) : [];
    return { run, layer, step, depth: Math.max(layers.indexOf(layer), 0), n_layers: Math.max(layers.length, 1),
      landmark: run === "<input>" };
  });
}

/** The meta-SNE map on a 2-D canvas, with hover and click by row. */
export class MetaMap {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {{onHover: function(?number): void, onOpen: function(number): void}} handlers rows of the result
   */
  constructor(canvas, handlers) {
    this.canvas = canvas;
    this.rows = [];
    this.coords = [];
    this.fill = [];
    this.trajectories = [];
    this.hovered = null;
    this.screen = { x: [], y: [] };
    canvas.addEventListener("mousemove", (e) => this._move(e));
    canvas.addEventListener("mouseleave", () => this._setHover(null, handlers));
    canvas.addEventListener("click", (e) => {
      const i = this._hit(e);
      if (i !== null) handlers.onOpen(i);
    });
    this.handlers = handlers;
  }

  /**
   * @param {{coords: number[][]}} result @param {object[]} rows from metaRows
   * @param {function(string): string} runColor hex colour of a run
   */
  setData(result, rows, runColor) {
    this.coords = result.coords;
    this.rows = rows;
    this.fill = rows.map((r) => lighten(runColor(r.run), r.n_layers > 1 ? 0.6 * (1 - r.depth / (r.n_layers - 1)) : 0));
    const groups = new Map();
    rows.forEach((r, i) => {
      if (r.landmark) return;
      const key = JSON.stringify([r.run, r.layer]);
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(i);
    });
    this.trajectories = [...groups.values()].filter((g) => g.length > 1).map((g) => ({
      rows: g.sort((a, b) => rows[a].step - rows[b].step),
      color: this.fill[g[0]],
      label: `${rows[g[0]].run} · ${rows[g[0]].layer}`,
    }));
    this.hovered = null;
    this.draw();
  }

  /** Draw at the canvas's current size; records the time in window.__repvizStats.metaDrawnMs. */
  draw() {
    const started = performance.now();
    const ctx = fitCanvas(this.canvas);
    const width = this.canvas.clientWidth;
    const height = this.canvas.clientHeight;
    let lo = [Infinity, Infinity];
    let hi = [-Infinity, -Infinity];
    for (const [x, y] of this.coords) {
      lo = [Math.min(lo[0], x), Math.min(lo[1], y)];
      hi = [Math.max(hi[0], x), Math.max(hi[1], y)];
    }
    // the bounding box fitted to both the width and the height, FIT_MARGIN and a hovered point's ring inside
    const free = (size) => size - 2 * (FIT_MARGIN * size + RING_PX);
    const scale = Math.max(Math.min(free(width) / Math.max(hi[0] - lo[0], 1e-12),
      free(height) / Math.max(hi[1] - lo[1], 1e-12)), 0);
    const cx = (lo[0] + hi[0]) / 2;
    const cy = (lo[1] + hi[1]) / 2;
    this.screen = {
      x: this.coords.map(([x]) => width / 2 + (x - cx) * scale),
      y: this.coords.map(([, y]) => height / 2 - (y - cy) * scale),
    };
    drawMetaMap(ctx, { ...this.screen, fill: this.fill, landmark: this.rows.map((r) => r.landmark),
      trajectories: this.trajectories, hovered: this.hovered });
    const stats = window.__repvizStats;
    stats.metaDraws = (stats.metaDraws || 0) + 1;
    stats.metaDrawnMs = performance.now() - started;
    stats.metaPoints = this.coords.length;
    stats.metaTrajectories = this.trajectories.length;
    stats.metaPositions = this.rows.map((r, i) => [this.screen.x[i], this.screen.y[i], r.run, r.layer, r.step]);
  }

  /** Canvas position [x, y] (CSS pixels) of row i as last drawn. */
  position(i) {
    return [this.screen.x[i], this.screen.y[i]];
  }

  _hit(e) {
    return pointAt(this.canvas, e, this.screen.x, this.screen.y, HIT_PX);
  }

  _move(e) {
    this._setHover(this._hit(e), this.handlers);
  }

  _setHover(i, handlers) {
    if (i === this.hovered) return;
    this.hovered = i;
    this.draw();
    handlers.onHover(i);
  }
}
