// What the page saves as files: the shown view as drawn (a PNG) and the selected points of a run (a CSV).
import * as V from "./dom.js";

const FORMULA_START = /^[=+\-@\t\r]/; // what makes a spreadsheet read a cell as a formula
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * One CSV cell, quoted; text a spreadsheet would run as a formula (starting with =, +, -, @, a tab or a carriage
 * return, and no plain number such as -1.5) is prefixed with a single quote, as OWASP recommends.
 * @param {*} value @returns {string}
 */
export function csvCell(value) {
  const text = String(value);
  const safe = FORMULA_START.test(text) && !NUMBER.test(text) ? `'${text}` : text;
  return `"${safe.replace(/"/g, '""')}"`;
}

/** Save `blob` as a download named `name`. */
export function download(blob, name) {
  const link = V.h("a", { href: URL.createObjectURL(blob), download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

/**
 * View `view` as drawn (its canvases, overlays included, on white) as a PNG download named after the view, run
 * and layer of `state`.
 * @param {import("./view.js").View} view
 */
export function exportPng(view, state) {
  const layers = view.canvases();
  const out = V.h("canvas", { width: layers[0].width, height: layers[0].height });
  const ctx = out.getContext("2d");
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, out.width, out.height);
  for (const layer of layers) ctx.drawImage(layer, 0, 0, out.width, out.height);
  window.__repvizStats.exported = { view: view.name, width: out.width, height: out.height };
  out.toBlob((blob) => download(blob, `repviz-${view.name}-${V.shown(state.run)}-${V.shown(state.layer)}.png`), "image/png");
}

/**
 * Points `indices` (probe order) of `run` as a CSV download: probe id, label, prediction and confidence (from
 * `preds`, null when the run has none), then every metadata column of `meta` (null: none).
 */
export function exportCsv(run, layer, indices, { ids, labels, preds, meta }) {
  const names = run.class_names;
  const name = (c) => (c < 0 || !Number.isFinite(c) ? "" : names ? names[c] : String(c));
  const columns = meta ? meta.columns : [];
  const rows = [["probe_id,label,prediction,confidence", ...columns.map((c) => csvCell(c.name))].join(",")];
  for (const i of indices) {
    const conf = preds ? preds.conf[i] : NaN;
    rows.push([ids[i], name(labels[i]), preds ? name(preds.cls[i]) : "", Number.isFinite(conf) ? conf.toFixed(4) : "",
      ...columns.map((c) => V.metaText(c.values[i]))].map(csvCell).join(","));
  }
  download(new Blob([`${rows.join("\n")}\n`], { type: "text/csv" }), `repviz-selection-${V.shown(run.name)}-${V.shown(layer)}.csv`);
}
