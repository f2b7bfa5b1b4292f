"""A log directory: its runs (found at any depth, as TensorBoard finds them) and its results that span runs.

Cross-run results (meta-SNE, similarity caches) live in ``<logdir>/plugins/repviz-meta/<name>/``, one
:class:`Artifacts` folder each; the files each kind of folder holds are declared in
:mod:`repviz.store.artifacts`. With ``open_logdir(..., out=...)`` results are written under ``out`` in the same
layout and read from there first, for log directories that are read-only.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from repviz.metadata import Metadata, columns_from, parse_tsv

from .._validation import choices
from .contained import (
    array_inside,
    as_bounds,
    check_writable_inside,
    entries_inside,
    intact_inside,
    json_inside,
    npy_header,
    open_inside,
    real_path,
    within,
)
from .errors import NotFoundError, UnsafeFileError
from .files import atomic_path, save_array, save_json
from .layout import MANIFEST, META_SUBDIR, RUN_SUBDIR
from .run import Run
from .writer import RunWriter


class Artifacts:
    """A directory of named results that span runs (meta-SNE), with atomic writes.

    With ``fallback``, files missing from ``root`` are read from ``fallback`` (the log directory's own results
    when results are written elsewhere, see :func:`open_logdir`'s ``out``); writes always go to ``root``.
    """

    def __init__(self, root: str | os.PathLike, fallback: str | os.PathLike | None = None):
        self.root = Path(root)
        self.fallback = None if fallback is None else Path(fallback)
        self._own = _artifacts_bounds(self.root)
        self._fallback = None if self.fallback is None else _artifacts_bounds(self.fallback)
        self._headers: dict[str, tuple[tuple, tuple[tuple[int, ...], np.dtype, int]]] = {}

    @property
    def location(self) -> str:
        """Where the directory is, for messages."""
        return str(self.root)

    def path(self, name: str) -> Path:
        """The path artifact ``name`` is read from; ``name`` is a plain file name (no directories)."""
        return self._source(name)[0]

    def _source(self, name: str) -> tuple[Path, tuple[str, ...]]:
        """The path artifact ``name`` is read from, and what it may resolve into (the log directory, or the
        ``out`` directory, that holds it)."""
        target = self._target(name)
        if self.fallback is not None and not target.exists() and (self.fallback / name).exists():
            return self.fallback / name, self._fallback
        return target, self._own

    def _target(self, name: str) -> Path:
        """The path artifact ``name`` is written to."""
        if name != Path(name).name or name.startswith("."):
            raise ValueError(f"artifact names are plain file names, got {name!r}")
        return self.root / name

    def exists(self, name: str) -> bool:
        """Whether artifact ``name`` is stored (a link leading out of the log directory is not)."""
        path, bounds = self._source(name)
        return path.exists() and within(real_path(path), bounds)

    def names(self) -> list[str]:
        return sorted({name for d, bounds in ((self.root, self._own), (self.fallback, self._fallback))
                       if d is not None for name in entries_inside(d, bounds) if not name.startswith(".")})

    def save_array(self, name: str, array: np.ndarray) -> None:
        save_array(check_writable_inside(self._target(name), self._own), array)

    def load_array(self, name: str, mmap: bool = True) -> np.ndarray:
        path, bounds = self._source(name)
        try:
            return array_inside(path, bounds, mmap=mmap)
        except FileNotFoundError:
            raise NotFoundError(f"{name!r} is not in {str(self.root)!r}; it has: {choices(self.names())}") from None

    def intact(self, name: str) -> bool:
        """The stored array ``name`` exists and is as long as its header says."""
        return intact_inside(*self._source(name)) is not None

    def header(self, name: str) -> tuple[tuple[int, ...], np.dtype]:
        """Shape and dtype of the stored array ``name``, read from its header alone."""
        with self._open(name) as f:
            shape, dtype, _ = self._header(name, f)
        return shape, dtype

    def read_into(self, name: str, out: np.ndarray, start: int = 0) -> None:
        """Fill ``out`` with elements ``start, start + 1, ...`` of the stored array ``name`` (in C order).

        For a 1-D array this reads ``array[start:start + out.size]``; for a 2-D array of width w, ``start = i * w``
        and ``out`` of shape (k, w) read rows ``i:i + k``. One plain read into ``out``'s memory: unlike a memory
        map, nothing of the file stays resident afterwards, so reading many large arrays block by block keeps
        memory at the size of the caller's buffers. ``out`` must be C-contiguous, writeable and of the stored
        dtype.
        """
        if not (isinstance(out, np.ndarray) and out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(f"out must be a writeable C-contiguous numpy array to read {name!r} into")
        with self._open(name) as f:
            shape, dtype, offset = self._header(name, f)
            if out.dtype != dtype:
                raise ValueError(f"{name!r} in {self.location!r} holds {dtype}; out is {out.dtype}")
            size = int(np.prod(shape, dtype=np.int64))
            if not 0 <= start <= start + out.size <= size:
                raise ValueError(f"elements [{start}, {start + out.size}) are outside {name!r} in "
                                 f"{self.location!r}, which holds {size} (shape {shape})")
            f.seek(offset + start * dtype.itemsize)
            if f.readinto(memoryview(out).cast("B")) != out.nbytes:
                raise ValueError(f"{name!r} in {self.location!r} is truncated; delete it to rebuild it")

    def _open(self, name: str):
        try:
            return os.fdopen(open_inside(*self._source(name)), "rb")
        except FileNotFoundError:
            raise NotFoundError(f"{name!r} is not in {self.location!r}; it has: {choices(self.names())}") from None

    def _header(self, name: str, f) -> tuple[tuple[int, ...], np.dtype, int]:
        """The parsed header of the open file ``f``, cached while the file stays the same one (a file renamed
        onto ``name`` is parsed again)."""
        st = os.fstat(f.fileno())
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._headers.get(name)
        if cached is None or cached[0] != identity:
            cached = self._headers[name] = (identity, npy_header(f))
        return cached[1]

    def save_json(self, name: str, obj: Any) -> None:
        save_json(check_writable_inside(self._target(name), self._own), obj)

    def load_json(self, name: str) -> Any:
        path, bounds = self._source(name)
        try:
            return json_inside(path, bounds)
        except FileNotFoundError:
            raise NotFoundError(f"{name!r} is not in {str(self.root)!r}; it has: {choices(self.names())}") from None

    @contextlib.contextmanager
    def writing(self, name: str) -> Iterator[Path]:
        """Yield a temporary path to fill (e.g. with ``np.lib.format.open_memmap``); renamed onto ``name`` on
        success, deleted on failure."""
        with atomic_path(check_writable_inside(self._target(name), self._own)) as tmp:
            yield tmp


def _artifacts_bounds(root: Path) -> tuple[str, ...]:
    """What the files of the artifacts directory ``root`` may resolve into: the log directory (or ``out``
    directory) of ``<base>/plugins/repviz-meta/<name>``, else (a scratch directory) ``root`` itself."""
    meta = root.parent
    return as_bounds(real_path(meta.parent.parent if (meta.parent.name, meta.name) == META_SUBDIR else root))


def _find_manifests(root: Path) -> list[Path]:
    """Every ``<run>/plugins/repviz/manifest.json`` below ``root``, at any depth, sorted.

    The walk does not enter a run's own data (``plugins/repviz/``, thousands of arrays) nor the cross-run results
    (``plugins/repviz-meta/``), which makes it more than 10x faster than a recursive glob on a log directory of 300
    runs. Like that glob, it does not follow symbolic links to directories, except as the ``plugins`` directory
    of a run.
    """
    found = []
    for dirpath, dirnames, _ in os.walk(root):
        manifest = Path(dirpath).joinpath(*RUN_SUBDIR, MANIFEST)
        if "plugins" in dirnames and manifest.exists():
            found.append(manifest)
        if Path(dirpath).name == RUN_SUBDIR[0]:
            dirnames[:] = [d for d in dirnames if d not in (RUN_SUBDIR[1], META_SUBDIR[1])]
    return sorted(found)


class LogDir:
    """A log directory holding one or more repviz runs (found at any depth, as TensorBoard finds runs)."""

    def __init__(self, path: str | os.PathLike, out: str | os.PathLike | None = None):
        self.path = Path(path)
        self.out = None if out is None else Path(out)
        if not self.path.exists():
            raise NotFoundError(f"log directory {str(self.path)!r} does not exist")
        if not self.path.is_dir():
            raise NotFoundError(f"log directory {str(self.path)!r} is a file, not a directory")
        self.runs: dict[str, Run] = {}
        self.skipped: dict[str, str] = {}  # run name -> why it could not be read
        for manifest in _find_manifests(self.path):
            root = manifest.parent
            name = root.parent.parent.relative_to(self.path).as_posix()
            results = None if self.out is None else self.out.joinpath(*Path(name).parts, *RUN_SUBDIR)
            try:
                self.runs[name] = Run(root, name, results)
            except (OSError, ValueError, UnsafeFileError) as e:  # one broken run must not hide the others
                self.skipped[name] = str(e)
                warnings.warn(f"skipped run {name!r}: {e}", RuntimeWarning, stacklevel=2)

    def __repr__(self) -> str:
        return f"LogDir({str(self.path)!r}, runs={list(self.runs)})"

    def run(self, name: str) -> Run:
        """The run called ``name`` (its path relative to the log directory)."""
        if name not in self.runs:
            raise NotFoundError(f"run {name!r} is not in {str(self.path)!r}; it has: {choices(self.runs)}")
        return self.runs[name]

    def artifacts(self, name: str) -> Artifacts:
        """The results directory ``name`` for cross-run results (e.g. one meta-SNE configuration)."""
        if not name or name != Path(name).name or name.startswith("."):
            raise ValueError(f"artifact directory names are plain names, got {name!r}")
        own = self.path.joinpath(*META_SUBDIR, name)
        return Artifacts(own) if self.out is None else Artifacts(self.out.joinpath(*META_SUBDIR, name), own)

    def vector_cache(self, transform: str, probe_id: str, n_pairs: int | None = None,
                     pair_seed: int | None = None) -> Artifacts:
        """The cache of meta-SNE representation vectors of one transform over one probe set (``probe_id``) and,
        above the pair-sample threshold, one sample of ``n_pairs`` probe pairs drawn with ``pair_seed``."""
        sample = "" if n_pairs is None else f"-p{int(n_pairs)}s{pair_seed}"
        return self.artifacts(f"vectors-{transform}-{probe_id}{sample}")

    def artifact_names(self) -> list[str]:
        bases = [base for base in (self.path, self.out) if base is not None]
        return sorted({name for base in bases
                       for name in entries_inside(base.joinpath(*META_SUBDIR), as_bounds(real_path(base)), dirs=True)})


@contextlib.contextmanager
def temporary_artifacts(prefix: str = "repviz-") -> Iterator[Artifacts]:
    """A scratch :class:`Artifacts` directory, deleted with everything in it when the block ends."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Artifacts(tmp)

def write_metadata(run_dir: str | os.PathLike, columns: Any, kinds: dict[str, str] | None = None) -> Metadata:
    """Add or replace the probe metadata of the run logged to ``run_dir`` (``ActivationLogger``'s ``log_dir``),
    e.g. after capture: ``columns`` as ``ActivationLogger(metadata=...)`` takes them (a mapping column -> values, a
    pandas DataFrame), or the path of a TSV file with a header line (:func:`repviz.metadata.parse_tsv`), one value
    per probe example; returns them."""
    if isinstance(columns, (str, os.PathLike)):
        try:
            columns = parse_tsv(Path(columns).read_text(encoding="utf-8"), os.fspath(columns))
        except UnicodeDecodeError as e:
            raise ValueError(f"{os.fspath(columns)} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    root = Path(run_dir).joinpath(*RUN_SUBDIR)
    if not (root / MANIFEST).exists():
        raise NotFoundError(f"{os.fspath(run_dir)!r} holds no repviz run ({root / MANIFEST} is missing); give the "
                            f"directory that ActivationLogger logged to")
    metadata = columns_from(columns, len(Run(root, Path(run_dir).name).probe), kinds)
    RunWriter(run_dir).write_metadata(metadata)
    return metadata


def open_logdir(path: str | os.PathLike, out: str | os.PathLike | None = None) -> LogDir:
    """Open a log directory for reading; needs no TensorFlow.

    ``out``: a directory for the results computed from it (embeddings, meta-SNE maps), for log directories that
    are read-only (shared experiment directories): results are written under ``out`` in the same layout and read
    from ``out`` first, then from the log directory itself.

    >>> logdir = open_logdir("logs")                                   # doctest: +SKIP
    >>> run = logdir.runs["relu_mlp"]; run.activations(run.layers[0], 0).shape   # doctest: +SKIP
    (2000, 128)
    """
    logdir = LogDir(path, out)
    if not logdir.runs and not logdir.artifact_names():
        raise NotFoundError(f"{str(path)!r} holds no repviz runs (no */plugins/repviz/manifest.json); "
                            f"record some with repviz.ActivationLogger")
    return logdir


def open_run(path: str | os.PathLike, name: str, out: str | os.PathLike | None = None) -> Run:
    """The run called ``name`` of the log directory ``path``, opened alone: the run ``LogDir(path, out)`` would list
    under that name, found without walking the whole log directory (a few ``stat`` calls), for a reader holding a
    listing that is asked for a name not in it. ``NotFoundError`` when the walk would list no run of that name."""
    parts = Path(name).parts
    pairs = set(zip(parts, parts[1:]))
    run_dir = Path(path).joinpath(*parts)
    root = run_dir.joinpath(*RUN_SUBDIR)
    # as the walk: a canonical relative name, not inside a run's data, reached through no link to a directory
    if (not parts or Path(name).as_posix() != name or Path(name).is_absolute() or {".", ".."} & set(parts)
            or RUN_SUBDIR in pairs or META_SUBDIR in pairs
            or real_path(run_dir) != os.path.join(real_path(path), *parts)
            or not (root / MANIFEST).is_file()):
        raise NotFoundError(f"run {name!r} is not in {str(path)!r}")
    return Run(root, name, None if out is None else Path(out).joinpath(*parts, *RUN_SUBDIR))
