"""Chief-only logging under tf.distribute: the chief decision, and ActivationLogger under a strategy."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

from repviz import open_logdir
from repviz.capture import ActivationLogger
from repviz.chief import is_chief


class FakeSpec:
    def __init__(self, jobs):
        self.jobs = jobs

    def as_dict(self):
        return self.jobs


class FakeResolver:
    """What tf.distribute.cluster_resolver.TFConfigClusterResolver reports for one task of a cluster."""

    def __init__(self, task_type, task_id, jobs):
        self.task_type, self.task_id, self.spec = task_type, task_id, FakeSpec(jobs)

    def cluster_spec(self):
        return self.spec


class FakeStrategy:
    def __init__(self, resolver):
        self.cluster_resolver = resolver


WORKERS = {"worker": ["h0:1", "h1:1", "h2:1"]}
WITH_CHIEF = {"chief": ["c:1"], "worker": ["h0:1", "h1:1"]}


@pytest.mark.parametrize("task_type, task_id, jobs, expected", [
    ("worker", 0, WORKERS, True),      # no chief job: worker 0 is the chief (as TensorFlow decides)
    ("worker", 1, WORKERS, False),
    ("worker", 2, WORKERS, False),
    ("chief", 0, WITH_CHIEF, True),
    ("worker", 0, WITH_CHIEF, False),  # a chief job exists: worker 0 is not it
    ("evaluator", 0, {**WITH_CHIEF, "evaluator": ["e:1"]}, False),
    ("ps", 0, {**WORKERS, "ps": ["p:1"]}, False),
    (None, None, {}, True),            # a resolver outside any cluster (TF_CONFIG unset)
])
def test_the_chief_decision_follows_tensorflow_s_rule(task_type, task_id, jobs, expected):
    assert is_chief(FakeStrategy(FakeResolver(task_type, task_id, jobs))) is expected


def test_single_process_strategies_are_the_chief():
    import tensorflow as tf

    assert is_chief(None) and is_chief(tf.distribute.get_strategy())
    assert is_chief(tf.distribute.MirroredStrategy(["/cpu:0"]))


def _fit(tmp_path, tiny_classifier, strategy, **logger):
    with strategy.scope():
        model, x, y = tiny_classifier(n=64, hidden=4)
    log = ActivationLogger(tmp_path / "run", (x[:32], y[:32]), **logger)
    model.fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[log])
    return model


@pytest.mark.parametrize("schedule", [{}, {"batch_freq": 2}])
def test_under_mirrored_strategy_the_single_worker_is_the_chief_and_logs(tmp_path, tiny_classifier, schedule):
    import tensorflow as tf

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    model = _fit(tmp_path, tiny_classifier, strategy, **schedule)
    assert model.distribute_strategy is strategy
    run = open_logdir(tmp_path).run("run")
    assert run.steps("hidden") == ([0, 1, 2] if not schedule else [0, 2, 4, 6, 8])


@pytest.mark.parametrize("schedule", [{}, {"batch_freq": 2}])
def test_a_worker_that_is_not_the_chief_writes_nothing(tmp_path, tiny_classifier, schedule, monkeypatch):
    import tensorflow as tf

    # a real strategy whose resolver says this process is worker 1 of 3 (training itself runs locally)
    worker_1 = FakeResolver("worker", 1, WORKERS)
    monkeypatch.setattr(tf.distribute.MirroredStrategy, "cluster_resolver", property(lambda self: worker_1))
    _fit(tmp_path, tiny_classifier, tf.distribute.MirroredStrategy(["/cpu:0"]), **schedule)  # hooks return at once
    assert not [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
