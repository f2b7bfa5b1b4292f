// 2-D canvas drawing of the Repviz tab: what regl-scatterplot does not draw (trails, density contours, rings
// around neighbours, the meta-SNE map, small previews). Never regl-scatterplot's point connections: they need a
// blob: worker that TensorBoard's CSP blocks. Everything here is drawing; the views decide what to draw.
import { shown } from "./dom.js";

const MAX_LABELS = 16; // trajectories named on the meta map; more would cover it

/** Size `canvas`'s buffer to its CSS box (device pixels) and return a context in CSS pixels, cleared. */
export function fitCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = Math.max(1, Math.round(canvas.clientWidth * ratio));
  const height = Math.max(1, Math.round(canvas.clientHeight * ratio));
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;
    canvas.height = height;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
  return ctx;
}

/**
 * The index of the point nearest to where mouse event `e` is on `canvas`, within `radius` CSS pixels (null: none).
 * @param {ArrayLike<number>} xs canvas positions (CSS pixels) @param {ArrayLike<number>} ys
 */
export function pointAt(canvas, e, xs, ys, radius) {
  const box = canvas.getBoundingClientRect();
  const mx = e.clientX - box.left;
  const my = e.clientY - box.top;
  let best = null;
  let bestD = radius;
  for (let i = 0; i < xs.length; i++) {
    const d = Math.hypot(xs[i] - mx, ys[i] - my);
    if (d < bestD) {
      bestD = d;
      best = i;
    }
  }
  return best;
}

/** An arrow head at `to`, pointing from `from`. */
function arrowHead(ctx, from, to, size) {
  const angle = Math.atan2(to[1] - from[1], to[0] - from[0]);
  ctx.beginPath();
  ctx.moveTo(to[0], to[1]);
  ctx.lineTo(to[0] - size * Math.cos(angle - 0.45), to[1] - size * Math.sin(angle - 0.45));
  ctx.lineTo(to[0] - size * Math.cos(angle + 0.45), to[1] - size * Math.sin(angle + 0.45));
  ctx.closePath();
  ctx.fill();
}

/**
 * Layers drawn over a Scatter in its plot coordinates, re-projected on every pan and zoom.
 * `set(name, layer)` with layer {kind: "trails"|"contours"|"rings"|"placed", ...} (null removes it).
 */
export class Overlay {
  /** @param {HTMLCanvasElement} canvas @param {{toScreen: function(number, number): number[]}} scatter */
  constructor(canvas, scatter) {
    this.canvas = canvas;
    this.scatter = scatter;
    this.layers = new Map();
    this._frame = 0;
  }

  set(name, layer) {
    if (layer) this.layers.set(name, layer);
    else this.layers.delete(name);
    this.redraw();
  }

  /** Redraw at the next animation frame (pan and zoom call this many times a frame). */
  redraw() {
    if (this._frame) return;
    this._frame = requestAnimationFrame(() => {
      this._frame = 0;
      this.drawNow();
    });
  }

  drawNow() {
    const ctx = fitCanvas(this.canvas);
    const at = (x, y) => this.scatter.toScreen(x, y);
    for (const layer of this.layers.values()) {
      if (layer.kind === "contours") drawContours(ctx, layer.lines, at);
      else if (layer.kind === "trails") drawTrails(ctx, layer.paths, layer.colors, at);
      else if (layer.kind === "rings") drawRings(ctx, layer.points, layer.focus, at);
      else if (layer.kind === "placed") drawPlaced(ctx, layer.points, layer.colors, at);
    }
  }
}

