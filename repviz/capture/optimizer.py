"""The optimizer's slot variables made when a logged fit begins, as Keras makes them on its JAX and PyTorch backends
and under a TensorFlow distribution strategy. On plain TensorFlow, Keras makes them inside the first traced step,
which TensorFlow then traces a second time, to drop the variable creation: about half of a small model's first
step. Only for Keras's own ``train_step``, which applies ``model.optimizer`` to every trainable variable; a model with
a step of its own (a GAN's two optimizers) is left as it is."""

from __future__ import annotations

import keras


def build_slots(model) -> None:
    """Build ``model.optimizer`` on ``model.trainable_variables`` now, where Keras would inside the first step."""
    optimizer = getattr(model, "optimizer", None)
    if (keras.backend.backend() != "tensorflow" or optimizer is None or optimizer.built or not model.built
            or type(model).train_step is not keras.Model.train_step or not model.trainable_variables):
        return
    optimizer.build(model.trainable_variables)
