"""The entry point TensorBoard loads: cheap to import, builds the plugin only when TensorBoard asks for it."""

from __future__ import annotations

from tensorboard.plugins import base_plugin

from repviz.service import PLUGIN_NAME


class RepvizLoader(base_plugin.TBLoader):
    """Loads :class:`~tensorboard_plugin_repviz.plugin.RepvizPlugin`.

    ``--repviz_out DIR`` reads embeddings and meta-SNE maps written elsewhere (``repviz embed --out DIR``, for a
    log directory the user cannot write) and writes the tab's on-demand embeddings there.
    ``fix_flags`` keeps every sample of the plugin's marker summaries (``--samples_per_plugin repviz=all``
    unless the user set a value), so TensorBoard's reservoir sampling never drops a run's marker.
    """

    def define_flags(self, parser) -> None:
        parser.add_argument("--repviz_out", metavar="DIR", default=None,
                            help="Repviz: where results for the log directory were written (repviz embed/meta "
                                 "--out DIR); read beside the log directory's own, and on-demand embeddings are "
                                 "written there.")

    def fix_flags(self, flags) -> None:
        samples = getattr(flags, "samples_per_plugin", None)
        if isinstance(samples, dict):
            samples.setdefault(PLUGIN_NAME, 0)  # 0: keep all samples

    def load(self, context: base_plugin.TBContext) -> base_plugin.TBPlugin:
        from .plugin import RepvizPlugin

        return RepvizPlugin(context)