/** Contour polylines [{color, points: Float32Array x0,y0,x1,y1,...}] in plot coordinates. */
function drawContours(ctx, lines, at) {
  ctx.lineWidth = 1.2;
  ctx.lineJoin = "round";
  for (const line of lines) {
    ctx.strokeStyle = line.color;
    ctx.globalAlpha = line.alpha ?? 0.8;
    ctx.beginPath();
    for (let i = 0; i < line.points.length; i += 2) {
      const [sx, sy] = at(line.points[i], line.points[i + 1]);
      if (i === 0) ctx.moveTo(sx, sy);
      else ctx.lineTo(sx, sy);
    }
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
}

/**
 * Trails: per point its positions over the snapshots (plot coordinates, oldest first), thin and faint at the
 * start, an arrow head at the newest position.
 * @param {Float32Array[]} paths x0,y0,x1,y1,... per point @param {string[]} colors per point
 */
function drawTrails(ctx, paths, colors, at) {
  ctx.lineJoin = "round";
  ctx.lineCap = "round";
  paths.forEach((path, p) => {
    const points = [];
    for (let i = 0; i < path.length; i += 2) {
      if (Number.isFinite(path[i]) && Number.isFinite(path[i + 1])) points.push(at(path[i], path[i + 1]));
    }
    if (points.length < 2) return;
    ctx.strokeStyle = colors[p];
    ctx.fillStyle = colors[p];
    for (let i = 1; i < points.length; i++) {
      ctx.globalAlpha = 0.25 + (0.65 * i) / (points.length - 1);
      ctx.lineWidth = 0.8 + (1.2 * i) / (points.length - 1);
      ctx.beginPath();
      ctx.moveTo(...points[i - 1]);
      ctx.lineTo(...points[i]);
      ctx.stroke();
    }
    arrowHead(ctx, points[points.length - 2], points[points.length - 1], 6);
  });
  ctx.globalAlpha = 1;
}

/** Rings around `points` ([x, y] plot coordinates), a thicker one around `focus`. */
function drawRings(ctx, points, focus, at) {
  ctx.strokeStyle = "#f57c00";
  ctx.lineWidth = 1.5;
  for (const [x, y] of points) {
    const [sx, sy] = at(x, y);
    ctx.beginPath();
    ctx.arc(sx, sy, 6, 0, 2 * Math.PI);
    ctx.stroke();
  }
  if (focus) {
    const [sx, sy] = at(...focus);
    ctx.lineWidth = 3;
    ctx.strokeStyle = "#212121";
    ctx.beginPath();
    ctx.arc(sx, sy, 9, 0, 2 * Math.PI);
    ctx.stroke();
  }
}

/** Points placed into the layout (repviz place): hollow rings in their class colour, a dark rim. */
function drawPlaced(ctx, points, colors, at) {
  points.forEach(([x, y], i) => {
    const [sx, sy] = at(x, y);
    ctx.beginPath();
    ctx.arc(sx, sy, 4.5, 0, 2 * Math.PI);
    ctx.lineWidth = 3.5;
    ctx.strokeStyle = "#212121";
    ctx.stroke();
    ctx.lineWidth = 2;
    ctx.strokeStyle = colors[i];
    ctx.stroke();
  });
}

/**
 * The meta-SNE map: one dot per representation, trajectories with arrow heads in step order (named at their last
 * snapshot when there are few), the landmark as a black diamond, the hovered one ringed.
 * @param {{x: number[], y: number[], fill: string[], landmark: boolean[],
 *          trajectories: {rows: number[], color: string, label: string}[], hovered: ?number}} map  screen coordinates
 */
export function drawMetaMap(ctx, map) {
  ctx.lineJoin = "round";
  for (const { rows, color } of map.trajectories) {
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.globalAlpha = 0.7;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    rows.forEach((r, i) => (i ? ctx.lineTo(map.x[r], map.y[r]) : ctx.moveTo(map.x[r], map.y[r])));
    ctx.stroke();
    for (let i = 1; i < rows.length; i++) {
      const a = [map.x[rows[i - 1]], map.y[rows[i - 1]]];
      const b = [map.x[rows[i]], map.y[rows[i]]];
      if (Math.hypot(b[0] - a[0], b[1] - a[1]) > 14) arrowHead(ctx, a, [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2], 7);
    }
  }
  ctx.globalAlpha = 1;
  if (map.trajectories.length <= MAX_LABELS) {
    ctx.font = "11px Roboto, Arial, sans-serif";
    ctx.fillStyle = "#616161";
    for (const { rows, label } of map.trajectories) {
      const last = rows[rows.length - 1];
      ctx.fillText(shown(label), map.x[last] + 8, map.y[last] - 6);
    }
  }
  ctx.lineWidth = 1;
  for (let i = 0; i < map.x.length; i++) {
    if (map.landmark[i]) continue;
    ctx.fillStyle = map.fill[i];
    ctx.strokeStyle = "rgba(0,0,0,0.35)";
    ctx.beginPath();
    ctx.arc(map.x[i], map.y[i], 5, 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();
  }
  ctx.fillStyle = "#212121";
  ctx.font = "12px Roboto, Arial, sans-serif";
  for (let i = 0; i < map.x.length; i++) {
    if (!map.landmark[i]) continue;
    const [x, y] = [map.x[i], map.y[i]];
    ctx.beginPath();
    ctx.moveTo(x, y - 9);
    ctx.lineTo(x + 9, y);
    ctx.lineTo(x, y + 9);
    ctx.lineTo(x - 9, y);
    ctx.closePath();
    ctx.fill();
    ctx.fillText("input", x + 12, y + 4);
  }
  if (map.hovered !== null && map.hovered !== undefined) {
    ctx.strokeStyle = "#212121";
    ctx.lineWidth = 2.5;
    ctx.beginPath();
    ctx.arc(map.x[map.hovered], map.y[map.hovered], 9, 0, 2 * Math.PI);
    ctx.stroke();
  }
}

/**
 * A small scatter (a representation's preview): x, y in [-1, 1], a colour per point.
 * @param {HTMLCanvasElement} canvas @param {Float32Array} x @param {Float32Array} y @param {string[]} colors
 */
export function drawPreview(canvas, x, y, colors) {
  const ctx = fitCanvas(canvas);
  const width = canvas.clientWidth;
  const height = canvas.clientHeight;
  const half = Math.min(width, height) / 2;
  for (let i = 0; i < x.length; i++) {
    ctx.fillStyle = colors[i];
    ctx.fillRect(width / 2 + x[i] * half - 1, height / 2 - y[i] * half - 1, 2, 2);
  }
}
