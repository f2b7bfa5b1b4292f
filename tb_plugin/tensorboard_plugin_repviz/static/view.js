// The interface every view of the Repviz tab implements (types only). index.js keeps a registry of views, holds the
// state they share and calls each one through this interface; a view never sees the page's App, only the data
// it is given (a Page), the Model (every fetch) and the events it reports.

/**
 * What every view is given: which view is shown, the state the views share, the run index and the page's
 * background jobs. A new object each time something changed; unchanged parts keep their identity, so a view
 * compares with the last page it was given to do only what changed.
 * @typedef {{
 *   view: string,
 *   state: State,
 *   index: import("./model.js").Index,
 *   jobs: import("./model.js").Job[],
 *   since: number,
 * }} Page  `view`: the name of the view shown; `since`: performance.now() of the last choice (for timings)
 *
 * @typedef {{
 *   run: ?string, layer: ?string, method: ?string, step: ?number,
 *   colorBy: string, mode: string, hidden: Set<number>, selectedIds: Set<number>,
 *   hover: ?PointRef, pair: ?Array<{run: string, layer: string, step?: number}>,
 * }} State  the shared state: the chosen representation (the pickers), the colour mode, the mouse mode, the
 *   hidden categories, the selection by probe id, the probe point under the mouse and the representations the
 *   Runs view shows side by side when they were opened together (null: the runs it picks)
 *
 * @typedef {{run: string, index: number, step: number}} PointRef  a probe point (index in probe order) of a run
 *
 * @typedef {{
 *   change: function(Partial<State>): void,
 *   open: function(import("./choice.js").Choice): void,
 *   show: function(string, Partial<State>): void,
 *   select: function(Set<number>): void,
 *   hover: function(?PointRef): void,
 *   card: function(HTMLElement): void,
 *   job: function(function(): Promise<import("./model.js").Job>, object, function(import("./model.js").Job): void=): void,
 *   error: function(?Error): void,
 * }} ViewEvents  what a view reports: `change` shared state; `open` a representation in the main view;
 *   `show(name, changes)` view `name` after changing the shared state (e.g. a pair in the Runs view); `select` probe ids; `hover` a probe point (null: clear the hover card); `card` a card of its own in the hover
 *   slot (e.g. a preview); `job(start, describe, onDone)` a background job that `start()` asks the server for,
 *   described by `describe` (e.g. {kind: "meta"}) until it answers, `onDone(job)` once it has finished; `error`
 *   a failure to show (null: dismiss)
 *
 * @typedef {{info: HTMLElement, legend: HTMLElement, panels: HTMLElement}} SideSlots  the page's shared slots
 *   above the stage and beside it; a view writes `panels` only while shown, `info` and `legend` only if its
 *   `chrome` shows them
 *
 * @typedef {{snapshots: boolean, info: boolean, legend: boolean, selection: boolean, run: boolean, layer: boolean,
 *   method: boolean, colour: boolean}} Chrome  which of the page's shared parts (snapshot bar, info line, legend,
 *   selection box, the header's Run, Layer, Method and Colour controls) stay visible while the view is shown: a
 *   control the view does not read is hidden
 *
 * @typedef {Object} View
 * @property {string} name  the view's value in the view switch and in the page's data-view attribute
 * @property {string} label  the switch's text
 * @property {string} title  the switch's tooltip
 * @property {Chrome} chrome
 * @property {string} [colourLabel]  the header's Colour control's label while the view is shown, where it colours
 *   a part of the view only (the Similarity view's pair scatters, the Meta map's previews)
 * @property {string} [methodLabel]  the header's Method control's label while the view is shown, where the method
 *   draws a part of the view only (the Meta map's previews)
 * @property {function(HTMLElement, SideSlots): void} mount  build into its own element in the stage
 * @property {function(Page): (void|Promise<void>)} render  called with every new page, shown or not: show it,
 *   doing only what changed since the last one (a hidden view usually just keeps the page until it is shown)
 * @property {function(): void} resize  the window's size changed
 * @property {function(): HTMLCanvasElement[]} canvases  the picture as drawn, layers bottom first (for export)
 */

export {};
