"""The entry point TensorBoard loads: cheap to import, builds the plugin only when TensorBoard asks for it."""

from __future__ import annotations

from tensorboard.plugins import base_plugin

from repviz.store import PLUGIN_NAME


class RepvizLoader(base_plugin.TBLoader):
    """Loads :class:`~tensorboard_plugin_repviz.plugin.RepvizPlugin`.

    ``fix_flags`` keeps every sample of the plugin's marker summaries (``--samples_per_plugin repviz=all``
    unless the user set a value), so TensorBoard's reservoir sampling never drops a run's marker.
    """

    def fix_flags(self, flags) -> None:
        samples = getattr(flags, "samples_per_plugin", None)
        if isinstance(samples, dict):
            samples.setdefault(PLUGIN_NAME, 0)  # 0: keep all samples

    def load(self, context: base_plugin.TBContext) -> base_plugin.TBPlugin:
        from .plugin import RepvizPlugin

        return RepvizPlugin(context)
