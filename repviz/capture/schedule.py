"""When the callback takes its snapshots: an epoch schedule (every ``freq`` epochs, or the listed ones), a batch
schedule (every ``batch_freq`` batches, optionally with whole-probe snapshots after listed epochs), how the
manifest records it, and the check that a batch schedule's snapshots do not slow training down unnoticed.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._validation import check_param, param_error
from .options import OWNER, POSITIVE, is_int, user_stacklevel

COST_SHARE = 0.10  # a batch schedule whose snapshots take more than this share of the training time warns once,
COST_SNAPSHOTS = 3  # judged on the medians over this many snapshots


def log_spaced_epochs(epochs: int, n: int) -> list[int]:
    """About ``n`` epochs from 1 to ``epochs``, spaced evenly on a log scale (the last always included), for
    ``ActivationLogger(freq=...)``: representations change fastest early in training, so early snapshots are
    dense. Snapshot 0, before training, is taken anyway.

    >>> log_spaced_epochs(8, 4)
    [1, 2, 4, 8]
    """
    check_param(epochs, [POSITIVE], "epochs", "log_spaced_epochs")
    check_param(n, [POSITIVE], "n", "log_spaced_epochs")
    return sorted({int(round(e)) for e in np.geomspace(1, epochs, min(n, epochs))})


def check_freq(freq: Any) -> int | list[int]:
    """``freq=`` checked: an int >= 1, or a non-empty list of epoch numbers (sorted, without repeats)."""
    if is_int(freq) and freq >= 1:
        return int(freq)
    if isinstance(freq, (list, tuple)) and freq and all(is_int(f) and f >= 0 for f in freq):
        return sorted({int(f) for f in freq})
    raise param_error("freq", OWNER, "an int >= 1 (every N epochs) or a non-empty list of epoch numbers >= 0", freq)


def epoch_scheduled(freq: int | list[int], epoch: int) -> bool:
    """Whether ``freq`` asks for a snapshot after epoch ``epoch`` (1 = the first) of a fit."""
    return epoch % freq == 0 if is_int(freq) else epoch in freq


def warn_empty_schedule(freq: int | list[int], epochs: int | None, initial_epoch: int) -> None:
    """Warn when an epoch list names none of the epochs a fit runs (``initial_epoch + 1`` to ``epochs``)."""
    if isinstance(freq, list) and epochs and not any(initial_epoch < f <= epochs for f in freq):
        runs = f"the {epochs} epoch(s)" if not initial_epoch else f"epochs {initial_epoch + 1}-{epochs}"
        warnings.warn(f"freq={freq} schedules no snapshot within {runs} of this fit; only the snapshot "
                      f"before training will be recorded", RuntimeWarning, stacklevel=user_stacklevel())


def manifest_entry(freq: int | list[int], batch_freq: int | None, mixed: bool) -> dict:
    """The manifest's ``schedule``: its unit and what it names."""
    if batch_freq is not None:
        return {"unit": "batch", "every": batch_freq, **({"after_epochs": freq} if mixed else {})}
    return {"unit": "epoch", "every" if is_int(freq) else "epochs": freq}


class CostJudge:
    """Times a batch schedule's snapshots against the training between them and warns once per fit when, over
    :data:`COST_SNAPSHOTS` snapshots, they take more than :data:`COST_SHARE` of it (fine schedules can cost much
    more than their users expect)."""

    def __init__(self, batch_freq: int):
        self.batch_freq = batch_freq
        self.costs: list[tuple[float, float]] | None = []  # (snapshot, training before it), seconds
        self.since: float | None = None

    def judge(self, start: float, end: float) -> None:
        """Count a snapshot that ran from ``start`` to ``end`` (``time.perf_counter`` seconds)."""
        if self.since is not None and self.costs is not None:
            self.costs.append((end - start, start - self.since))
            if len(self.costs) == COST_SNAPSHOTS:
                snapshot, training = np.median(self.costs, axis=0)
                self.costs = None  # once per fit
                if snapshot > COST_SHARE * training:
                    every = "batch" if self.batch_freq == 1 else f"{self.batch_freq} batches"
                    warnings.warn(f"a snapshot every {every} takes {1e3 * snapshot:.0f} ms on the training thread, "
                                  f"{snapshot / training:.0%} of the {training:.2f} s of training before it: training "
                                  f"runs at least that much slower. A larger batch_freq, or fewer probe points "
                                  f"(ProbeSet(batch_subset=), or batch_probe=: the forward pass costs in proportion to "
                                  f"its rows), costs less.",
                                  RuntimeWarning, stacklevel=user_stacklevel())
        self.since = end
