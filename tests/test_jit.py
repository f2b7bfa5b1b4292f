"""repviz's ``njit``: a cached kernel that several processes need at once on an empty cache is compiled by one of
them; the others wait and load it. The kernels live in a module written to a temporary directory, so that their
cache starts empty."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from repviz._jit import njit

KERNELS = '''
from repviz._jit import njit

@njit(cache=True)
def kernel(x):
    total = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total += np.sqrt(abs(x[i, j])) * np.cos(x[i, j]) + np.arctan2(x[i, j], 1.0 + i)
    return total
'''

CALL = '''
import json, os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import kernels
print("ready", flush=True)
while not os.path.exists(os.path.join(sys.argv[1], "go")):
    time.sleep(0.002)
value = kernels.kernel(np.ones((3, 4)))
stats = kernels.kernel.stats
print(json.dumps({"value": value, "hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values())}))
'''


def _module(tmp_path: Path) -> Path:
    (tmp_path / "kernels.py").write_text("import numpy as np\n" + KERNELS)
    return tmp_path


def test_processes_starting_together_compile_a_kernel_once(tmp_path):
    folder = _module(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # the cache beside the module
    procs = [subprocess.Popen([sys.executable, "-c", CALL, str(folder)], stdout=subprocess.PIPE, text=True, env=env)
             for _ in range(3)]
    for p in procs:  # every process has imported numba and the module: they call the kernel at the same moment
        assert p.stdout.readline().strip() == "ready"
    (folder / "go").touch()
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert len({r["value"] for r in results}) == 1
    assert sorted(r["misses"] for r in results) == [0, 0, 1]
    assert sorted(r["hits"] for r in results) == [0, 1, 1]


def _import(folder: Path, name: str, source: str):
    (folder / f"{name}.py").write_text("import numpy as np\nfrom repviz._jit import njit\n" + source)
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_compile_releases_the_lock(tmp_path):
    module = _import(tmp_path, "halving", """
@njit(cache=True)
def halve(x):
    return x.shape[0] // 2
""")
    with pytest.raises(Exception, match="(?i)typing"):
        module.halve(1.5)  # a float has no shape
    done = threading.Event()
    threading.Thread(target=lambda: (module.halve(np.ones(4)), done.set()), daemon=True).start()
    assert done.wait(60), "the second compile waited on the first one's lock"
    assert module.halve(np.ones(4)) == 2


def test_threads_compiling_kernels_that_call_each_other_finish(tmp_path):
    module = _import(tmp_path, "pair", """
@njit(cache=True)
def first(x):
    return x.sum()

@njit(cache=True)
def second(x):
    return first(x) + x.max()
""")
    results = {}
    threads = [threading.Thread(target=lambda f=f: results.__setitem__(f.__name__, f(np.arange(4.0))), daemon=True)
               for f in (module.second, module.first)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, 120 - (time.monotonic() - start)))
    assert results == {"first": 6.0, "second": 9.0}


def test_a_kernel_without_a_cache_is_numbas_own():
    import numba

    plain = njit(lambda x: x + 1)
    assert type(plain) is type(numba.njit(lambda x: x)) and "compile" not in vars(plain)
    assert plain(1) == 2


def _holding(lock: Path, nice: int) -> subprocess.Popen:
    """A process at niceness ``nice`` that holds the lock file ``lock`` until its stdin closes."""
    code = ("import fcntl, os, sys\nos.nice(int(sys.argv[2]) - os.nice(0))\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\nfcntl.lockf(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\nsys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock), str(nice)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the lock's holder is read as Linux lays it out")
@pytest.mark.skipif(os.nice(0) >= 19, reason="this process already has the lowest priority")
def test_a_holder_of_lower_priority_is_not_waited_for_and_one_of_the_same_is(tmp_path):
    """A warm-up or follower process (nice 19) holding a kernel's lock gets almost no CPU on busy cores: a process
    of higher priority compiles without waiting for it. A holder of the same priority is waited for."""
    module = _import(tmp_path, "starved", """
@njit(cache=True)
def twice(x):
    return 2 * x
""")
    lock = Path(module.twice._cache._cache_file._index_path).with_suffix(".lock")

    def compile_in_a_thread(x: float) -> threading.Event:
        done = threading.Event()
        threading.Thread(target=lambda: (module.twice(x), done.set()), daemon=True).start()
        return done

    low = _holding(lock, min(19, os.nice(0) + 10))
    try:
        assert compile_in_a_thread(2.0).wait(60), "waited on a holder of lower priority"
    finally:
        low.communicate("")
    same = _holding(lock, os.nice(0))
    try:
        done = compile_in_a_thread(np.int64(3))  # a signature not compiled yet
        assert not done.wait(1.0), "did not wait for a holder of the same priority"
    finally:
        same.communicate("")
    assert done.wait(60)
    assert module.twice(np.int64(3)) == 6
