"""The built-in multi-process trainer: layouts, data, the training loop and its launcher."""

import logging

# Where torchao is installed (the fp8 extra), transformers imports it in every process that builds a model
# (transformers.quantizers), and torchao's import warns of each C++ kernel it cannot load on this machine (CUDA-only
# builds on a CPU) and of its registrations with torch's pytree: noise in every run's output that concerns no part
# of float8 training (pure PyTorch, trainer.parallel.float8). Errors still show.
for _noisy in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_noisy).setLevel(logging.ERROR)
