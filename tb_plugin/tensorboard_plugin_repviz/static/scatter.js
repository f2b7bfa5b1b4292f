// A thin wrapper over the vendored regl-scatterplot: points in, colours and selection by index, hover and
// lasso events out. It serialises draws (regl-scatterplot refuses a draw while one is running; the latest
// request wins) and records timings in window.__repvizStats (see index.js). From PERFORMANCE_AT points the main
// plot draws square points (regl-scatterplot's performance mode without its other half, no alpha blending: that
// would draw the points a selection dims, and those fading in or out, opaque or not at all, where selected points
// keep their outline either way); a frame may fade points in and out by w (points.js builds such frames). Small views (the grid's cells) share
// one WebGL context through `sharedRenderer`; `toScreen` maps plot coordinates to canvas pixels so 2-D
// overlays (overlay.js) stay in register with pan and zoom. Every context is made without multisampling
// (`plainRenderer`), and its frames run only while something may change the picture (`framesOnDemand`).
import { prefersReducedMotion } from "./dom.js";
import { createRegl, createRenderer, createScatterplot } from "./vendor/regl-scatterplot.js";

/**
 * @typedef {{x: Float32Array, y: Float32Array, z: Float32Array, w?: Float32Array}} Points
 *   x, y in [-1, 1]; z an index into the palette (the colour); w in [0, 1] the opacity of a frame that fades.
 * @typedef {{transition?: boolean, selected?: number[], visible?: ?number[], fade?: boolean, keepMode?: boolean,
 *            onDrawn?: function(): void}} DrawOptions  fade: w is each point's opacity (0 to 1), not a colour;
 *   keepMode: keep round or square points whatever the count (the frames of one animation)
 */

const TRANSITION_MS = 700; // a layout's move to the next (one frame for a user who prefers reduced motion)
/** From this many points the main view draws square points (the cheaper shader of regl-scatterplot's performance
 * mode). */
export const PERFORMANCE_AT = 50000;
const FADE_LEVELS = 11; // opacities a fading point steps through
const HOVER_COLOR = "#212121";
/** The margin a fitted view keeps on every side: this share of the panel's width or height, plus a point's radius. */
export const FIT_MARGIN = 0.05;

/**
 * Scale n×2 row-major coordinates into [-0.95, 0.95] keeping the aspect ratio; non-finite values go to 0.
 * `centre` and `half` give the transform, so that other coordinates of the same frame (trails, contours) can be
 * mapped the same way with `toPlot`.
 */
export function normalise(coords) {
  const n = coords.length / 2;
  let lo = [Infinity, Infinity];
  let hi = [-Infinity, -Infinity];
  for (let i = 0; i < n; i++) {
    for (let d = 0; d < 2; d++) {
      const v = coords[2 * i + d];
      if (Number.isFinite(v)) {
        if (v < lo[d]) lo[d] = v;
        if (v > hi[d]) hi[d] = v;
      }
    }
  }
  if (!(lo[0] <= hi[0])) {
    lo = [0, 0];
    hi = [1, 1];
  }
  const centre = [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2];
  const half = Math.max(hi[0] - lo[0], hi[1] - lo[1], 1e-12) / 2;
  const x = new Float32Array(n);
  const y = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const cx = coords[2 * i];
    const cy = coords[2 * i + 1];
    x[i] = Number.isFinite(cx) ? (0.95 * (cx - centre[0])) / half : 0;
    y[i] = Number.isFinite(cy) ? (0.95 * (cy - centre[1])) / half : 0;
  }
  return { x, y, centre, half };
}

/** Plot coordinates of a point (cx, cy) in the frame that `normalise` returned `frame` for. */
export function toPlot(frame, cx, cy) {
  return [(0.95 * (cx - frame.centre[0])) / frame.half, (0.95 * (cy - frame.centre[1])) / frame.half];
}

/**
 * A regl-scatterplot renderer on a WebGL context without multisampling. regl-scatterplot asks for an antialiased
 * context, but it draws points, outlines and lasso into a float framebuffer and puts only one full-screen triangle
 * into the context itself, so multisampling changes no pixel; it costs a 4-sample clear and resolve of the whole
 * buffer every frame (a third of a small frame in software WebGL; docs/MEASUREMENTS.md). A canvas
 * keeps the attributes of its first getContext call, so regl-scatterplot's own call gets this context.
 * The caller sizes the buffer (`resize`): regl-scatterplot follows the window only for renderers it makes itself.
 */
