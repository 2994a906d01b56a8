"""Facts about where a run happens: package versions, device, the experiment repository's commit."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

import torch

from trainer.config import ConfigError

_PACKAGES = ("meshpilot", "torch", "transformers", "accelerate", "datasets", "tokenizers")


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def device_name(device_type: str) -> str:
    if device_type == "cuda":
        return torch.cuda.get_device_name()
    return platform.processor() or platform.machine()


def git_state(path: Path) -> dict[str, str | bool | None]:
    """Commit and dirtiness of the git repository holding `path`, or nulls outside one."""
    try:
        # GitPython (a slow import) only for the run's provenance
        import git

        repo = git.Repo(path, search_parent_directories=True)
        return {"git_commit": repo.head.commit.hexsha, "git_dirty": repo.is_dirty(untracked_files=False)}
    except Exception:  # not a repository, no commits yet, git missing: the run goes on without provenance
        return {"git_commit": None, "git_dirty": None}


def resolve_device_type(requested: str, key: str) -> str:
    """Device type "auto" as cuda where a CUDA device is available, else cpu; `key` names the setting in errors."""

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in ("cpu", "cuda"):
        raise ConfigError(f"{key}: {requested!r} is not one of auto, cpu, cuda")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key} is cuda, but no CUDA device is available")
    return requested


def process_env(device_type: str, nproc: int) -> dict[str, str]:
    """The environment for `nproc` processes of meshpilot's on one node (a run's ranks, the probe's): this one's,
    with the repository importable and, on CPU, the cores shared out and the GPUs hidden (a CPU run holds no CUDA
    context, and its ranks can be forked: trainer.launch.torchrun)."""
    env = dict(os.environ)
    if device_type == "cpu":  # more threads than cores per process only makes them fight
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
        env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    return env
