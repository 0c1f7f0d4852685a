"""Examples: runnable scripts and synthetic workloads, outside the library core (``neuronkit demo``,
the torchrun training example, tiny model families, prompt text, how the tiny model was
trained). Imports views and the layers below; only apps import examples."""