function plainRenderer() {
  const canvas = document.createElement("canvas");
  canvas.getContext("webgl", { antialias: false, preserveDrawingBuffer: true });
  return createRenderer({ canvas, regl: framesOnDemand(createRegl(canvas)) });
}

/** Animation frames a plot gets after the last thing that could change its picture (about a second). */
const LINGER_FRAMES = 60;
/** What can change a picture without a call into its plot: input regl-scatterplot and its camera listen to. */
const WAKING_EVENTS = ["pointerdown", "pointermove", "pointerup", "mousedown", "mousemove", "mouseup", "mouseenter",
  "mouseleave", "click", "dblclick", "wheel", "keydown", "keyup", "touchstart", "touchmove", "touchend", "blur",
  "resize", "orientationchange"];
/** The frame callbacks of every renderer of the page, run together while the page is awake. */
const frameLoop = { callbacks: new Set(), framesLeft: 0, request: 0, listening: false };

/** Run the renderers' frame callbacks for the next LINGER_FRAMES animation frames. */
function wakeFrames() {
  frameLoop.framesLeft = LINGER_FRAMES;
  if (!frameLoop.request && frameLoop.callbacks.size) frameLoop.request = requestAnimationFrame(runFrame);
}

function runFrame() {
  frameLoop.request = 0;
  frameLoop.framesLeft -= 1;
  for (const callback of [...frameLoop.callbacks]) callback(); // a frame drawn wakes the loop again
  if (!frameLoop.request && frameLoop.framesLeft > 0 && frameLoop.callbacks.size) {
    frameLoop.request = requestAnimationFrame(runFrame);
  }
}

/**
 * `regl` whose `frame` callbacks run only while the page is awake (`wakeFrames`). regl-scatterplot's renderer asks
 * for a callback on every animation frame for as long as it lives, and most of those frames draw nothing: an idle
 * tab kept its page and the (software) GPU process at about 5 % of a core. A plot wakes the loop when it is called
 * (`awake`) and on every frame it draws (an animation keeps it awake), the page on any input and resize; a second
 * after the last of these the loop sleeps.
 */
function framesOnDemand(regl) {
  if (!frameLoop.listening) {
    for (const type of WAKING_EVENTS) window.addEventListener(type, wakeFrames, { capture: true, passive: true });
    frameLoop.listening = true;
  }
  const frame = (callback) => {
    // as regl's own loop: its viewport and clock brought up to date, then the callback, then its calls flushed
    const run = () => {
      regl.poll();
      callback();
      regl._gl.flush();
    };
    frameLoop.callbacks.add(run);
    wakeFrames();
    return { cancel: () => frameLoop.callbacks.delete(run) };
  };
  return new Proxy(regl, { get: (target, name) => (name === "frame" ? frame : target[name]) });
}

/** Calls of a regl-scatterplot that may change its picture wake the frame loop; reading it does not. */
const QUIET_CALLS = new Set(["get", "getScreenPosition", "subscribe", "unsubscribe", "destroy"]);

/** `plot` waking the frame loop on every call that may change what it draws. */
function awake(plot) {
  return new Proxy(plot, {
    get(target, name) {
      const value = target[name];
      if (typeof value !== "function" || QUIET_CALLS.has(name)) return value;
      return (...args) => {
        wakeFrames();
        return value.apply(target, args);
      };
    },
  });
}

/**
 * One WebGL context for many small scatters, drawing into a buffer the size of one cell (`resize`), each plot
 * copying its picture into its own 2-D canvas.
 */
export function sharedRenderer() {
  return plainRenderer();
}

/** [xlo, xhi, ylo, yhi] of the finite coordinates of `points` (null when there are none). */
function extentOf(points) {
  let [xlo, xhi, ylo, yhi] = [Infinity, -Infinity, Infinity, -Infinity];
  const { x, y } = points;
  for (let i = 0; i < x.length; i++) {
    if (Number.isFinite(x[i]) && Number.isFinite(y[i])) {
      if (x[i] < xlo) xlo = x[i];
      if (x[i] > xhi) xhi = x[i];
      if (y[i] < ylo) ylo = y[i];
      if (y[i] > yhi) yhi = y[i];
    }
  }
  return xlo <= xhi ? [xlo, xhi, ylo, yhi] : null;
}

