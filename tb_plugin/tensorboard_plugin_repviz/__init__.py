"""The Repviz tab of TensorBoard (loaded through the ``tensorboard_plugins`` entry point, ``loader.RepvizLoader``)."""
