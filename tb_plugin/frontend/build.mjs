// Build the browser code that ships with repviz, with esbuild:
//  1. the vendored library of the Repviz tab: regl-scatterplot and its dependencies bundled into ONE ES module,
//     plus one text file with the licence of every package that ended up in it;
//  2. the page of the notebook widget and of a static export (page.js here): the tab's own modules (static/, the
//     vendored library above included) in one minified script, its licences appended as comments, and a banner
//     naming the checksum of its sources (tests/test_frontend_build.py compares it without rebuilding).
//
//   npm ci && node build.mjs [vendor_out] [widget_out]
//     vendor_out defaults to ../tensorboard_plugin_repviz/static/vendor, widget_out to
//     ../tensorboard_plugin_repviz/notebook; the tab's sources are read from ../tensorboard_plugin_repviz/static, or
//     from $REPVIZ_STATIC (the test's rebuild in a temporary directory).
//
// The output depends only on package-lock.json, this file, page.js and the tab's sources (no timestamps, no
// absolute paths, sorted licences), so tests/test_frontend_build.py can rebuild into a temporary directory and
// compare bytes. Edit static/ or page.js, and run this again: the widget's page is a copy of the tab.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outDir = resolve(process.argv[2] ?? join(here, "..", "tensorboard_plugin_repviz", "static", "vendor"));
const widgetDir = resolve(process.argv[3] ?? join(here, "..", "tensorboard_plugin_repviz", "notebook"));
const staticDir = resolve(process.env.REPVIZ_STATIC ?? join(here, "..", "tensorboard_plugin_repviz", "static"));
const modules = join(here, "node_modules");

// The names the page imports; everything else regl-scatterplot exports stays out of the bundle's API.
const entry = 'export { default as createScatterplot, createRegl, createRenderer, checkSupport } from "regl-scatterplot";\n';

const result = await build({
  stdin: { contents: entry, resolveDir: here, sourcefile: "entry.js", loader: "js" },
  bundle: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  minify: true,
  legalComments: "none", // the licences go, complete, into LICENSES.txt beside the bundle
  charset: "utf8",
  metafile: true,
  write: false,
  logLevel: "warning",
});

/** The directory of package `name` as Node resolves it from directory `from` (nested copies first). */
function packageDir(name, from) {
  for (let dir = from; dir.startsWith(modules); dir = dirname(dir)) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
  }
  const candidate = join(modules, name);
  if (existsSync(join(candidate, "package.json"))) return candidate;
  throw new Error(`package ${name} is not installed; run npm ci first.`);
}

// regl-scatterplot's dist file already inlines most of its dependencies, so the bundle's metafile names only
// a few packages: the licences follow its whole runtime dependency closure instead.
const packages = new Map();
const pending = [packageDir("regl-scatterplot", here)];
while (pending.length) {
  const dir = pending.pop();
  const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  if (packages.has(meta.name)) continue;
  packages.set(meta.name, { dir, meta });
  for (const dep of Object.keys(meta.dependencies ?? {})) pending.push(packageDir(dep, dir));
}
for (const input of Object.keys(result.metafile.inputs)) {
  const at = input.lastIndexOf("node_modules/");
  const name = at < 0 ? null : input.slice(at + 13).split("/").slice(0, input.slice(at + 13).startsWith("@") ? 2 : 1).join("/");
  if (name && !packages.has(name)) throw new Error(`${name} is bundled but is no dependency of regl-scatterplot.`);
}

const names = [...packages.keys()].sort();
const sections = names.map((name) => {
  const { dir, meta } = packages.get(name);
  const file = readdirSync(dir).sort().find((f) => /^(licen[cs]e|copying)(\.(md|txt))?$/i.test(f));
  if (!file) throw new Error(`${name} ships no licence file; add it by hand before vendoring it.`);
  const text = readFileSync(join(dir, file), "utf8").replace(/\r\n/g, "\n").trim();
  return `${"=".repeat(78)}\n${name} ${meta.version} (${meta.license})\n${"=".repeat(78)}\n\n${text}\n`;
});

// Code that regl-scatterplot copied into its own sources carries its notice in a comment; the bundle is
// minified without comments, so those notices are kept here.
const dist = readFileSync(join(packages.get("regl-scatterplot").dir, "dist", "regl-scatterplot.esm.js"), "utf8");
const notices = [...new Set([
  ...[...dist.matchAll(/\/\*\*(?:(?!\*\/)[\s\S])*?@license[\s\S]*?\*\//g)].map((m) => m[0].replace(/^\s+/gm, " ").trim()),
  ...[...dist.matchAll(/^\/\/.*(?:Copyright|License).*$/gm)].map((m) => m[0].trim()),
])];
sections.push(`${"=".repeat(78)}\nNotices of code embedded in regl-scatterplot's own distribution\n${"=".repeat(78)}\n\n` +
  notices.join("\n\n") + "\n");

const versions = names.map((name) => `${name}@${packages.get(name).meta.version}`);
const banner = `// regl-scatterplot bundle for the Repviz TensorBoard tab; built by tb_plugin/frontend/build.mjs.\n` +
  `// Contains ${versions.join(", ")}. Licences: LICENSES.txt beside this file.\n`;

const licences = "Licences of the third-party code bundled in regl-scatterplot.js (generated by tb_plugin/frontend/build.mjs).\n\n" +
  sections.join("\n");
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "regl-scatterplot.js"), banner + result.outputFiles[0].text);
writeFileSync(join(outDir, "LICENSES.txt"), licences);
console.log(`wrote ${join(outDir, "regl-scatterplot.js")} (${versions.length} packages)`);

// --- 2. the widget's page ----------------------------------------------------------------------------------------

/** Every file under `dir`, as paths relative to it with "/" separators, sorted. */
function filesUnder(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath ?? e.path, e.name)).split(sep).join("/")).sort();
}

// What the page is made of, hashed as tests/test_frontend_build.py hashes it: each file of static/ (path, NUL,
// bytes, NUL), then page.js.
const digest = createHash("sha256");
for (const name of filesUnder(staticDir)) digest.update(`${name}\0`).update(readFileSync(join(staticDir, name))).update("\0");
digest.update("page.js\0").update(readFileSync(join(here, "page.js")));
const sources = digest.digest("hex");

const page = await build({
  entryPoints: [join(here, "page.js")],
  bundle: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  minify: true,
  legalComments: "none", // the licences are appended below, complete
  charset: "utf8",
  loader: { ".css": "text" },
  write: false,
  logLevel: "warning",
  plugins: [{
    name: "repviz-static",
    setup(b) {
      b.onResolve({ filter: /^repviz-static\// }, (args) => ({ path: join(staticDir, args.path.slice("repviz-static/".length)) }));
    },
  }],
});
const pageCode = page.outputFiles[0].text;
// The page is inlined in an HTML document (the widget's iframe, an export): nothing in it may end that script.
if (/<\/script|<!--/i.test(pageCode)) throw new Error("the page bundle contains </script or <!--; it cannot be inlined.");
const pageBanner = "// The page of repviz's notebook widget and static export: the Repviz tab's modules (MIT, repviz) bundled by\n" +
  `// tb_plugin/frontend/build.mjs with ${versions.join(", ")} (licences at the end).\n` +
  `// sources sha256 ${sources}\n`;
const licenceComments = licences.split("\n").map((line) => (line ? `// ${line}` : "//")).join("\n");
mkdirSync(widgetDir, { recursive: true });
writeFileSync(join(widgetDir, "page.js"), `${pageBanner}${pageCode}${licenceComments}\n`);
console.log(`wrote ${join(widgetDir, "page.js")}`);
