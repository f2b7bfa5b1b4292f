// The search of the probe metadata: a query (a word, or /regex/flags) over one column or all of the current run's
// metadata selects the matching points, the selection every view highlights. It owns the query and the box in its
// slot; the page hands it the shared state and the callback that changes it.
import { runNamed } from "./choice.js";
import * as V from "./dom.js";

const { h } = V;

const SEARCH_MS = 150; // typing pause before a search runs

/**
 * The search query as a RegExp (flags as given, plus `extra`): "/source/flags" as written, anything else a
 * case-insensitive substring. Throws SyntaxError for a bad regular expression.
 */
export function queryRegExp(query, extra = "") {
  const m = /^\/(.+)\/([a-z]*)$/.exec(query);
  if (m) return new RegExp(m[1], m[2].replace("g", "") + extra);
  return new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), `i${extra}`);
}

export class Search {
  /**
   * @param {import("./model.js").Model} model
   * @param {HTMLElement} slot  where the box goes
   * @param {{page: function(): {state: import("./view.js").State, index: import("./model.js").Index},
   *          change: function(Partial<import("./view.js").State>): void, error: function(Error): void}} on
   */
  constructor(model, slot, on) {
    this.model = model;
    this.slot = slot;
    this.on = on;
    this.query = "";
    this.column = ""; // "": any column
    this.result = { count: null, error: null };
    this.selection = null; // the selection the last search made
  }

  /** The current query as a global RegExp (null: no query, or a bad one), for marking matches in the hover card. */
  regExp() {
    try {
      return this.query.trim() ? queryRegExp(this.query.trim(), "g") : null;
    } catch {
      return null;
    }
  }

  /** A new query or column: search after a pause in typing. */
  edit(changes) {
    Object.assign(this, changes);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.run(), SEARCH_MS);
  }

  /** Search again if there is a query (another run was picked). */
  rerun() {
    if (this.query) this.run();
  }

  /**
   * Select the points of the current run whose metadata (in the chosen column, or any) matches the query: the
   * selection every view highlights, counted here and in the selection box. An empty query clears what the last
   * search selected.
   */
  async run() {
    const token = {};
    this.token = token;
    const { state, index } = this.on.page();
    const run = runNamed(index, state.run);
    const query = this.query.trim();
    if (!query || !run || !(run.metadata || []).length) {
      this.result = { count: null, error: null };
      this.render();
      if (this.selection && state.selectedIds === this.selection) this.on.change({ selectedIds: new Set() });
      return;
    }
    let test;
    try {
      test = queryRegExp(query);
    } catch (e) {
      this.result = { count: null, error: `not a regular expression: ${e.message}` };
      this.render();
      return;
    }
    try {
      const [meta, ids] = await Promise.all([this.model.metadata(run.name), this.model.ids(run.name)]);
      if (this.token !== token) return;
      const columns = meta.columns.filter((c) => !this.column || c.name === this.column);
      const matched = new Set();
      for (let i = 0; i < ids.length; i++) {
        if (columns.some((c) => c.values[i] !== null && test.test(V.metaText(c.values[i])))) matched.add(ids[i]);
      }
      this.result = { count: matched.size, error: null };
      this.selection = matched;
      this.render();
      this.on.change({ selectedIds: matched });
    } catch (e) {
      this.on.error(e);
    }
  }

  /** The search box of the current run (nothing when its probe has no metadata); keeps the typing focus. */
  render() {
    const { state, index } = this.on.page();
    const run = runNamed(index, state.run);
    const columns = (run && run.metadata) || [];
    if (!columns.length) { // none, or a damaged metadata file: its one line here, the rest of the run usable
      this.slot.replaceChildren(...(run && run.metadata_error ? [h("section", { class: "search", "data-testid": "search-box" },
        h("h3", { text: "Probe metadata" }), h("p", { class: "warn", text: run.metadata_error }))] : []));
      return;
    }
    const active = document.activeElement;
    const typing = active && this.slot.contains(active) && active.type === "search" ? active.selectionStart : null;
    const box = V.searchBox({
      query: this.query, column: this.column, only: state.only, ...this.result,
      columns: columns.map((c) => ({ name: c.name, label: `${c.name} (${c.kind})` })),
    }, {
      query: (v) => this.edit({ query: v }),
      column: (v) => this.edit({ column: v }),
      only: (v) => this.on.change({ only: v }),
    });
    this.slot.replaceChildren(box);
    if (typing !== null) {
      const input = box.querySelector('input[type="search"]');
      input.focus();
      input.setSelectionRange(typing, typing);
    }
  }
}
