"""What the agent never reads, whatever directory is its repository (even the home directory):

- meshpilot's data and cache directories: the sealed store (the secret seed of the private test splits, the
  private labels, per-example results of an evaluation, the leaderboard) and the cache, wherever MESHPILOT_DATA,
  MESHPILOT_CACHE or the platform (XDG_DATA_HOME, XDG_CACHE_HOME) put them now or by default, and any other
  directory shaped like a sealed store (evalsuite.store.is_store);
- credential files: the config of any git repository (remote URLs may hold tokens), .git-credentials, .netrc,
  .pypirc, .npmrc, .pgpass, .ssh/, .aws/, .gnupg/, .docker/, .kube/, .config/gh/, .config/gcloud/, key and
  certificate files (.pem, .key, .p12, ...) and any file that starts as a private key does;
- /proc (a process's environment and open files).

Judged on the file itself, not on how a path spells it: on its real path (symlinks followed, `..` resolved), with
every name compared case-insensitively, the protected directories recognised by inode (a case-insensitive file
system, a bind mount), and a file with more than one hard link compared by inode with every protected file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

from platformdirs import user_cache_dir, user_data_dir

from evalsuite.store import default_root, is_store
from trainer.config import ConfigError
from trainer.host.cache import cache_root

CREDENTIAL_DIRS = {".ssh", ".aws", ".gnupg", ".docker", ".kube", ".azure", ".password-store"}
CREDENTIAL_CONFIG_DIRS = {"gh", "gcloud", "hub"}  # under .config/
CREDENTIAL_FILES = {
    ".netrc", "_netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass", ".my.cnf", "credentials",
    "credentials.json", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
}  # fmt: skip
KEY_SUFFIXES = {".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk"}
# Credential files of the home directory that a hard link elsewhere could expose.
HOME_CREDENTIALS = (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".pgpass", ".config/gh", ".config/gcloud")


class PrivatePathError(ConfigError):
    """The agent was asked to read a private path; one line, naming the rule, never the content."""


def check_readable(path: Path) -> Path:
    """The real path of `path`; PrivatePathError when the agent must not read what it names."""
    real = Path(os.path.realpath(path))
    reason = _why_private(real)
    if reason is not None:
        raise PrivatePathError(f"{path} is private ({reason}): the agent does not read it")
    return real


def read_text(path: Path) -> str:
    """The text of a file the agent may read, checked again on the file actually opened: a path swapped for a
    link to a private file between the check and the read is refused, not read."""
    real = check_readable(path)
    checked = os.stat(real)
    with open(os.open(real, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        opened = os.fstat(f.fileno())
        if not os.path.samestat(opened, checked) or _protected_inode(real, opened) is not None:
            raise PrivatePathError(f"{path} changed while it was checked: the agent does not read it")
        return f.read().decode()


def private_directories() -> list[Path]:
    """meshpilot's data and cache directories: as configured now and at the platform's default places."""
    return [default_root(), Path(user_data_dir("meshpilot")), cache_root(), Path(user_cache_dir("meshpilot"))]


def _why_private(real: Path) -> str | None:
    """Why the agent must not read the real path `real`, or None."""
    names = [part.lower() for part in real.parts]
    if names[1:2] == ["proc"]:
        return "process information"
    reason = _in_private_directory(real) or _credential_by_name(real, names)
    if reason is None and real.is_file():
        reason = _credential_by_content(real) or _protected_inode(real, real.stat())
    return reason


def _in_private_directory(real: Path) -> str | None:
    protected = {_identity(d) for d in private_directories()} - {None}
    for directory in (real, *real.parents):
        if _identity(directory) in protected or is_store(directory):
            return "meshpilot's data or cache directory: the sealed store's secret and labels stay sealed"
    return None


def _credential_by_name(real: Path, names: list[str]) -> str | None:
    pairs = pairwise(names)
    if CREDENTIAL_DIRS & set(names) or any(a == ".config" and b in CREDENTIAL_CONFIG_DIRS for a, b in pairs):
        return "a credentials directory"
    if names[-1] in CREDENTIAL_FILES or real.suffix.lower() in KEY_SUFFIXES:
        return "a credentials or key file"
    if names[-1] == "config" and (names[-2:-1] == [".git"] or _is_git_dir(real.parent)):
        return "a git repository's config, whose remote URLs may hold tokens"
    return None


def _credential_by_content(real: Path) -> str | None:
    try:
        with real.open("rb") as f:
            start = f.read(80)
    except OSError:
        return None
    return "a private key" if start.startswith(b"-----BEGIN") and b"PRIVATE KEY-----" in start else None


def _protected_inode(real: Path, found: os.stat_result) -> str | None:
    """For a file with other hard links: whether one of them is a protected file."""
    if found.st_nlink < 2:
        return None
    for protected in _protected_files(real):
        try:
            if os.path.samestat(found, protected.stat()):
                return f"a hard link to {protected.name}, which is private"
        except OSError:
            continue
    return None


def _protected_files(real: Path) -> Iterator[Path]:
    """Every file of meshpilot's data and cache directories, the home directory's credentials, and the git config
    of the repository holding `real`."""
    home = Path.home()
    roots = [*private_directories(), *(home / d for d in CREDENTIAL_DIRS), *(home / c for c in HOME_CREDENTIALS)]
    for root in roots:
        if root.is_file():
            yield root
        for directory, _, files in os.walk(root):
            yield from (Path(directory) / name for name in files)
    for directory in real.parents:
        if (directory / ".git" / "config").is_file():
            yield directory / ".git" / "config"
            return


def _is_git_dir(directory: Path) -> bool:
    return (directory / "HEAD").is_file() and (directory / "objects").is_dir()


def _identity(path: Path) -> tuple[int, int] | None:
    """What identifies a file or directory however a path spells it; None for nothing there."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino
