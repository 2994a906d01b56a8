"""Processes forked with torch and transformers already imported, instead of fresh interpreters.

A fresh launcher spends about 3.5 s of CPU importing torch, transformers and Llama's modelling code before its run
starts: most of a small run's set-up, paid again by every trial of a sweep. A process that imported them once can
fork a launcher that begins with them (agent.jobs.forkserver, the tests' tests/preloaded.py). A forked child behaves
as a fresh interpreter would where two things hold, which this module checks or mends:

- the variables read when those modules are imported (IMPORT_TIME_PREFIXES) are the same in the child's environment
  as in the preloaded process's (`same_imports`); where they differ the child must be a fresh interpreter;
- whoever looks for the child by its environment finds it: /proc/PID/environ shows the environment a process was
  exec'd with, which a forked child shares with its parent whatever it sets since. Jobs are found so (a job's
  processes carry its token, agent.jobs.processes), so the child writes its own environment where the kernel shows
  it (`show_environ`), in room its parent was started with (ENVIRON_ROOM).
"""

from __future__ import annotations

import ctypes
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

# The third-party modules a launcher imports: meshpilot's own are imported by each child, so that whatever they read
# at import time comes from the child's request.
PRELOAD = ("torch", "torch.distributed", "transformers", "transformers.models.llama.modeling_llama", "yaml")
IMPORT_TIME_PREFIXES = (
    "HF_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDA_",
    "NCCL_", "GLOO_", "PYTHON", "LD_", "HOME", "XDG_", "TMP", "TEMP",  # the last four: default cache paths
)  # fmt: skip
# A variable whose value is room for the environments of forked children (`show_environ`): a child's differs from its
# parent's by a few job variables, and a sweep's trials by an owners list.
ENVIRON_ROOM = "MESHPILOT_ENVIRON_ROOM"
_ROOM_BYTES = 8192


def import_time(env: dict[str, str]) -> dict[str, str]:
    """The variables of `env` that the preloaded modules read when imported."""
    return {key: value for key, value in env.items() if key.startswith(IMPORT_TIME_PREFIXES)}


def same_imports(env: dict[str, str], preloaded_env: dict[str, str]) -> bool:
    """Whether a child run in `env` imports what a process started in `preloaded_env` imported."""
    return import_time(env) == import_time(preloaded_env)


def with_room(env: dict[str, str]) -> dict[str, str]:
    """`env` for a preloaded process whose forked children will `show_environ` their own."""
    return {**env, ENVIRON_ROOM: "." * _ROOM_BYTES}


def preload() -> None:
    """Import PRELOAD, with numpy's BLAS on one thread as `meshpilot train` has it (trainer.cli)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for module in PRELOAD:
        __import__(module)


def take_over(env: dict[str, str], cwd: str | Path) -> None:
    """In a forked child: the environment and working directory of the process it stands in for."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)


def run_and_exit(body: Callable[[], int | None]) -> NoReturn:
    """In a forked child: run `body` as an interpreter runs its main (SystemExit's code; for any other exception its
    traceback and 1) and exit with its code at once, without the teardown of what the parent had made (its atexit
    handlers, its objects' destructors)."""
    code = 1
    try:
        code = body() or 0
    except SystemExit as exit_:  # argparse's errors and --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def show_environ(env: dict[str, str], first: tuple[str, ...] = ()) -> None:
    """Make /proc/self/environ show `env` (the variables named in `first` before the rest, and the rest as far as
    the room allows), by writing over the environment block this process inherited; raises where `first` does not
    fit. The block is this process's own memory (the stack's top); the C library's and Python's views of the
    environment are set separately (os.environ)."""
    start, end = _environ_block()
    ordered = [*first, *(key for key in env if key not in first)]
    block, fitted = b"", []
    for key in ordered:
        entry = f"{key}={env[key]}".encode() + b"\0"
        if len(block) + len(entry) > end - start:
            break
        block += entry
        fitted.append(key)
    if not set(first) <= set(fitted):
        raise RuntimeError(f"the environment block ({end - start} bytes) has no room for {', '.join(first)}")
    ctypes.memmove(start, block.ljust(end - start, b"\0"), end - start)


def _environ_block() -> tuple[int, int]:
    """Where the kernel reads /proc/self/environ from: env_start and env_end, fields 50 and 51 of /proc/self/stat."""
    with open("/proc/self/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()  # after the command's name, which may hold spaces
    return int(fields[47]), int(fields[48])  # the fields after the name start at field 3
