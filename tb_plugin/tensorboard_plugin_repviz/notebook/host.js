// The front end of repviz's notebook widget (an anywidget module; widget.py prepends `const PAGE = "..."`, the
// page bundle page.js). Each view of the widget is an iframe of its own holding the Repviz tab's page, so two
// widgets in one notebook share no document, style or WebGL state; the page's requests come through a
// MessagePort and go to the kernel as custom messages, answered with the plugin's own routes; the answers come
// back with their bodies as binary buffers. The shared choices are the model's traits: `selected` (probe ids,
// float64 bytes), `hovered`, `step`, `run`, `layer`, `method`, `view`.
//
// DOM hooks (tests, the lab's browser tests): the output element gets the class "repviz-widget"; its iframe has the
// class "repviz-frame" and data-ready="1" once the page has started (data-webgl="0" when the browser refused
// WebGL); inside the frame the page is the tab's, with window.__repvizStats as the tab has it.

const CHOICES = ["view", "run", "layer", "method", "step", "hovered"];

/** The `selected` trait (float64 bytes: a DataView from the kernel) as a Float64Array of probe ids. */
function idsOf(value) {
  if (!value) return new Float64Array(0);
  if (ArrayBuffer.isView(value)) {
    return new Float64Array(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
  }
  if (value instanceof ArrayBuffer) return new Float64Array(value.slice(0));
  return Float64Array.from(value);
}

/** A copy of a message buffer (DataView) as an ArrayBuffer of its own, to transfer to the page. */
function bytesOf(view) {
  return view ? view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength) : null;
}

/** The page's document: the bundle inline (nothing is fetched). */
function pageDocument() {
  return `<!doctype html><html><head><meta charset="utf-8"><title>repviz</title></head><body><script type="module">${PAGE}<\/script></body></html>`;
}

function render({ model, el }) {
  const viewId = Math.random().toString(36).slice(2);
  const frame = document.createElement("iframe");
  frame.className = "repviz-frame";
  frame.title = "repviz";
  frame.style.cssText = "display:block;width:100%;border:1px solid #e0e0e0;border-radius:4px;box-sizing:border-box";
  const setHeight = () => {
    frame.style.height = `${model.get("height")}px`;
  };
  setHeight();
  el.classList.add("repviz-widget");
  el.append(frame);

  let port = null;
  let fromPage = false; // the model is being set from the page: its change events are not sent back
  const post = (message, transfer = []) => port && port.postMessage(message, transfer);

  const initial = () => {
    const out = { selectedIds: Array.from(idsOf(model.get("selected"))) };
    for (const name of CHOICES) if (model.get(name) !== null && model.get(name) !== undefined) out[name] = model.get(name);
    if (out.hovered === undefined) delete out.hovered;
    const runs = model.get("_runs");
    if (runs && runs.length) out.runs = runs;
    return out;
  };

  const fromPort = ({ data }) => {
    if (data.type === "request") {
      const { type, id, ...request } = data;
      model.send({ type: "request", id: `${viewId}:${id}`, ...request });
    } else if (data.type === "state") {
      fromPage = true;
      try {
        for (const [name, value] of Object.entries(data.changes)) {
          if (name === "selectedIds") model.set("selected", new DataView(value.buffer, value.byteOffset, value.byteLength));
          else if (CHOICES.includes(name)) model.set(name, value);
        }
      } finally {
        fromPage = false;
      }
      model.save_changes();
    } else if (data.type === "ready") {
      frame.dataset.ready = "1";
      frame.dataset.webgl = data.webgl ? "1" : "0";
    }
  };

  // A frame loads again when the notebook moves it in the document: every load gets a new port.
  const connect = () => {
    if (port) port.close();
    const channel = new MessageChannel();
    port = channel.port1;
    port.onmessage = fromPort;
    delete frame.dataset.ready;
    frame.contentWindow.postMessage({ repviz: "connect", initial: initial() }, "*", [channel.port2]);
  };
  frame.addEventListener("load", connect);
  frame.srcdoc = pageDocument();

  const fromKernel = (msg, buffers) => {
    if (msg.type === "response") {
      const [owner, id] = String(msg.id).split(":");
      if (owner !== viewId) return; // another view of the same widget asked
      const body = bytesOf(buffers && buffers[0]);
      post({ type: "response", id: Number(id), status: msg.status, headers: msg.headers, body }, body ? [body] : []);
    } else if (msg.type === "push") {
      const entries = msg.entries.map((entry, i) => ({ ...entry, body: bytesOf(buffers[i]) }));
      post({ type: "push", entries, refresh: msg.refresh }, entries.map((e) => e.body).filter(Boolean));
    }
  };
  model.on("msg:custom", fromKernel);

  const listeners = CHOICES.map((name) => [`change:${name}`, () => {
    if (!fromPage) post({ type: "set", changes: { [name]: model.get(name) } });
  }]);
  listeners.push(["change:selected", () => {
    if (!fromPage) post({ type: "set", changes: { selectedIds: Array.from(idsOf(model.get("selected"))) } });
  }]);
  listeners.push(["change:height", setHeight]);
  for (const [event, callback] of listeners) model.on(event, callback);

  return () => {
    model.off("msg:custom", fromKernel);
    for (const [event, callback] of listeners) model.off(event, callback);
    if (port) port.close();
  };
}

export default { render };
