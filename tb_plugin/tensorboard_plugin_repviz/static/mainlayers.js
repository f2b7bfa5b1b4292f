// The Main view's overlay layers over the scatter, from the drawn representation: density contours, trails of the
// selected points across snapshots, rings of another run's points placed into the layout, and the rings of a
// point's nearest neighbours; and which placed point is under the mouse. Coordinates go through the drawn frame
// (scatter.js's toPlot), as the scatter's own points.
import { categoryColor, pointColors } from "./colors.js";
import { pointAt } from "./overlay.js";
import { toPlot } from "./scatter.js";

export const MAX_TRAILS = 500; // the trails route's bound
const NO_CLASS_LINE = "#424242";

/**
 * The overlay layers of `drawn`, each a promise of [name, layer or null (not shown)], in drawing order.
 * @param {import("./model.js").Model} model
 * @param {{contours: boolean, trails: boolean, colorBy: string, selected: number[], placed: Promise<object[]>,
 *          hidden: Set<number>, knn: ?object}} what  `selected`: rows of the selection, sorted; `placed`: the
 *   current sets of points placed into this layout; `hidden`: class codes whose placed points are not drawn;
 *   `knn`: the focused point's nearest neighbours
 */
export function overlayLayers(model, drawn, what) {
  const at = (cx, cy) => toPlot(drawn.frame, cx, cy);
  const { run, layer, key, step } = drawn.chosen;
  const layers = [];
  if (what.contours) {
    const by = what.colorBy === "label" && drawn.run.has_labels ? "class" : "all";
    layers.push(model.density(run, layer, step, key, by, 4).then((density) => {
      const lines = [];
      for (const c of density.contours) {
        const color = c.class === null || c.class === undefined ? NO_CLASS_LINE : categoryColor(c.class);
        for (const path of c.paths) {
          const points = new Float32Array(path.length);
          for (let i = 0; i < path.length; i += 2) [points[i], points[i + 1]] = at(path[i], path[i + 1]);
          lines.push({ color, points });
        }
      }
      return ["contours", { kind: "contours", lines }];
    }));
  } else layers.push(Promise.resolve(["contours", null]));
  const selected = what.selected;
  if (what.trails && selected.length && selected.length <= MAX_TRAILS) {
    layers.push(model.trails(run, layer, key, selected.map((i) => drawn.rows[i])).then(({ steps, m, coords }) => {
      const colors = pointColors(drawn.colors);
      const paths = selected.map((_, p) => {
        const path = new Float32Array(2 * steps.length);
        for (let t = 0; t < steps.length; t++) {
          const o = 2 * (t * m + p);
          [path[2 * t], path[2 * t + 1]] = at(coords[o], coords[o + 1]);
        }
        return path;
      });
      return ["trails", { kind: "trails", paths, colors: selected.map((i) => colors[i]) }];
    }));
  } else layers.push(Promise.resolve(["trails", null]));
  layers.push(what.placed.then((sets) => {
    const points = [];
    const colors = [];
    for (const p of sets) {
      for (let i = 0; i < p.n; i++) {
        if (what.hidden.has(p.labels[i])) continue;
        points.push(at(p.coords[2 * i], p.coords[2 * i + 1]));
        colors.push(p.labels[i] >= 0 ? categoryColor(p.labels[i]) : NO_CLASS_LINE);
      }
    }
    return ["placed", points.length ? { kind: "placed", points, colors } : null];
  }));
  const knn = what.knn;
  const focus = knn ? drawn.idIndex.get(knn.id) : undefined;
  layers.push(Promise.resolve(["rings", focus === undefined ? null : {
    kind: "rings", focus: [drawn.x[focus], drawn.y[focus]], points: knn.neighbors.map((j) => [drawn.x[j], drawn.y[j]]),
  }]));
  return layers;
}

/** [xlo, xhi, ylo, yhi] in plot coordinates of the points of placed `sets` (null: none), in frame `frame`. */
export function placedExtent(sets, frame) {
  let box = null;
  for (const p of sets) {
    for (let i = 0; i < p.n; i++) {
      const [x, y] = toPlot(frame, p.coords[2 * i], p.coords[2 * i + 1]);
      if (!Number.isFinite(x) || !Number.isFinite(y)) continue;
      box = box ? [Math.min(box[0], x), Math.max(box[1], x), Math.min(box[2], y), Math.max(box[3], y)] : [x, x, y, y];
    }
  }
  return box;
}

/**
 * The placed point under mouse event `e` over the scatter's canvas, as [set, index in the set], or null.
 * @param {object[]} sets  the current sets of points placed into the layout of `drawn`
 * @param {Set<number>} hidden  class codes whose placed points are not drawn
 * @param {import("./scatter.js").Scatter} scatter
 */
export function placedAt(sets, hidden, drawn, scatter, canvas, e) {
  const xs = [];
  const ys = [];
  const at = [];
  for (const p of sets) {
    for (let i = 0; i < p.n; i++) {
      if (hidden.has(p.labels[i])) continue;
      const [px, py] = toPlot(drawn.frame, p.coords[2 * i], p.coords[2 * i + 1]);
      const [sx, sy] = scatter.toScreen(px, py);
      xs.push(sx);
      ys.push(sy);
      at.push([p, i]);
    }
  }
  const found = xs.length ? pointAt(canvas, e, xs, ys, 6) : null;
  return found === null ? null : at[found];
}