/** The box holding boxes `a` and `b` ([xlo, xhi, ylo, yhi]; `b` may be null). */
function union(a, b) {
  return b ? [Math.min(a[0], b[0]), Math.max(a[1], b[1]), Math.min(a[2], b[2]), Math.max(a[3], b[3])] : a;
}

/** Point size in CSS pixels that keeps n points legible without one blot. */
function pointSizeFor(n) {
  return Math.max(2, Math.min(7, Math.round(180 / Math.sqrt(Math.max(n, 1)))));
}

/** One scatter plot over regl-scatterplot: serialised draws, colours, selection, mouse modes. */
export class Scatter {
  /**
   * @param {HTMLCanvasElement} canvas
   * @param {{onHover: function(?number): void, onSelect: function(number[]): void, onView?: function(): void}} handlers
   * @param {{renderer?: object, small?: boolean, inset?: function(): {top: number, bottom: number}}} options
   *   `renderer`: a `sharedRenderer()`; `small`: a grid cell (smaller points, a reticle on the hovered point, no
   *   frame statistics); `inset`: CSS pixels at the top and bottom of the canvas that tools cover, which a fitted
   *   view leaves free
   */
  constructor(canvas, handlers, { renderer, small = false, inset = null } = {}) {
    this.canvas = canvas;
    this.n = 0;
    this.small = small;
    this._inset = inset;
    this._extent = null; // [xlo, xhi, ylo, yhi] of the points drawn last (plot coordinates)
    this._extra = null; // the same of what an overlay draws over them (`include`), until the next draw
    this._fitView = null; // the camera of the last fit: while the camera is still there, a resize fits again
    this._pointSize = 0;
    // A fitted view stays fitted when the canvas changes size (window, side panel, a grid of other shape).
    this._resizes = new ResizeObserver(() => {
      wakeFrames(); // regl-scatterplot follows its canvas's size on the next frame
      if (this._onResize) this._onResize();
      if (this._isFitted()) this.fit();
    });
    this._resizes.observe(canvas);
    this.fast = false; // drawing square points (PERFORMANCE_AT)
    this._handlers = handlers;
    this._ownRenderer = !renderer; // a plot of its own: a renderer the window's size, kept across _create
    this._renderer = renderer ?? plainRenderer();
    if (this._ownRenderer) {
      // A buffer that covers the canvas: regl-scatterplot's own default is the window capped at the screen's
      // size, and a plot copies the centre of the buffer, so a canvas wider than the screen (a headless browser's
      // 800 px, a page zoomed out) lost its left and right edges, points at the extremes cut in half.
      this._onResize = () => this._renderer.resize(Math.max(window.innerWidth, canvas.clientWidth),
        Math.max(window.innerHeight, canvas.clientHeight));
      this._onResize();
      window.addEventListener("resize", this._onResize);
      this._renderer.onFrame(() => (this._frameStart = performance.now())); // before the plot's: made first
    }
    this._settings = {}; // what `set` gave the plot, given again to a plot made anew
    this._pending = null; // the latest draw request waiting for the running one
    this._running = false;
    this._create();
  }

  /** Make the regl-scatterplot (anew when switching to or from square points, which it takes only when created). */
  _create() {
    const { canvas, small, _handlers: handlers } = this;
    this._plot = awake(createScatterplot({
      renderer: this._renderer,
      renderPointsAsSquares: this.fast,
      showReticle: small,
      reticleColor: [0.96, 0.49, 0, 0.55],
      canvas,
      width: "auto",
      height: "auto",
      backgroundColor: [1, 1, 1, 1],
      pointOutlineWidth: 2,
      pointSizeSelected: 1,
      lassoColor: [0.96, 0.49, 0, 1],
      lassoMinDelay: 5,
      opacityInactiveScale: 0.35,
      spatialIndexUseWorker: false, // TensorBoard's CSP blocks blob: workers
      deselectOnDblClick: false,
      deselectOnEscape: false,
      zDataType: "categorical",
      wDataType: "continuous",
    }));
    this._plot.subscribe("drawing", wakeFrames); // a frame drawn: the next may draw too (an animation)
    this._plot.subscribe("pointOver", (i) => handlers.onHover(i));
    this._plot.subscribe("pointOut", () => handlers.onHover(null));
    this._plot.subscribe("select", ({ points }) => handlers.onSelect(Array.from(points)));
    this._plot.subscribe("deselect", () => handlers.onSelect([]));
    if (handlers.onView) this._plot.subscribe("view", () => handlers.onView());
    if (!small) {
      this._plot.subscribe("transitionStart", () => this._startFrameClock());
      this._plot.subscribe("transitionEnd", () => this._stopFrameClock());
      if (this._ownRenderer) this._plot.subscribe("drawing", () => this._frameDrawn());
    }
    this._plot.set(this._settings);
  }

