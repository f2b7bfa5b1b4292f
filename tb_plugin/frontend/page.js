// The page of the notebook widget and of a static export (the entry of build.mjs's page bundle): the tab's own App
// (static/index.js) in a document of its own, its requests answered by a transport of the host's instead of fetch.
//
//   widget: the widget's front end (notebook/host.js) puts this page in an iframe and, once it has loaded, posts it
//           {repviz: "connect", initial} with a MessagePort; requests go out through the port as
//           {type: "request", id, route, params, method, headers, body} and come back as {type: "response", id,
//           status, headers, body} (body: an ArrayBuffer, transferred); {type: "push", entries, refresh} stores
//           answers the kernel sent unasked (live updates) and reads the run index again; {type: "set", changes}
//           sets shared choices. The page posts {type: "ready"} and {type: "state", changes} (what changed).
//   export: the document holds <script type="application/json" id="repviz-data">{initial, entries}</script>; every
//           request is answered from its entries (bodies base64), anything else is a one-line 404.
import { start } from "repviz-static/index.js";
import css from "repviz-static/style.css";

/** @typedef {{route: string, params: Object<string, *>, status: number, headers: Object<string, string>,
 *             body: (ArrayBuffer|string|null), once?: boolean}} Answer */

/** Answers known in advance (an export's, or pushed by the kernel), by request. @type {Map<string, Answer>} */
const answers = new Map();

/** The key of a request: its route and its parameters as strings, in name order. */
function keyOf(route, params) {
  return JSON.stringify([route, Object.keys(params).sort().map((name) => [name, String(params[name])])]);
}

/** A Response as fetch would give it. @param {Answer} answer */
function respond({ status, headers, body }) {
  return new Response(status === 304 || status === 204 ? null : body, { status, headers });
}

/** The answer known for a GET, 304 when the page already holds it (its ETag); null when none is known. */
function known(route, params, init) {
  if ((init.method || "GET") !== "GET") return null;
  const key = keyOf(route, params);
  const answer = answers.get(key);
  if (!answer) return null;
  if (answer.once) answers.delete(key); // a pushed run index: the kernel answers the next poll itself
  const tag = new Headers(init.headers || {}).get("If-None-Match");
  if (tag && answer.headers.ETag === tag) return new Response(null, { status: 304, headers: answer.headers });
  return respond(answer);
}

/** Keep `entries` as known answers. @param {Answer[]} entries */
function remember(entries) {
  for (const entry of entries) answers.set(keyOf(entry.route, entry.params), entry);
}

/** A request's headers as a plain object. */
function plainHeaders(headers) {
  return Object.fromEntries(new Headers(headers || {}).entries());
}

/** Changed choices as the host keeps them: the selection as a Float64Array of probe ids. */
function outward(changes) {
  return changes.selectedIds ? { ...changes, selectedIds: Float64Array.from(changes.selectedIds) } : changes;
}

/** The widget: requests through `port` to the widget's front end, and the choices it sets and hears. */
function connect(port, initial) {
  const pending = new Map();
  let next = 0;
  let app = null;
  let last = {};
  let refreshed = Promise.resolve(); // a choice set after a push waits for the index the push brought
  port.onmessage = ({ data }) => {
    if (data.type === "response") {
      const resolve = pending.get(data.id);
      pending.delete(data.id);
      if (resolve) resolve(respond(data));
    } else if (data.type === "push") {
      remember(data.entries);
      if (data.refresh && app) refreshed = app.refresh();
    } else if (data.type === "set" && app) {
      const changes = { ...data.changes };
      if (changes.selectedIds) changes.selectedIds = new Set(changes.selectedIds);
      refreshed.then(() => {
        Object.assign(last, changes); // set by the host: not sent back to it
        app.set(changes);
      });
    }
  };
  const transport = {
    unreachable: "the Python kernel",
    send(route, params, init) {
      const hit = known(route, params, init);
      if (hit) return Promise.resolve(hit);
      const id = ++next;
      const request = { type: "request", id, route, params: Object.fromEntries(Object.entries(params).map(([k, v]) => [k, String(v)])),
        method: init.method || "GET", headers: plainHeaders(init.headers), body: init.body ?? null };
      return new Promise((resolve) => {
        pending.set(id, resolve);
        port.postMessage(request);
      });
    },
  };
  const onState = (state) => {
    const changes = {};
    for (const [name, value] of Object.entries(state)) if (last[name] !== value) changes[name] = value;
    if (!Object.keys(changes).length) return;
    last = { ...state };
    port.postMessage({ type: "state", changes: outward(changes) });
  };
  const init = { ...initial };
  if (init.selectedIds) init.selectedIds = new Set(init.selectedIds);
  last = { selectedIds: init.selectedIds };
  app = start(document.body, { transport, initial: init, onState });
  port.postMessage({ type: "ready", webgl: app !== null });
}

/** A static export: every request answered from the entries embedded in the document. */
function fromFile(embedded) {
  const { initial, entries } = JSON.parse(embedded.textContent);
  remember(entries.map((entry) => ({
    ...entry,
    body: typeof entry.body === "string" && entry.base64 ? Uint8Array.from(atob(entry.body), (c) => c.charCodeAt(0)).buffer : entry.body,
  })));
  const transport = {
    unreachable: "the exported file",
    send(route, params, init) {
      const hit = known(route, params, init);
      if (hit) return Promise.resolve(hit);
      const error = `${route} was not exported with this file (it holds the view as saved); open the log directory ` +
        "in the notebook or in TensorBoard for more";
      return Promise.resolve(new Response(JSON.stringify({ error }), { status: 404, headers: { "Content-Type": "application/json" } }));
    },
  };
  const init = { ...initial };
  if (init.selectedIds) init.selectedIds = new Set(init.selectedIds);
  start(document.body, { transport, initial: init });
}

document.head.append(Object.assign(document.createElement("style"), { textContent: css }));
const embedded = document.getElementById("repviz-data");
if (embedded) {
  fromFile(embedded);
} else {
  window.addEventListener("message", (event) => {
    if (event.source === window.parent && event.data && event.data.repviz === "connect" && event.ports[0]) {
      connect(event.ports[0], event.data.initial || {});
    }
  });
}
