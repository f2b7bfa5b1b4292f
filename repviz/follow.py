"""Embed a run's snapshots while it trains: the background process behind ``ActivationLogger(embed=...)``.

    python -m repviz.follow LOGDIR RUN METHOD [METHOD ...]

Reads lines on stdin, one per snapshot the callback stored (their content is only a nudge). After each it embeds
whatever of run ``RUN`` of ``LOGDIR`` is not embedded yet with :func:`repviz.pipeline.embed_logdir`: the same keys,
parameters and aligned chain as ``repviz embed LOGDIR --methods METHOD,...``, snapshot k continuing from k-1, so
the embeddings stored when training ends are those ``repviz embed`` would compute (and it then finds them cached).
The end of stdin (the callback's ``on_train_end``, or the training process exiting or crashing, which closes the
pipe) triggers one last pass, then the process exits. It runs on one thread at the lowest priority (nice 19):
while training keeps the cores busy it gets little of them (and training loses little), and it catches up when
they are free (a GPU fit leaves them mostly free). One thread, because parallel kernels that wait for each other
at every iteration crawl when their threads are preempted by everything else. A failed pass is reported on
stderr and the next one tries again.

:func:`start` launches it and :func:`nudge` signals a snapshot (``repviz.capture`` calls both).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence

from .pipeline import embed_logdir
from .store import open_logdir
from .workers import Terminated, background_process, sigterm_unwinds


def start(logdir: str, run: str, methods: Sequence[str]) -> subprocess.Popen:
    """Start ``python -m repviz.follow LOGDIR RUN METHOD...`` with a pipe on its stdin for :func:`nudge`.

    A plain subprocess, not multiprocessing: nothing of the training script is imported or run again in it.
    """
    process = background_process(["-m", "repviz.follow", logdir, run, *methods], threads=1,
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, bufsize=0)
    os.set_blocking(process.stdin.fileno(), False)  # a nudge must never wait on a busy process
    return process


def nudge(process: subprocess.Popen) -> None:
    """Tell the process that a snapshot was stored. Never blocks: when the pipe is full (the process is busy;
    each pass embeds everything new anyway) or closed (it exited), the nudge is dropped."""
    with contextlib.suppress(OSError, ValueError):
        os.write(process.stdin.fileno(), b"snapshot\n")


def embed_run(logdir: str, run: str, methods: Sequence[str]) -> int:
    """Embed what run ``run`` of ``logdir`` lacks with ``methods``; returns how many embeddings were computed
    (0 after a failure, which is reported on stderr)."""
    try:
        result = embed_logdir(open_logdir(logdir), methods=list(methods), runs=[run], progress=False)
    except Exception as e:  # the next snapshot's pass tries again; training must never notice
        print(f"repviz follow: embedding {run!r} failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 0
    for line in result.failure_lines():
        print(f"repviz follow: {line}", file=sys.stderr)
    return result.computed


def follow(logdir: str, run: str, methods: Sequence[str], nudges: Iterable[str]) -> None:
    """One pass of :func:`embed_run` per line of ``nudges`` (blocking between them), and one more at their end."""
    for _ in nudges:
        embed_run(logdir, run, methods)
    embed_run(logdir, run, methods)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3:
        print("usage: python -m repviz.follow LOGDIR RUN METHOD [METHOD ...]", file=sys.stderr)
        return 2
    if hasattr(os, "nice"):
        os.nice(19)
    try:
        with sigterm_unwinds():  # kill, or a scheduler ending the training job: unwind, leave no temporary file
            follow(args[0], args[1], args[2:], sys.stdin)
    except KeyboardInterrupt:  # Ctrl-C in the terminal reaches the whole process group: stop quietly
        return 130
    except Terminated:
        print("repviz follow: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
