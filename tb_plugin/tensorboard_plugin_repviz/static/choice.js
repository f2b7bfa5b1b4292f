// Small pure helpers about choosing representations: snapshots at or before a step, an even spread of them,
// whether two choices name the same representation, and what the run index offers for the current choice (the
// embedding, its steps, the closest stored representation to a run / layer / step).

/** The last element of sorted `steps` that is <= step (or the first). */
export function stepAtOrBefore(steps, step) {
  let best = steps[0];
  for (const s of steps) if (s <= step) best = s;
  return best;
}

/** Up to `count` elements of `items` spread evenly, first and last included. */
export function spread(items, count) {
  if (items.length <= count) return items;
  return Array.from({ length: count }, (_, i) => items[Math.round((i * (items.length - 1)) / (count - 1))]);
}

/** Whether two {run, layer, key, step} choices name the same representation. */
export function sameChoice(a, b) {
  return a.run === b.run && a.layer === b.layer && a.key === b.key && a.step === b.step;
}

/**
 * @typedef {import("./model.js").Index} Index
 * @typedef {import("./model.js").Run} Run
 * @typedef {import("./model.js").Embedding} Embedding
 * @typedef {{run: string, layer: string, key: string, step: number}} Choice  one stored 2-D representation
 * @typedef {{run: ?string, layer: ?string, method: ?string, step: ?number}} Current  what the pickers say;
 *   `method` is an embedding key, or "compute:<method>" while one is being computed
 */

/** The run called `name` in `index` (null when it is not listed). @returns {?Run} */
export function runNamed(index, name) {
  return index.runs.find((r) => r.name === name) || null;
}

/** The stored embedding `current.method` names (null for a "compute:" entry or nothing). @returns {?Embedding} */
export function embeddingOf(index, current) {
  const run = runNamed(index, current.run);
  return run ? run.embeddings.find((e) => e.key === current.method) || null : null;
}

/** Snapshot steps of the current embedding for the current layer. @returns {number[]} */
export function stepsOf(index, current) {
  const e = embeddingOf(index, current);
  return (e && e.steps[current.layer]) || [];
}

/**
 * The run / layer / method / step that exist, keeping `current` where it still applies: a finished computation
 * becomes its stored key, a method missing from a layer becomes the same method's stored key or the default.
 * @param {Index} index @param {Current} current
 * @returns {Current}
 */
export function resolveCurrent(index, current) {
  const out = { ...current };
  const runs = index.runs;
  if (!runs.some((r) => r.name === out.run)) out.run = runs.length ? runs[0].name : null;
  const run = runNamed(index, out.run);
  if (!run) return out;
  const withEmbeddings = run.layers.filter((l) => run.embeddings.some((e) => (e.steps[l.name] || []).length));
  if (!run.layers.some((l) => l.name === out.layer)) out.layer = (withEmbeddings[0] || run.layers[0] || {}).name ?? null;
  const stored = run.embeddings.filter((e) => (e.steps[out.layer] || []).length);
  const computing = typeof out.method === "string" && out.method.startsWith("compute:") ? out.method.slice(8) : null;
  const computed = computing && stored.find((e) => e.method === computing);
  if (computed) out.method = computed.key; // the job finished (or someone else computed it)
  if (!computing && !stored.some((e) => e.key === out.method)) {
    const previous = run.embeddings.find((e) => e.key === out.method);
    const same = previous && stored.find((e) => e.method === previous.method);
    out.method = (same || stored.find((e) => e.default && e.method === index.choices.default_method) || stored.find((e) => e.default) ||
      stored[0] || {}).key ?? null;
  }
  const steps = stepsOf(index, out);
  if (steps.length && !steps.includes(out.step)) out.step = out.step === null ? steps[steps.length - 1] : stepAtOrBefore(steps, out.step);
  return out;
}

/**
 * The layer of `run` that matches layer `name` of run `from`: the one at the same position when both record the
 * same layers (classes and stored widths, in order), whatever their names (Keras names layers per process, so two
 * instances of one architecture differ: re_lu_10, re_lu_26); else the same name; else the same relative depth.
 * @returns {?string}
 */
export function layerFor(run, from, name) {
  const mine = from ? from.layers.map((l) => l.name) : [];
  if (mine.includes(name) && sameLayers(from, run)) return run.layers[mine.indexOf(name)].name;
  if (run.layers.some((l) => l.name === name)) return name;
  const depth = Math.max(mine.indexOf(name), 0);
  const m = run.layers.length;
  if (!m) return null;
  const at = mine.length > 1 ? Math.round((depth / (mine.length - 1)) * (m - 1)) : 0;
  return run.layers[Math.min(at, m - 1)].name;
}

/**
 * The layer of `run` to show beside each of layers `names` of run `from` (the rows of a layers × runs grid), and
 * how it pairs: "same" (the same layer: the same position in one architecture, or the same name), "depth" (another
 * architecture's layer at the same relative depth) or "above" (the layer at this depth already pairs with a row
 * above: a run with fewer layers is not shown twice). `layer` is null when `run` records no layers.
 * @param {Run} run @param {Run} from @param {string[]} names
 * @returns {{layer: ?string, how: string}[]}
 */
export function layersAcross(run, from, names) {
  const same = run === from || sameLayers(from, run);
  const shown = new Set();
  return names.map((name) => {
    const layer = layerFor(run, from, name);
    const how = shown.has(layer) ? "above" : same || layer === name ? "same" : "depth";
    shown.add(layer);
    return { layer, how };
  });
}

/** Whether runs `a` and `b` record layers of the same classes and stored widths in the same order. */
function sameLayers(a, b) {
  const width = (l) => (l.stored_shape || [])[1];
  return a.layers.length === b.layers.length
    && a.layers.every((l, i) => l.class === b.layers[i].class && width(l) === width(b.layers[i]));
}

/**
 * The stored representation closest to `partial` ({run?, layer?, step?}, the rest from `current`): the same
 * method as the current embedding where stored, the snapshot at or before the step. Null when nothing is stored.
 * @param {Index} index @param {Current} current @param {{run?: string, layer?: string, step?: number}} partial
 * @returns {?Choice}
 */
export function choiceFor(index, current, partial) {
  const run = runNamed(index, partial.run ?? current.run);
  if (!run) return null;
  const layer = partial.layer && run.layers.some((l) => l.name === partial.layer)
    ? partial.layer : layerFor(run, runNamed(index, current.run), partial.layer ?? current.layer);
  const chosen = embeddingOf(index, current);
  const method = chosen ? chosen.method : null;
  const stored = run.embeddings.filter((e) => (e.steps[layer] || []).length);
  const e = stored.find((x) => x.method === method && x.default) || stored.find((x) => x.method === method) ||
    stored.find((x) => x.default) || stored[0];
  if (!e) return null;
  const steps = e.steps[layer];
  const wanted = partial.step ?? current.step;
  return { run: run.name, layer, key: e.key, step: wanted === null ? steps[steps.length - 1] : stepAtOrBefore(steps, wanted) };
}
