"""The on-disk format of a repviz log directory: writers, readers and records.

This is the only package that knows paths and file names. It imports neither Keras nor TensorFlow (reading a log
directory must stay light) and computes nothing beyond checksums.

Layout of one run (TensorBoard's plugin-assets convention, so TensorBoard and our plugin find it)::

    <logdir>/<run>/plugins/repviz/
        manifest.json                       format version, model, layers, probe, schedule (atomic rewrite)
        records.jsonl                       one JSON line appended per stored array; a torn last line is ignored
        probe/ids.npy labels.npy thumbnails.npy
        probe/metadata.json                 per-example columns (text, categories, numbers; repviz.metadata)
        activations/<layer-key>/<step>.npy  one array (n_rows, width) per layer and snapshot: every probe point, or
                                            the subset its record's "rows" file names (Run.rows)
        subsets/<crc>-<n>.npy               positions into the probe of a subset snapshot's rows, one per subset
        predictions/<step>.npy              the primary model output on the probe set per snapshot
        predictions/<output-key>/<step>.npy every other output of a multi-output model
        embeddings/<method-key>/<layer-key>/<step>.npy (+ <step>.json: parameters and quality scores)
        placed/<run-key>/<method-key>/<layer-key>/<step>.npy (+ .json)  probes placed into another run's layout
        cache/neighbors/<layer-key>/<step>-<variant>-<crc>.npy         k-NN graphs of stored activations
        cache/density/<method-key>/<layer-key>/<step>-<variant>-<crc>.json   density contours of an embedding

The package, by seam: :mod:`~repviz.store.layout` (subdirectories, fixed file names, :func:`path_key`),
:mod:`~repviz.store.files` (atomic writes), :mod:`~repviz.store.contained` (reads checked inside their bounds),
:mod:`~repviz.store.schema` (the fields readers rely on), :mod:`~repviz.store.records` (the record log),
:mod:`~repviz.store.writer` (:class:`RunWriter`), :mod:`~repviz.store.artifacts` (the per-snapshot artifact kinds,
declared once, and the files of the cross-run folders), :mod:`~repviz.store.run` (:class:`Run`) and
:mod:`~repviz.store.logdir` (:class:`LogDir`, the cross-run :class:`Artifacts` folders).

Results that span runs (meta-SNE) live in ``<logdir>/plugins/repviz-meta/<name>/`` (:meth:`LogDir.artifacts`); the
caches behind them are named here too (:meth:`LogDir.vector_cache`). Scratch results go to
:func:`temporary_artifacts`.

Code outside this package reaches files only through these objects: a :class:`Run` pickles as a reference (its
location and name) so worker processes reopen it, :meth:`Run.read_array` reads what a record describes,
:meth:`Run.artifact` reads and writes per-snapshot artifacts, :meth:`Artifacts.read_into` reads part of a stored
array into a caller's buffer, and :meth:`RunWriter.write_tensorboard_marker` writes TensorBoard's marker event. A
worker on another machine, or another storage backend, changes this package only.

Nothing outside the log directory is read through it: every file a reader opens must resolve, symbolic links
included, inside its run (or inside the ``out`` directory for results written there, or inside the log directory for
cross-run results), checked on the file actually opened. A file or directory that leads out (an absolute or ``../``
record, a planted link) is a damaged entry: a listing leaves it out with a warning naming it, a read raises
:class:`UnsafeFileError` (a :class:`NotFoundError`) naming it, a write into it is refused.

Every file is written to a temporary name and renamed into place, and a record is appended only after its
file exists, so a run killed at any moment (even by SIGKILL) opens with every snapshot completed before the kill.
Arrays are ``.npy`` read with ``allow_pickle=False`` and memory-mapped.
"""

from .artifacts import (
                        DENSITY,
                        EMBEDDING,
                        KINDS,
                        META_RESULT,
                        NEIGHBOR_GRAPH,
                        PLACED,
                        SIMILARITY_CACHE,
                        VECTOR_BANK,
                        Artifact,
                        ArtifactKind,
                        Embeddings,
                        declare,
)
from .errors import DamagedFileError, DiskFullError, IncompatibleRunError, NotFoundError, UnsafeFileError
from .files import (
                        ArrayBlocks,
                        atomic_path,
                        checksum,
                        constant_rows,
                        is_inside,
                        not_a_directory,
                        remove_stale_temps,
                        save_array,
                        save_json,
)
from .layout import FORMAT_VERSION, PLUGIN_NAME, path_key, run_directory, run_name_of
from .logdir import Artifacts, LogDir, open_logdir, open_run, temporary_artifacts, write_metadata
from .records import append_record
from .run import Probe, Run
from .writer import RunWriter

__all__ = [
    "DENSITY", "EMBEDDING", "FORMAT_VERSION", "KINDS", "META_RESULT", "NEIGHBOR_GRAPH", "PLACED", "PLUGIN_NAME",
    "SIMILARITY_CACHE", "VECTOR_BANK", "ArrayBlocks", "Artifact", "ArtifactKind", "Artifacts", "DamagedFileError",
    "DiskFullError", "Embeddings", "IncompatibleRunError", "LogDir", "NotFoundError", "Probe", "Run", "RunWriter",
    "UnsafeFileError", "append_record", "atomic_path", "checksum", "constant_rows", "declare", "is_inside",
    "not_a_directory", "open_logdir",
    "open_run", "path_key", "remove_stale_temps", "run_directory", "run_name_of", "save_array", "save_json",
    "temporary_artifacts", "write_metadata",
]
