// What the Main view draws, fetched: a representation's 2-D coordinates with the probe's ids, labels, predictions
// (at or before its snapshot), neighbourhood change and metadata, in the snapshot's row order (a snapshot may hold
// a subset of the probe: points.js); the representation the neighbourhood change compares with; and a point's
// nearest neighbours in the original space.
import { stepAtOrBefore } from "./choice.js";
import { forRows, rowOf } from "./points.js";

/** Neighbours of the neighbourhood change and of a focused point's list. */
const K_NEIGHBORS = 10;

/**
 * The representation the neighbourhood change of the shared state `s` compares with: the previous snapshot of
 * its layer (`vs` "previous"), or layer `<name>` at or before its snapshot (`vs` "layer:<name>"); null for none.
 */
export function changeBase(run, s, vs) {
  if (vs.startsWith("layer:")) {
    const layer = run.layers.find((l) => l.name === vs.slice(6));
    return layer && layer.steps.length ? { run: s.run, layer: layer.name, step: stepAtOrBefore(layer.steps, s.step) } : null;
  }
  const layer = run.layers.find((l) => l.name === s.layer);
  const steps = layer ? layer.steps.filter((t) => t < s.step) : [];
  return steps.length ? { run: s.run, layer: s.layer, step: steps[steps.length - 1] } : null;
}

/**
 * Fetch what drawing the shared state `s` (run, layer, method, step, colorBy) of `run` needs, the neighbourhood
 * change against `base` (null: none); a failed change goes to `onError` and the rest is drawn without it. Throws
 * when the embedding's rows are not the snapshot's.
 * @param {import("./model.js").Model} model
 */
export async function loadDrawing(model, run, s, base, onError) {
  const predSteps = run.prediction_steps;
  const predStep = predSteps.length ? stepAtOrBefore(predSteps, s.step) : null;
  const byColumn = s.colorBy.startsWith("meta:") && (run.metadata || []).length;
  const [coords, labels, ids, preds, change, metadata] = await Promise.all([
    model.coords(s.run, s.layer, s.step, s.method),
    model.labels(s.run),
    model.ids(s.run),
    predStep === null ? null : model.predictions(s.run, predStep),
    base ? model.neighborhoodChange({ run: s.run, layer: s.layer, step: s.step }, base, K_NEIGHBORS)
      .catch((e) => {
        onError(e);
        return null;
      }) : null,
    byColumn ? model.metadata(s.run) : null,
  ]);
  const rows = await model.rows(s.run, s.layer, s.step, coords.length / 2, run.n_probe);
  if (rows.length !== coords.length / 2) {
    throw new Error(`the embedding of ${s.layer} at ${run.step_unit} ${s.step} has ${coords.length / 2} rows but the `
      + `snapshot holds ${rows.length} probe points; compute it again with repviz embed`);
  }
  return { coords, rows, change, predStep, base, ...forRows({ ids, labels, preds, metadata }, rows) };
}

/**
 * The K_NEIGHBORS nearest neighbours of row `index` of `drawn` in the original space: their rows of `drawn` and
 * their distances.
 * @param {import("./model.js").Model} model
 * @returns {Promise<{neighbors: number[], distances: number[]}>}
 */
export async function nearest(model, drawn, index) {
  const { run, layer, step } = drawn.chosen;
  const result = await model.knn(run, layer, step, drawn.rows[index], K_NEIGHBORS);
  return { neighbors: result.neighbors.map((p) => rowOf(drawn.rows, p)), distances: result.distances }; // probe points -> rows
}
