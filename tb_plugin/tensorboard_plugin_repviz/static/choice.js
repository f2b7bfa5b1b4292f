// Small pure helpers about choosing representations: snapshots at or before a step, an even spread of them, and
// whether two choices name the same representation.

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
