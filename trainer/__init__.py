"""The built-in multi-process trainer: layouts, data, the training loop and its launcher."""
