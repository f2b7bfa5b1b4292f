"""The ``repviz`` command: ``info`` (what a log directory holds), and the jobs built on it.

Each subcommand is one ``_add_<name>`` function that declares its arguments and one ``_run_<name>`` that calls
the library; heavy modules are imported inside the ``_run_`` functions so ``repviz --help`` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import warnings
from collections.abc import Iterator

from .distributed import ClusterFailed, DaskExecutor, MissingExtra, SchedulerUnreachable, connect, dashboard
from .meta.options import EMBEDDINGS, METRICS, SUBSETS, TRANSFORMS
from .metadata import info_line
from .methods import ALIGN_MODES, DEFAULT_METHOD
from .similarity.options import KERNELS
from .similarity.registry import DEFAULT_MEASURE, MEASURES
from .store import META_RESULT, PLACED, NotFoundError, is_inside, not_a_directory, open_logdir, path_key
from .version import install_hint
from .workers import Terminated, sigterm_unwinds


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _add_out(p) -> None:
    p.add_argument("--out", metavar="DIR",
                   help="write results (embeddings, meta-SNE maps) under DIR instead of the log directory, e.g. "
                        "when it is read-only; results already in DIR or in the log directory are read from both")


def _add_scheduler(p) -> None:
    p.add_argument("--scheduler", metavar="ADDR|local[N]",
                   help="run on a Dask cluster: a scheduler address (tcp://host:8786) or local[N] for N worker "
                        "processes here; the log directory must be on storage every worker sees at the same path "
                        f"(needs the dask extra: {install_hint('dask')})")


@contextlib.contextmanager
def _cluster(args) -> Iterator[DaskExecutor | None]:
    """The executor on the Dask cluster of ``--scheduler`` (None without it), its dashboard link printed on
    stderr."""
    if not args.scheduler:
        yield None
        return
    with connect(args.scheduler) as client:
        link = dashboard(client)
        print(f"repviz {args.command}: Dask cluster with {len(client.scheduler_info()['workers'])} worker(s)"
              f"{f', dashboard {link}' if link else ''}", file=sys.stderr, flush=True)
        yield DaskExecutor(client)


def _add_info(sub) -> None:
    p = sub.add_parser("info", help="list runs, layers, shapes, snapshots and sizes on disk")
    p.add_argument("logdir", help="a log directory written by repviz.ActivationLogger")
    p.add_argument("--all", action="store_true",
                   help="list every run, layer, embedding and cross-run result (by default runs that recorded "
                        "nothing and long lists are summed up in one line each)")
    p.add_argument("--verbose", action="store_true",
                   help="also the keys of embeddings (method-hash) and the files of cross-run results")
    _add_out(p)
    p.set_defaults(func=_run_info)


#: How many runs (with snapshots), layers of a run, embedding keys of a run and cross-run results ``repviz info``
#: lists before it sums up the rest in one line (``--all`` lists everything).
_SHOWN = {"runs": 50, "layers": 12, "keys": 6, "results": 20}


def _run_info(args) -> int:
    logdir = open_logdir(args.logdir, args.out)
    shown = {what: None if args.all else n for what, n in _SHOWN.items()}
    empty, listed = [], []
    for name, run in logdir.runs.items():
        (listed if args.all or run.records() else empty).append(name)
    for name in listed[:shown["runs"]]:
        _print_run(name, logdir.runs[name], shown, args.verbose, logdir.runs)
    if len(listed) > len(listed[:shown["runs"]]):
        rest = listed[shown["runs"]:]
        print(f"{len(rest)} more run(s) with snapshots: {_folded(rest)} (--all lists them)")
    if empty:
        print(f"{len(empty)} run(s) with nothing recorded yet: {_folded(empty)} (--all lists them)")
    names = logdir.artifact_names()
    for name in names[:shown["results"]]:
        files = logdir.artifacts(name).names()  # a meta-SNE vector cache holds one file per representation
        if args.verbose:
            print(f"cross-run result {name!r}: {', '.join(files)}")
        else:
            print(f"cross-run result {name!r}: {len(files)} file(s)")
        for note in _result_notes(logdir.artifacts(name)):
            print(f"  {note}")
    if len(names) > len(names[:shown["results"]]):
        rest = names[shown["results"]:]
        print(f"{len(rest)} more cross-run result(s): {_folded(rest)} (--all lists them)")
    return 0


def _readable_target(run):
    """The policy of the run's labels, or None (no labels, or no probe readable)."""
    try:
        return run.probe.target
    except (ValueError, LookupError, OSError):
        return None


