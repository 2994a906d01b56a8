"""Facts about where a run happens: package versions, device, the experiment repository's commit."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path

import torch

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
        import git

        repo = git.Repo(path, search_parent_directories=True)
        return {"git_commit": repo.head.commit.hexsha, "git_dirty": repo.is_dirty(untracked_files=False)}
    except Exception:  # not a repository, no commits yet, git missing: the run goes on without provenance
        return {"git_commit": None, "git_dirty": None}
