"""Chief-only callbacks under ``tf.distribute``: with several training workers, only the chief records.

Under ``MultiWorkerMirroredStrategy`` every worker runs the same ``model.fit`` with the same callbacks; were
each to record, they would write the same run at once. The chief is decided as TensorFlow decides who writes
checkpoints (``multi_worker_util.is_chief``): the task of type "chief", or worker 0 when the cluster has no
"chief" job. Single-worker strategies (the default one, ``MirroredStrategy`` over local devices,
``OneDeviceStrategy``) and other backends have no cluster resolver: that one process is the chief.

This module imports neither Keras nor TensorFlow: it reads the strategy a model was built under
(``model.distribute_strategy``, set by Keras's TensorFlow trainer).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


def is_chief(strategy: Any) -> bool:
    """Whether this process is the chief of ``strategy``'s cluster (True without a cluster resolver)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    return resolver.task_type == "worker" and int(resolver.task_id or 0) == 0 and \
        "chief" not in resolver.cluster_spec().as_dict()


def _on_chief(hook: Callable) -> Callable:
    @functools.wraps(hook)
    def run_on_chief(self, *args, **kwargs):
        if is_chief(getattr(self.model, "distribute_strategy", None)):
            return hook(self, *args, **kwargs)
        return None

    return run_on_chief


class ChiefOnly:
    """Mixin for a Keras callback: every ``on_*`` hook that a subclass defines runs on the chief only, and does
    nothing on the other workers of a multi-worker strategy (see the module docstring). Hooks a class does not
    define keep Keras's defaults, so Keras still sees which hooks are overridden."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, hook in list(vars(cls).items()):
            if name.startswith("on_") and callable(hook):
                setattr(cls, name, _on_chief(hook))