def _method_names(run, keys: list[str], verbose: bool) -> list[str]:
    """Stored layouts by the names of their methods; where several share a method, with the parameters that tell
    them apart (e.g. ``tsne (perplexity=5)``); with ``verbose``, each key too."""
    described = {}
    for key in keys:
        try:
            described[key] = run.embeddings.method(key)
        except (ValueError, LookupError, OSError):
            described[key] = {}
    names = []
    for key in keys:
        method = described[key].get("method", key)
        params = described[key].get("params") or {}
        same = [described[k].get("params") or {} for k in keys if k != key and described[k].get("method") == method]
        differ = sorted(p for p in params if any(other.get(p) != params[p] for other in same))
        shown = f" ({', '.join(f'{p}={params[p]}' for p in differ)})" if differ else ""
        names.append(f"{method}{shown}{f' [{key}]' if verbose else ''}")
    return names


def _print_run(name: str, run, shown: dict, verbose: bool = False, runs: dict | None = None) -> None:
    """The lines of one run: a summary, then its predictions, layers and embeddings (up to ``shown``)."""
    m = run.manifest
    probe = m.get("probe", {})
    steps = run.steps()
    print(f"run {name!r}: model {m.get('model', {}).get('name', '?')}, probe n={probe.get('n', '?')}, "
          f"{len(steps)} snapshot(s) ({_plural(m.get('step_unit', 'step'))} {_ranges(steps)}), "
          f"{_human_bytes(run.disk_bytes())} on disk")
    fits = [f for f in m.get("fits") or [] if isinstance(f, dict)]
    if len(fits) > 1:  # each later fit continued the step count (ActivationLogger's freq=)
        spans = ", ".join(f"{f.get('first_step')}-{'?' if f.get('end_step') is None else f['end_step']}" for f in fits)
        print(f"  {len(fits)} fits, each continuing the step count: {_plural(m.get('step_unit', 'step'))} {spans}")
    preds = _predictions_line(run)
    if preds:
        print(f"  {preds}")
    for line in _subset_lines(run, steps, probe.get("n")) + _scale_lines(probe.get("n")):
        print(f"  {line}")
    if meta := info_line(run):  # the probe's metadata columns (repviz.metadata)
        print(f"  {meta}")
    if (target := _readable_target(run)) is not None:  # the labels' policy (repviz.targets)
        print(f"  target: {target.describe()}")
    for layer in run.layers[:shown["layers"]]:
        info = run.layer_info(layer)
        red = info.get("reduction", {}).get("kind", "none")
        if info.get("reduction", {}).get("before", "none") != "none":  # pooled, then sketched
            red = f"{info['reduction']['before']}, then {red}"
        red_txt = "" if red == "none" else f" ({red} from {info.get('output_shape')})"
        nonfinite = sum(run.record(layer, s).get("nonfinite", 0) for s in run.steps(layer))
        warn = f", {nonfinite} non-finite value(s)!" if nonfinite else ""
        constant = [s for s in run.steps(layer) if run.record(layer, s).get("constant") is True]
        warn += f", constant at {_plural(m.get('step_unit', 'step'))} {_ranges(constant)} (left out)" if constant \
            else ""
        print(f"  {layer:<32} {str(tuple(info.get('stored_shape', ()))):<14}{red_txt} "
              f"{len(run.steps(layer))} snapshot(s){warn}")
    if len(run.layers) > len(run.layers[:shown["layers"]]):
        rest = run.layers[shown["layers"]:]
        print(f"  {len(rest)} more layer(s): {_folded(rest)} (--all lists them)")
        if constant := [lay for lay in rest if any(run.record(lay, s).get("constant") is True
                                                   for s in run.steps(lay))]:
            print(f"  {len(constant)} of them constant at some snapshot (left out): {_folded(constant)}")
    reasons: dict[str, list[str]] = {}
    for layer, why in (m.get("skipped") or {}).items():  # default layers not recorded, and why
        reasons.setdefault(why, []).append(layer)
    for why, skipped in reasons.items():  # a reason shared by several layers is one line
        who = f"{skipped[0]:<32}" if len(skipped) == 1 else f"{len(skipped)} layers ({_folded(skipped)})"
        print(f"  {who} not recorded: {why}")
    keys = run.embeddings.method_keys()
    if keys:
        print(f"  embeddings: {', '.join(_method_names(run, keys[:shown['keys']], verbose))}")
    if len(keys) > len(keys[:shown["keys"]]):
        print(f"  {len(keys) - shown['keys']} more embedding method(s) (--all lists them)")
    by_key = {path_key(other): other for other in runs or {}}  # placed points are filed by the layout run's key
    for into, key in run.artifact(PLACED).keys(depth=2):  # repviz place
        into = by_key.get(into, into)
        layout = (runs or {}).get(into, run)
        print(f"  placed into: run {into!r}, its {_method_names(layout, [key], verbose)[0]} layouts")


