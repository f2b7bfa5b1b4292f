"""The entry point TensorBoard loads: cheap to import, builds the plugin only when TensorBoard asks for it."""

from __future__ import annotations

import argparse
import math

from tensorboard.plugins import base_plugin

from repviz.service import PLUGIN_NAME


class RepvizLoader(base_plugin.TBLoader):
    """Loads :class:`~tensorboard_plugin_repviz.plugin.RepvizPlugin`.

    ``--repviz_out DIR`` reads embeddings and meta-SNE maps written elsewhere (``repviz embed --out DIR``, for a
    log directory the user cannot write) and writes the tab's on-demand embeddings there.
    ``--repviz_job_limit SECONDS`` stops a job of the tab (an embedding, a meta-SNE map, heatmaps) that has run
    that long (default: :data:`~tensorboard_plugin_repviz.jobs.DEFAULT_TIME_LIMIT`).
    ``fix_flags`` keeps every sample of the plugin's marker summaries (``--samples_per_plugin repviz=all``
    unless the user set a value), so TensorBoard's reservoir sampling never drops a run's marker.
    """

    def define_flags(self, parser) -> None:
        parser.add_argument("--repviz_out", metavar="DIR", default=None,
                            help="Repviz: where results for the log directory were written (repviz embed/meta "
                                 "--out DIR); read beside the log directory's own, and on-demand embeddings are "
                                 "written there.")
        parser.add_argument("--repviz_job_limit", metavar="SECONDS", type=_seconds, default=None,
                            help="Repviz: stop a job the tab started (an embedding, a meta-SNE map, heatmaps) once "
                                 "it has run this many seconds (default 1800).")

    def fix_flags(self, flags) -> None:
        samples = getattr(flags, "samples_per_plugin", None)
        if isinstance(samples, dict):
            samples.setdefault(PLUGIN_NAME, 0)  # 0: keep all samples

    def load(self, context: base_plugin.TBContext) -> base_plugin.TBPlugin:
        from .plugin import RepvizPlugin

        return RepvizPlugin(context)


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse's one-line error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds; got {text!r}")
    return value
