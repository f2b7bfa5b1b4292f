// The Meta map view: the stored meta-SNE maps (picker, figures, or the offer to compute one), hover previews and
// opening a representation in the main view. metamap.js draws the map.
import { categoryColor, NO_CLASS, pointColors } from "./colors.js";
import { MetaMap, metaRows } from "./metamap.js";
import { drawPreview } from "./overlay.js";
import * as V from "./views.js";

const { h } = V;

export class MetaView {
  /** @param {object} app the page's App (state, model, jobs) */
  constructor(app) {
    this.app = app;
    this.hoverRow = null;
    this.map = new MetaMap(app.el.meta, {
      onHover: (row) => this.onHover(row),
      onOpen: (row) => this.onOpen(row),
    });
  }

  async render() {
    const app = this.app;
    const started = performance.now();
    const s = app.state;
    const names = app.index.meta || [];
    if (!names.includes(s.metaName)) s.metaName = names[0] ?? null;
    const bar = (result) => V.metaPanel(names, s.metaName, result, (name) => {
      s.metaName = name;
      this.render();
    }, (t, m, e) => this.start(t, m, e));
    app.el.metaBar.replaceChildren(bar(null));
    if (!s.metaName) {
      this.map.setData({ coords: [] }, [], () => NO_CLASS);
      return;
    }
    const name = s.metaName;
    try {
      const result = await app.model.metaResult(name);
      if (s.metaName !== name || s.view !== "meta") return;
      app.el.metaBar.replaceChildren(bar(result));
      const runs = app.index.runs.map((r) => r.name);
      this.map.setData(result, metaRows(result, app.index.runs), (run) => {
        const i = runs.indexOf(run);
        return i < 0 ? "#757575" : categoryColor(i);
      });
      window.__repvizStats.metaShownMs = performance.now() - started;
      app.el.panels.replaceChildren(this.legend());
    } catch (e) {
      app.showError(e);
    }
  }

  legend() {
    const app = this.app;
    const rows = this.map.rows;
    const runs = [...new Set(rows.filter((r) => !r.landmark).map((r) => r.run))];
    const all = app.index.runs.map((r) => r.name);
    return V.legend("Runs (darker: deeper layer)", runs.map((name) => ({
      name, color: categoryColor(Math.max(all.indexOf(name), 0)), count: rows.filter((r) => r.run === name).length,
    })), new Set(), () => {}, () => {}, () => {});
  }

  async onHover(row) {
    const app = this.app;
    if (row === null) return;
    const r = this.map.rows[row];
    if (r.landmark) {
      app.el.hover.replaceChildren(V.previewCard("input (landmark)", null, "The probe inputs themselves: every network starts here."));
      return;
    }
    const run = app.runNamed(r.run);
    const title = `${r.run} · ${r.layer} · ${(run && run.step_unit) || "step"} ${r.step}`;
    const choice = app.choiceFor({ run: r.run, layer: r.layer, step: r.step });
    if (!choice) {
      app.el.hover.replaceChildren(V.previewCard(title, null, "No 2-D embedding stored for this representation."));
      return;
    }
    this.hoverRow = row;
    try {
      const data = await app.grid.cellData(choice);
      if (this.hoverRow !== row) return;
      const canvas = h("canvas", { class: "preview-canvas", "data-testid": "preview-canvas" });
      app.el.hover.replaceChildren(V.previewCard(title, canvas));
      drawPreview(canvas, data.x, data.y, pointColors(data));
    } catch (e) {
      app.showError(e);
    }
  }

  onOpen(row) {
    const app = this.app;
    const r = this.map.rows[row];
    if (r.landmark) return;
    const choice = app.choiceFor({ run: r.run, layer: r.layer, step: r.step });
    if (!choice) {
      app.showError(new Error(`no 2-D embedding of ${r.layer} in run ${r.run} is stored: run repviz embed`));
      return;
    }
    app.open(choice);
  }

  async start(transform, metric, embedding) {
    const app = this.app;
    try {
      const job = await app.model.computeMeta(transform, metric, embedding);
      app.jobs.set(job.id, { kind: "meta", ...job });
    } catch (e) {
      app.jobs.set(`local-meta-${transform}`, { id: "", kind: "meta", state: "failed", error: e.message });
    }
    app.renderStatus();
    app.pollJobs();
  }
}