def _plural(unit: str) -> str:
    return "batches" if unit == "batch" else unit + "s"


def _folded(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` of ``names``, and how many there are in all when that is more."""
    return ", ".join(map(repr, names[:shown])) + (f", ... ({len(names)} in all)" if len(names) > shown else "")


def _subset_lines(run, steps: list[int], n) -> list[str]:
    """Which snapshots hold a subset of the probe (``ActivationLogger(batch_probe=...)``), one line per size."""
    sizes: dict[int, set[int]] = {}
    for layer in run.layers:
        for step in run.steps(layer):
            if "rows" in (record := run.record(layer, step)):
                sizes.setdefault(record["shape"][0], set()).add(step)
    chosen = run.manifest.get("batch_probe") or {}
    how = {"class": f", drawn by class with seed {chosen.get('seed')}", "random": f", drawn with seed "
           f"{chosen.get('seed')}", "positions": ", the positions given"}.get(chosen.get("by"), "")
    unit = _plural(run.manifest.get("step_unit", "step"))
    of = f" of {n:,}" if isinstance(n, int) else ""
    lines = [f"subset snapshots: {size:,}{of} probe points at {len(at)} ({unit} {_ranges(sorted(at))})"
             + (how if size == chosen.get("n") else "") for size, at in sorted(sizes.items())]
    whole = len(steps) - len(set().union(*sizes.values())) if sizes else 0
    return lines + ([f"the other {whole} snapshot(s) hold every probe point"] if lines and whole else [])


def _scale_lines(n) -> list[str]:
    """What a probe of ``n`` points switches on: meta-SNE's pair sample and similarity's minibatch CKA."""
    from .meta.options import DEFAULT_MAX_PROBES
    from .similarity.options import AUTO_EXACT_PROBES

    if not isinstance(n, int):
        return []
    switches = [f"meta-SNE compares a seeded sample of its probe pairs (above {DEFAULT_MAX_PROBES:,} probe points)"
                ] if n > DEFAULT_MAX_PROBES else []
    switches += [f"similarity uses minibatch CKA (above {AUTO_EXACT_PROBES:,})"] if n > AUTO_EXACT_PROBES else []
    return [f"large probe ({n:,} points): {'; '.join(switches)}"] if switches else []


def _result_notes(artifacts) -> list[str]:
    """The notes of a stored meta-SNE map (what it compared, its pair sample); none for another result or a damaged
    one (its readers say why)."""
    if META_RESULT.result not in artifacts.names():
        return []
    try:
        info = artifacts.load_json(META_RESULT.result).get("info")
    except (OSError, ValueError, LookupError, AttributeError):
        return []
    notes = info.get("notes") if isinstance(info, dict) else None
    return [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []


def _predictions_line(run) -> str:
    """Which model output the run's predictions are, and the other outputs stored beside it."""
    m = run.manifest.get("predictions") or {}
    outputs, primary = m.get("outputs") or {}, run.prediction_output
    if primary is None:
        return f"predictions: {tuple(m['shape'])}" if "shape" in m else ""
    others = [f"{name!r} {tuple(shape)}" for name, shape in outputs.items() if name != primary]
    also = f"; also stored: {', '.join(others)}" if others else ""
    return f"predictions: output {primary!r} {tuple(outputs.get(primary, m.get('shape', ())))}{also}"


def _ranges(steps: list[int]) -> str:
    if not steps:
        return "none"
    if len(steps) <= 6:
        return ", ".join(map(str, steps))
    return f"{steps[0]}, {steps[1]}, ..., {steps[-1]}"


def _add_embed(sub) -> None:
    p = sub.add_parser("embed", help="embed every layer at every snapshot (aligned, cached, resumable)",
                       description="Embed every selected layer of every run at every snapshot. Results are cached "
                                   "in the log directory: running the same command again computes nothing, and an "
                                   "interrupted run resumes. Exit status 1 if some representation could not be "
                                   "embedded (reported, the rest computed).")
    p.add_argument("logdir", help="a log directory written by repviz.ActivationLogger")
    p.add_argument("--method", default=DEFAULT_METHOD,
                   help=f"comma-separated methods, e.g. tsne,pca,isomap (default: {DEFAULT_METHOD})")
    p.add_argument("--runs", help="comma-separated runs (default: all)")
    p.add_argument("--layers", help="comma-separated layers (default: all)")
    p.add_argument("--steps", help="comma-separated snapshot steps (default: all)")
    p.add_argument("--align", default=ALIGN_MODES[0], choices=ALIGN_MODES,
                   help="continue each embedding from the previous snapshot (default), the previous layer, or none")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (-1: one per core; default 1)")
    p.add_argument("--param", action="append", default=[], metavar="METHOD.NAME=VALUE",
                   help="an estimator parameter, e.g. tsne.perplexity=50 or autoencoder.hidden=128,32 "
                        "(repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    _add_scheduler(p)
    _add_out(p)
    p.set_defaults(func=_run_embed)


def _split(text: str | None, option: str = "") -> list[str] | None:
    """Comma-separated names; None when the option was not given. An option given but empty is an error (it
    would otherwise silently select everything or nothing)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError(f"{option or 'the option'} was given but names nothing; leave it out to select all")
    return items


def _split_steps(text: str | None, option: str) -> list[int] | None:
    """Comma-separated snapshot steps, as :func:`_split` reads names."""
    items = _split(text, option)
    try:
        return None if items is None else [int(s) for s in items]
    except ValueError:
        raise ValueError(f"{option} must be comma-separated integers; got {text!r}") from None


def _parse_value(text: str):
    if "," in text:  # a tuple, e.g. autoencoder.hidden=128,32
        return tuple(_parse_value(part.strip()) for part in text.split(","))
    low = text.lower()
    if low in ("true", "false", "none"):
        return {"true": True, "false": False, "none": None}[low]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _parse_params(items: list[str]) -> dict[str, dict]:
    params: dict[str, dict] = {}
    for item in items:
        target, eq, value = item.partition("=")
        method, dot, name = target.partition(".")
        if not (eq and dot and method and name):
            raise ValueError(f"--param must look like METHOD.NAME=VALUE (e.g. tsne.perplexity=50); got {item!r}")
        params.setdefault(method.strip(), {})[name.strip()] = _parse_value(value.strip())
    return params


def _run_embed(args) -> int:
    from .pipeline import embed_logdir

    steps = _split_steps(args.steps, "--steps")
    logdir = open_logdir(args.logdir, args.out)
    with _cluster(args) as executor:
        result = embed_logdir(logdir, methods=_split(args.method, "--method"), params=_parse_params(args.param),
                              runs=_split(args.runs, "--runs"), layers=_split(args.layers, "--layers"),
                              steps=steps, align=args.align, jobs=args.jobs,
                              progress=False if args.no_progress else None, executor=executor)
    for line in result.failure_lines():
        print(f"repviz embed: skipped {line}", file=sys.stderr)
    if result.constant:
        print(f"repviz embed: {result.constant_line()}", file=sys.stderr)
    print(result.table())
    return 1 if result.failed else 0


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="the showcase, offline: sigmoid MLP, ReLU MLP and CNN on bundled MNIST, two "
                                    "seeds each; record, embed every layer, map and check the representations",
                       description="Train a sigmoid MLP, a ReLU MLP and a small CNN on MNIST digits bundled with "
                                   "repviz (no network needed), two seeds each, recorded by repviz.ActivationLogger "
                                   "on a stratified probe set at log-spaced epochs (runs LOGDIR/<network>/seed<k>); "
                                   "embed every layer at every snapshot (PCA, aligned t-SNE); map all "
                                   "representations with meta-SNE (dist and cka, the input as landmark) and check "
                                   "that each layer's nearest other-seed representation is the same layer of the "
                                   "same network. Prints a summary and how to browse the result.")
    p.add_argument("logdir", help="log directory to write (created if missing)")
    p.add_argument("--epochs", type=int, help="training epochs per network (default 8; --quick: 2)")
    p.add_argument("--probe", type=int, help="test digits recorded at every snapshot, evenly drawn from the "
                                             "classes (default 1000; --quick: 200)")
    p.add_argument("--seed", type=int, default=0, help="first seed; networks use seed, seed+1, ... (default 0)")
    p.add_argument("--seeds", type=int, default=2, help="runs per network, at least 2 (default 2)")
    p.add_argument("--mnist", metavar="PATH.npz", help="a local MNIST .npz (keys x_train, y_train, x_test, "
                                                       "y_test; default: the subset bundled with repviz)")
    p.add_argument("--jobs", type=int, default=-1, help="worker processes for the embeddings (default -1: one "
                                                         "per core)")
    p.add_argument("--quick", action="store_true", help="a CI-sized run: 200 probes, 2,000 training digits, "
                                                        "2 epochs")
    p.add_argument("--serve", action="store_true", help="then start TensorBoard on LOGDIR (127.0.0.1) instead of "
                                                        "printing the command")
    p.add_argument("--port", type=int, default=6006, help="TensorBoard's port with --serve (default 6006)")
    p.set_defaults(func=_run_demo)


def _run_demo(args) -> int:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from .demo import DemoConfig, run_demo

    if args.epochs is not None and args.epochs < 1:
        raise ValueError(f"--epochs must be >= 1; got {args.epochs}")
    given = {k: v for k, v in (("epochs", args.epochs), ("n_probe", args.probe)) if v is not None}
    options = dict(seed=args.seed, n_seeds=args.seeds, mnist=args.mnist, jobs=args.jobs, **given)
    cfg = DemoConfig.quick_config(args.logdir, **options) if args.quick else DemoConfig(args.logdir, **options)
    run_demo(cfg)
    command = ["tensorboard", "--logdir", str(args.logdir), "--host", "127.0.0.1", "--port", str(args.port)]
    if args.serve:
        return _serve(command)
    print(f"\nbrowse it: tensorboard --logdir {args.logdir}   (tab \"Repviz\"); figures: repviz export "
          f"{args.logdir} --out figures/")
    return 0


def _serve(command: list[str]) -> int:
    """Run TensorBoard (this interpreter's) in the foreground until it exits or Ctrl-C."""
    import subprocess

    print(f"serving: {' '.join(command)}  (Ctrl-C stops it)", flush=True)
    child = subprocess.Popen([sys.executable, "-m", "tensorboard.main", *command[1:]])
    try:
        return child.wait()
    except BaseException:  # Ctrl-C or SIGTERM: stop TensorBoard too
        child.terminate()
        child.wait()
        raise


def _add_export(sub) -> None:
    p = sub.add_parser("export", help="static figures (PNG and SVG) and quality tables from a log directory",
                       description="Write, for papers and for readers without TensorBoard: per layer, a grid of "
                                   "its stored embeddings over snapshots coloured by label; each meta-SNE map with "
                                   "its training paths, runs coloured and the input landmark marked; the quality "
                                   "scores as CSV and Markdown. Needs matplotlib (the export extra: "
                                   f"{install_hint('export')}).")
    p.add_argument("logdir", help="a log directory with embeddings (repviz embed) and meta-SNE maps (repviz meta)")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for the figures (created if missing)")
    p.add_argument("--formats", default="png,svg", help="comma-separated figure formats (default png,svg)")
    p.add_argument("--results", metavar="DIR", help="where the results were written if not in the log "
                                                    "directory (their --out)")
    p.set_defaults(func=_run_export)


def _run_export(args) -> int:
    try:
        from .export import export_figures
    except ImportError as e:  # matplotlib, the optional extra
        print(f"repviz export: error: {e}", file=sys.stderr)
        return 2

    from .progress import TerminalProgress

    bar = TerminalProgress("repviz export")
    written = export_figures(open_logdir(args.logdir, args.results), args.out,
                             formats=_split(args.formats, "--formats"), progress=bar)
    bar.close()
    print(f"wrote {len(written)} files under {args.out}")
    return 0


def _add_meta(sub) -> None:
    p = sub.add_parser("meta", help="meta-SNE: map every representation (run, layer, snapshot) by their distances",
                       description="Compare every stored representation with every other (Olah's meta-SNE) and "
                                   "write the joint map into LOGDIR/plugins/repviz-meta/meta-<transform>-<metric>-"
                                   "<embedding>/, where the TensorBoard plugin finds it. Vectors and distances "
                                   "are cached in the log directory: rerunning after more snapshots only adds "
                                   "the new ones.")
    p.add_argument("logdir", help="a log directory written by repviz.ActivationLogger")
    p.add_argument("--transform", default=TRANSFORMS[0], choices=TRANSFORMS,
                   help="what each representation vector holds (default: dist, Olah's probe distances)")
    p.add_argument("--metric", default=METRICS[0], choices=METRICS, help="distance between vectors")
    p.add_argument("--embedding", default=EMBEDDINGS[0], choices=EMBEDDINGS,
                   help="classical MDS (default), SMACOF-refined MDS, or t-SNE started from MDS")
    p.add_argument("--runs", help="comma-separated runs (default: all; they must share one probe set)")
    p.add_argument("--layers", help="comma-separated layers (default: all)")
    p.add_argument("--include-input", action="store_true",
                   help="add the raw input as a landmark (the stored probe thumbnails, flattened)")
    p.add_argument("--subsets", default=SUBSETS[0], choices=SUBSETS,
                   help="snapshots of a probe subset (batch_probe): common (default) compares every representation "
                        "on the probe points all hold; whole leaves them out and compares the rest on the whole "
                        "probe")
    _add_probe_check(p)
    p.add_argument("--no-robustness", action="store_true",
                   help="skip the rank correlation between the dist and cka distances (saves a second set of "
                        "vectors)")
    p.add_argument("--name", help="result name under plugins/repviz-meta/ (default: meta-<transform>-<metric>-"
                                  "<embedding>)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pair sample and of t-SNE/SMACOF (default 0)")
    p.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    _add_scheduler(p)
    _add_out(p)
    p.set_defaults(func=_run_meta)


def _run_meta(args) -> int:
    from .meta import MetaSNE
    from .meta.sources import landmark_inputs
    from .progress import TerminalProgress

    bar = TerminalProgress("repviz meta", enabled=False if args.no_progress else None)
    logdir = open_logdir(args.logdir, args.out)
    runs = _split(args.runs, "--runs")
    names = runs or list(logdir.runs)
    inputs = None
    if args.include_input and names:  # all compared runs share one probe set (checked by fit)
        inputs = landmark_inputs(logdir.run(names[0]).probe)
        if inputs is None:
            raise ValueError("--include-input uses the probe thumbnails, and these runs stored none; record "
                             "thumbnails, or pass inputs= to repviz.meta.MetaSNE.fit in Python")
    meta = MetaSNE(args.transform, args.metric, args.embedding, robustness=not args.no_robustness,
                   subsets=args.subsets, random_state=args.seed, progress=bar)
    # the representations left out: one line each below; the bar's line ended however fit ends (Ctrl-C, SIGTERM)
    with warnings.catch_warnings(), contextlib.closing(bar), _cluster(args) as executor:
        warnings.filterwarnings("ignore", message=r"left out \d+ representation", category=RuntimeWarning)
        result = meta.fit(logdir, runs=runs, layers=_split(args.layers, "--layers"), inputs=inputs, executor=executor,
                          probe_check=not args.allow_different_probes)
    name = result.save(logdir, args.name)
    left_out: dict[str, list[tuple]] = {}  # a reason shared by several representations is one line
    for item in result.info["left_out"]:
        left_out.setdefault(item["reason"], []).append(tuple(item["key"]))
    for reason, keys in left_out.items():
        who = str(keys[0]) if len(keys) == 1 else f"{len(keys)} representations ({_folded(keys)})"
        print(f"repviz meta: left out {who}: {reason}", file=sys.stderr)
    runs_used = sorted({k[0] for k in result.keys})
    print(f"{len(result)} representations of {result.info['n_probe']} probes from run(s) {', '.join(runs_used)}; "
          f"{args.embedding} map; classical MDS in 2-D shows {100 * result.explained_variance:.1f}% of the variance")
    if result.robustness is not None:
        print(f"robustness: rank correlation of dist and cka distances = {result.robustness:.3f}")
    for note in result.info["notes"]:
        print(f"# {note}")
    print(f"wrote {logdir.artifacts(name).location} in {result.info['seconds']['total']:.1f} s")
    return 0


def _add_probe_check(p) -> None:
    p.add_argument("--allow-different-probes", action="store_true",
                   help="compare runs recorded on different probe inputs (their stored digests differ) when you "
                        "know the inputs correspond, e.g. the same examples preprocessed differently")


def _add_similarity(sub) -> None:
    p = sub.add_parser("similarity", help="layer-by-layer similarity (CKA, Procrustes) of two runs, or of one "
                                          "layer over training",
                       description="Compare every layer of run A with every layer of run B at one snapshot (one "
                                   "run: with itself), or, with --layer, every snapshot of one layer with every "
                                   "other. Prints the labelled matrix; values are cached in the log directory, so "
                                   "a second call computes nothing and a new snapshot adds only its pairs.")
    p.add_argument("logdir", help="a log directory written by repviz.ActivationLogger")
    p.add_argument("--runs", required=True, help="one run or two, comma-separated: a,b (rows from a, columns "
                                                 "from b); they must hold the same probe ids")
    _add_probe_check(p)
    p.add_argument("--step", type=int, help="the snapshot (default: the latest both runs have)")
    p.add_argument("--layers", help="comma-separated layers to compare (default: all, in model order)")
    p.add_argument("--layer", help="instead: this layer's snapshots against each other (one run in --runs)")
    p.add_argument("--steps", help="with --layer: comma-separated snapshots (default: all)")
    p.add_argument("--measure", default=DEFAULT_MEASURE, choices=tuple(MEASURES),
                   help=", ".join(f"{name} ({'similarity' if m.higher_is_similar else 'distance'})"
                                  for name, m in MEASURES.items()) + f" (default: {DEFAULT_MEASURE})")
    p.add_argument("--kernel", default=KERNELS[0], choices=KERNELS, help="CKA's kernel (default: linear)")
    p.add_argument("--biased", action="store_true", help="CKA with the biased HSIC estimator (default: debiased)")
    p.add_argument("--batch-size", type=int, metavar="N",
                   help="minibatch CKA over N probes per batch (default: exact up to 2,048 probes)")
    p.add_argument("--figures", metavar="DIR", help="also write the matrix as CSV and JSON and its heatmap (PNG, "
                                                    "SVG) under DIR")
    p.add_argument("--out", dest="figures_out", metavar="DIR", help=argparse.SUPPRESS)  # the old --figures
    p.add_argument("--results", metavar="DIR", help="keep the cache under DIR instead of the log directory (e.g. "
                                                    "when it is read-only)")
    p.add_argument("--no-progress", action="store_true", help="no progress line even on a terminal")
    _add_scheduler(p)
    p.set_defaults(func=_run_similarity)


def _run_similarity(args) -> int:
    from .progress import TerminalProgress
    from .similarity import similarity, similarity_over_training

    if args.figures_out is not None:  # --out is the read-only overlay in the other commands: --results here
        print("repviz similarity: warning: --out is deprecated here, use --figures DIR for the figures (--results DIR "
              "keeps the cache outside a read-only log directory)", file=sys.stderr)
        args.figures = args.figures if args.figures is not None else args.figures_out
    runs = _split(args.runs, "--runs")
    if len(runs) > 2 or (args.layer is not None and len(runs) != 1):
        raise ValueError(f"--runs names {len(runs)} runs; give one or two (a,b), or one with --layer")
    if args.layer is None and args.steps is not None:
        raise ValueError("--steps selects snapshots of --layer; for two runs at one snapshot use --step N")
    steps = _split_steps(args.steps, "--steps")
    bar = TerminalProgress("repviz similarity", enabled=False if args.no_progress else None)
    logdir = open_logdir(args.logdir, args.results)
    options = dict(measure=args.measure, kernel=args.kernel, debiased=not args.biased, batch_size=args.batch_size,
                   progress=bar)
    with contextlib.closing(bar), _cluster(args) as executor:  # the bar's line ended however this block ends
        if args.layer is not None:
            matrix = similarity_over_training(logdir, runs[0], args.layer, steps, executor=executor, **options)
        else:
            matrix = similarity(logdir, runs, args.step, layers=_split(args.layers, "--layers"), executor=executor,
                                probe_check=not args.allow_different_probes, **options)
    if matrix.left_out:
        print(f"repviz similarity: {matrix.left_out_line()}", file=sys.stderr)
    print(matrix.title)
    print(matrix.table())
    for note in matrix.notes:
        print(f"# {note}")
    rate, n = matrix.layer_identification()
    if args.layer is None and len(runs) == 2 and n == len(matrix.rows):  # the same layers: one architecture
        print(f"# layer identification: {100 * rate:.0f}% of {n} layers of {runs[0]!r} are most similar to "
              f"the same layer of {runs[1]!r}")
    if args.figures:
        from .export import write_matrix

        written = write_matrix(matrix, args.figures)
        print(f"wrote {', '.join(p.name for p in written)} under {args.figures}")
    return 0


def _add_place(sub) -> None:
    p = sub.add_parser("place", help="place one run's probes into another run's stored layouts (a second probe "
                                     "set, inputs logged later), marked as placed",
                       description="Transform the probe points of run RUN into the stored layouts of run INTO at "
                                   "every layer and snapshot both hold: t-SNE and UMAP place them against the "
                                   "fixed layout, Isomap, LLE, PCA and the other methods with a transform refit "
                                   "and rotate onto it. Stored as RUN's placed points (the tab draws them as "
                                   "rings over INTO's layout), never as a layout of its own; placed points that "
                                   "are up to date are not computed again. Exit status 1 if some could not be "
                                   "placed.")
    p.add_argument("logdir", help="a log directory written by repviz.ActivationLogger")
    p.add_argument("--run", required=True, help="the run whose probe points are placed")
    p.add_argument("--into", required=True, help="the run whose layouts they are placed into")
    p.add_argument("--method", default=DEFAULT_METHOD,
                   help=f"the layouts' method or key (default: {DEFAULT_METHOD})")
    p.add_argument("--layers", help="comma-separated layers (default: every layer of the layouts)")
    p.add_argument("--steps", help="comma-separated snapshot steps (default: every step both runs hold)")
    _add_out(p)
    p.set_defaults(func=_run_place)


def _run_place(args) -> int:
    from .placement import place_run
    from .progress import TerminalProgress

    bar = TerminalProgress("repviz place")
    rows = place_run(open_logdir(args.logdir, args.out), args.run, args.into, args.method,
                     layers=_split(args.layers, "--layers"), steps=_split_steps(args.steps, "--steps"), progress=bar)
    bar.close()
    print(f"{'layer':<20} {'step':>6}  {'status':<7} {'points':>6}  10-NN accuracy placed / layout")
    for r in rows:
        if r["status"] == "failed":
            print(f"repviz place: skipped {r['layer']} step {r['step']}: {r['error']}", file=sys.stderr)
            continue
        accuracy = f"{r['knn_accuracy']:.3f} / {r['layout_knn_accuracy']:.3f}" if "knn_accuracy" in r else "-"
        print(f"{r['layer']:<20} {r['step']:>6}  {r['status']:<7} {r['n']:>6}  {accuracy}")
    return 1 if any(r["status"] == "failed" for r in rows) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="repviz", description="Look inside neural networks.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_info(sub)
    _add_demo(sub)
    _add_embed(sub)
    _add_meta(sub)
    _add_export(sub)
    _add_similarity(sub)
    _add_metadata(sub)
    _add_place(sub)
    return parser


def _add_metadata(sub) -> None:
    p = sub.add_parser("metadata", help="add or replace a run's probe metadata from a TSV file with a header line "
                                        "(the Embedding Projector's metadata TSV)")
    p.add_argument("logdir", help="a log directory written by repviz.ActivationLogger")
    p.add_argument("run", help="the run's name in it (as repviz info lists it)")
    p.add_argument("tsv", help="tab-separated columns, one row per probe example in probe order, after a header")
    p.set_defaults(func=_run_metadata)


def _run_metadata(args) -> int:
    from .metadata import info_line
    from .store import open_run, run_directory, write_metadata

    write_metadata(run_directory(args.logdir, args.run), args.tsv)
    print(f"run {args.run!r}: {info_line(open_run(args.logdir, args.run))}")
    return 0


@contextlib.contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """Show each distinct warning once as ``repviz CMD: warning: ...`` (no source paths, no repeats)."""
    seen: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = str(message)
        if text not in seen:
            seen.add(text)
            print(f"repviz {command}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


#: The options that name a directory to write (created if missing), as typed, by their destination.
_DIRECTORY_OPTIONS = {"out": "--out", "results": "--results", "figures": "--figures", "figures_out": "--out"}


def _check_directories(args) -> None:
    """Each directory option names a directory, or nothing yet (it is created): a file there, or on its way, is
    one line rather than the [Errno 17] or [Errno 20] of the first write."""
    for dest, option in _DIRECTORY_OPTIONS.items():
        if getattr(args, dest, None) is None:
            continue
        if (why := not_a_directory(getattr(args, dest))) is not None:
            raise ValueError(f"{option} must be a directory: {why}")


def _elsewhere_hint(args, error: OSError) -> str:
    """For a log directory that cannot be written (not ours, or a read-only file system): the option that writes
    the results elsewhere; "" for another error, or a file outside the log directory."""
    if error.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not hasattr(args, "logdir"):
        return ""
    option = "--results" if "results" in args else "--out" if "out" in args else None
    inside = error.filename is None or is_inside(error.filename, args.logdir)
    return f" (write the results elsewhere with {option} DIR)" if option and inside else ""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with _warnings_as_lines(args.command), sigterm_unwinds():
            _check_directories(args)
            return args.func(args)
    except Terminated:
        print(f"repviz {args.command}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except (MissingExtra, SchedulerUnreachable, ClusterFailed) as e:
        print(f"repviz {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (NotFoundError, ValueError) as e:  # a user error: one clear line, no traceback
        print(f"repviz {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `repviz info logs | head -1`: the reader has all it wanted
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # the machine's side (a full disk, a file it cannot read): one line naming the file
        print(f"repviz {args.command}: error: {e}{_elsewhere_hint(args, e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"repviz {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