  /** Set regl-scatterplot options, kept for a plot made anew. */
  _set(options) {
    Object.assign(this._settings, options);
    this._plot.set(options);
  }

  /**
   * Draw `points`, animating from the current layout when `transition` and the length matches.
   * Resolves when this request (or one that replaced it) has been drawn.
   * @param {Points} points
   * @param {DrawOptions} options
   */
  draw(points, options = {}) {
    return new Promise((resolve) => {
      if (this._pending) this._pending.resolve();
      this._pending = { points, options, resolve };
      if (!this._running) this._drain();
    });
  }

  async _drain() {
    this._running = true;
    while (this._pending) {
      const { points, options, resolve } = this._pending;
      this._pending = null;
      const n = points.x.length;
      const fast = options.keepMode ? this.fast : !this.small && n >= PERFORMANCE_AT;
      if (fast !== this.fast) {
        this.fast = fast;
        this._plot.destroy();
        this._create();
        this.n = 0; // a new plot: nothing to animate from
        this._fitView = null; // and a camera of its own: fitted anew
      }
      const transition = Boolean(options.transition) && n === this.n && n > 0;
      const opacity = n > 20000 ? 0.6 : 0.85;
      const fitted = this._isFitted();
      this._extent = extentOf(points);
      this._extra = null;
      if (n !== this.n || Boolean(options.fade) !== Boolean(this._settings.opacityBy)) {
        this._pointSize = pointSizeFor(n) * (this.small ? 0.6 : 1);
        this._set({
          pointSize: this._pointSize,
          opacity: options.fade ? Array.from({ length: FADE_LEVELS }, (_, i) => (opacity * i) / (FADE_LEVELS - 1)) : opacity,
          opacityBy: options.fade ? "valueB" : null,
        });
      }
      this.n = n;
      if (fitted) this.fit(); // a view the user panned or zoomed stays where it is
      try {
        await this._plot.draw(points, {
          transition,
          transitionDuration: prefersReducedMotion() ? 1 : TRANSITION_MS, // 1 ms: the new layout at the next frame
          zDataType: "categorical",
          wDataType: "continuous",
          select: options.selected ?? [],
          filter: options.visible ?? undefined,
          preventFilterReset: false,
        });
        if (options.onDrawn) options.onDrawn();
      } catch (e) {
        console.error("repviz: draw failed", e);
      }
      resolve();
    }
    this._running = false;
  }

  /**
   * Colours: `palette[z]` per point.
   * @param {string[]} palette hex colours
   */
  setColors(palette) {
    // Lists as long as the palette: selected points keep their colour, the hovered one turns dark.
    this._set({
      colorBy: "valueA",
      pointColor: palette,
      pointColorActive: palette,
      pointColorHover: palette.map(() => HOVER_COLOR),
    });
  }

  /** Select points by index without firing the select event (selection is owned by the page). */
  select(indices) {
    if (indices.length) this._plot.select(indices, { preventEvent: true });
    else this._plot.deselect({ preventEvent: true });
  }

  /** Show only `indices` (null: all). */
  filter(indices) {
    if (indices) this._plot.filter(indices, { preventEvent: true });
    else this._plot.unfilter({ preventEvent: true });
  }

  /** "pan" (drag pans, wheel zooms), "lasso" (free form) or "rectangle". */
  setMode(mode) {
    if (mode === "pan") this._set({ mouseMode: "panZoom" });
    else this._set({ mouseMode: "lasso", lassoType: mode === "rectangle" ? "rectangle" : "freeform" });
  }

  /** Back to the whole picture: every point drawn inside the canvas with a margin (`fit`). */
  reset() {
    this.fit();
  }

  /**
   * Show the points drawn last whole, whatever the canvas's aspect ratio: their bounding box scaled to fit both
   * the width and the height of the canvas (less the tools' `inset`) with FIT_MARGIN and a point's radius on
   * every side, centred. The camera maps plot (x, y) to clip space as (s x + tx) / aspect, s y + ty.
   */
  fit() {
    const width = this.canvas.clientWidth;
    const height = this.canvas.clientHeight;
    if (!(width > 0 && height > 0)) return;
    const [xlo, xhi, ylo, yhi] = union(this._extent || [-1, 1, -1, 1], this._extra);
    const inset = this._inset ? this._inset() : { top: 0, bottom: 0 };
    const aspect = width / height;
    const scaleFor = (radius) => {
      const mx = FIT_MARGIN * width + radius;
      const my = FIT_MARGIN * height + radius;
      const spanX = (2 * (width - 2 * mx)) / width; // clip-space width left free
      const spanY = (2 * (height - 2 * my - inset.top - inset.bottom)) / height;
      return Math.max(Math.min((spanX * aspect) / Math.max(xhi - xlo, 1e-9), spanY / Math.max(yhi - ylo, 1e-9)), 1e-6);
    };
    // regl-scatterplot draws points larger when zoomed in (by asinh(s) / asinh(1)): the margin grows with them
    const radius = this._pointSize / 2 + 2; // with a selected point's outline
    let s = scaleFor(radius);
    if (s > 1) s = scaleFor(radius * (Math.asinh(s) / Math.asinh(1)));
    const shiftY = (inset.bottom - inset.top) / height; // clip-space centre of the free band
    const view = new Float32Array([s, 0, 0, 0, 0, s, 0, 0, 0, 0, 1, 0,
      (-s * (xlo + xhi)) / 2, (-s * (ylo + yhi)) / 2 + shiftY, 0, 1]);
    if (this._fitView && this._isFitted() && view.every((a, i) => a === this._fitView[i])) return; // no change
    this._fitView = view;
    this._plot.view(view);
  }

  /** Fit `extent` ([xlo, xhi, ylo, yhi] in plot coordinates) too, e.g. points an overlay draws over the drawn ones,
   * until the next draw; a fitted view fits again. */
  include(extent) {
    const fitted = this._isFitted();
    this._extra = extent;
    if (fitted) this.fit();
  }

  /** Whether the camera is where the last `fit` put it (true before any fit). */
  _isFitted() {
    if (!this._fitView) return true;
    const v = this._plot.get("cameraView");
    return this._fitView.every((a, i) => Math.abs(a - v[i]) <= 1e-5 * Math.max(1, Math.abs(a)));
  }

  /** Screen position [x, y] (CSS pixels in the canvas) of point `index`. */
  screenPosition(index) {
    return this._plot.getScreenPosition(index);
  }

  /**
   * Canvas position [x, y] (CSS pixels) of plot coordinates (x, y) in [-1, 1] under the current pan and zoom:
   * regl-scatterplot's projection (1/aspect, 1) times the camera's view matrix, as its getScreenPosition does.
   */
  toScreen(x, y) {
    const v = this._plot.get("cameraView"); // column-major 4×4
    const width = this.canvas.clientWidth;
    const height = this.canvas.clientHeight;
    const px = (v[0] * x + v[4] * y + v[12]) / (width / height);
    const py = v[1] * x + v[5] * y + v[13];
    return [(width * (px + 1)) / 2, height * (0.5 - py / 2)];
  }

  /** Highlight point `index` (null: none) as if hovered, without firing the hover event. */
  hover(index) {
    this._plot.hover(index === null ? -1 : index, { preventEvent: true, showReticleOnce: index !== null });
  }

  /** Free the plot (a shared renderer stays). */
  destroy() {
    this._pending = null;
    this._resizes.disconnect();
    this._plot.destroy();
    if (this._ownRenderer) {
      window.removeEventListener("resize", this._onResize);
      this._renderer.destroy();
    }
  }

  _startFrameClock() {
    const stats = window.__repvizStats;
    let last = null;
    const times = [];
    stats.transitionFrames = times;
    stats.transitionFrameMs = [];
    const tick = (now) => {
      if (last !== null) times.push(now - last);
      last = now;
      if (this._clock) this._clock = requestAnimationFrame(tick);
    };
    this._clock = requestAnimationFrame(tick);
  }

  /** While animating: how long the renderer took from the start of this frame to its picture in the canvas (the
   * frame intervals round that up to whole display refreshes). */
  _frameDrawn() {
    if (this._clock) window.__repvizStats.transitionFrameMs.push(performance.now() - this._frameStart);
  }

  _stopFrameClock() {
    cancelAnimationFrame(this._clock);
    this._clock = 0;
    window.__repvizStats.transitions += 1;
  }
}
