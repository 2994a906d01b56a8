"""Commits meshpilot's files to a branch of its own, without touching the user's checkout.

The commit is built with git plumbing on a temporary index: the parent's tree plus meshpilot's files, so the
commit holds exactly those files, the user's worktree, index and current branch stay as they were, and a failure
before the branch ref moves leaves nothing behind (unreferenced objects are invisible and gc'd). The ref moves
with a compare-and-swap, and pushes are plain fast-forwards: never a force push.

A re-run adds a commit on top of the branch it made before. A branch whose commits meshpilot did not all make
(each carries the trailer `Generated-by: meshpilot`) is someone else's: refused.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import git
from gitdb.base import IStream

from agent.repo.secrets import RepoError

TRAILER_KEY = "Generated-by"
TRAILER_VALUE = "meshpilot"
DEFAULT_AUTHOR = "meshpilot <meshpilot@users.noreply.localhost>"
_NO_COMMIT = "0" * 40


@dataclass
class Target:
    """Where the next commit goes: `branch`, on top of `parent`; what the refs were before, to undo a failure."""

    repo: git.Repo
    branch: str
    base: str  # the branch the user is on: the new branch starts there and the pull request targets it
    parent: git.Commit
    local_tip: str | None  # the local branch before this run; None when it did not exist
    remote: str | None = None
    remote_tip: str | None = None  # the branch on the remote before this run; None when it did not exist

    @property
    def root(self) -> Path:
        return Path(self.repo.working_tree_dir)


def open_repository(path: Path) -> git.Repo:
    """The repository whose working tree is `path`, checked to have a current branch with a commit."""
    try:
        repo = git.Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RepoError(f"{path} is not the top folder of a git repository") from None
    if repo.bare:
        raise RepoError(f"{path} is a bare repository; meshpilot needs one with a working tree")
    if repo.head.is_detached:
        raise RepoError(f"{path}: HEAD is detached; check out the branch the report should start from")
    if not repo.head.is_valid():
        raise RepoError(f"{path}: the branch {repo.active_branch.name} has no commits yet")
    return repo


def check_branch_name(repo: git.Repo, branch: str) -> None:
    try:
        repo.git.check_ref_format("--branch", branch)
    except git.GitCommandError:
        raise RepoError(f"{branch!r} is not a valid git branch name") from None


def check_remote(repo: git.Repo, remote: str) -> str:
    """The remote's URL; an error when it is not configured."""
    if remote not in [r.name for r in repo.remotes]:
        raise RepoError(f"no remote named {remote!r}; add one with: git remote add {remote} URL")
    return repo.remotes[remote].url


def prepare_branch(repo: git.Repo, branch: str, remote: str | None = None) -> Target:
    """Find the commit to build on: the branch meshpilot made before (local or on `remote`), or the current one."""
    check_branch_name(repo, branch)
    base = repo.active_branch.name
    if base == branch:
        raise RepoError(f"{branch} is checked out; check out the branch the report should start from")
    local = repo.heads[branch].commit.hexsha if branch in repo.heads else None
    remote_tip = _fetch_branch(repo, remote, branch) if remote else None
    tip = _reconcile(repo, branch, local, remote_tip)
    head = repo.head.commit
    if tip is None or repo.is_ancestor(tip, head.hexsha):
        parent = head  # new, or already merged: start again from the current branch (a fast-forward of it)
    else:
        _check_history(repo, branch, base, tip)
        parent = repo.commit(tip)
    return Target(repo, branch, base, parent, local, remote, remote_tip)


def _fetch_branch(repo: git.Repo, remote: str, branch: str) -> str | None:
    """The branch's commit on the remote, fetched so it can be built on; None when the remote lacks it."""
    check_remote(repo, remote)
    try:
        listed = repo.git.ls_remote("--heads", remote, f"refs/heads/{branch}")
        if not listed.strip():
            return None
        repo.git.fetch("--no-tags", remote, f"refs/heads/{branch}")
    except git.GitCommandError as e:
        raise RepoError(f"cannot read the remote {remote!r}: {_last_line(e)}") from None
    return listed.split()[0]


def _reconcile(repo: git.Repo, branch: str, local: str | None, remote: str | None) -> str | None:
    """The newer of the local and remote branch; refuses when they diverged (a push would need force)."""
    if local is None or remote is None or local == remote:
        return local or remote
    if repo.is_ancestor(remote, local):
        return local
    if repo.is_ancestor(local, remote):
        return remote
    raise RepoError(f"branch {branch} differs locally and on the remote; reconcile them by hand (no force push)")


def _check_history(repo: git.Repo, branch: str, base: str, tip: str) -> None:
    for commit in repo.iter_commits(f"{base}..{tip}"):
        if TRAILER_VALUE not in commit.trailers_dict.get(TRAILER_KEY, []):
            raise RepoError(
                f"branch {branch} already exists with commits meshpilot did not make "
                f"({commit.hexsha[:10]} {commit.summary!r}); delete or rename it, or choose another slug"
            )


def ensure_clean(repo: git.Repo, paths: list[str]) -> None:
    """Refuse when the worktree has uncommitted or untracked changes to any path meshpilot would write."""
    changed = repo.git.status("--porcelain", "--untracked-files=all", "--", *paths)
    if changed.strip():
        names = sorted({line[3:].split(" -> ")[-1] for line in changed.splitlines()})
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise RepoError(f"uncommitted changes to files meshpilot would write: {shown}; commit or stash them first")


def read_committed(target: Target, path: str) -> bytes | None:
    """The file at `path` in the parent commit, or None."""
    try:
        return (target.parent.tree / path).data_stream.read()
    except KeyError:
        return None


def changed_files(target: Target, files: dict[str, bytes]) -> list[str]:
    return sorted(path for path, data in files.items() if read_committed(target, path) != data)


def diff(target: Target, files: dict[str, bytes]) -> str:
    """What the commit would change, as a unified diff (binary files named only); writes nothing."""
    chunks = []
    for path in changed_files(target, files):
        old, new = read_committed(target, path), files[path]
        a_name = f"a/{path}" if old is not None else "/dev/null"
        if _is_binary(old or b"") or _is_binary(new):
            chunks.append(f"diff --git a/{path} b/{path}\nBinary files {a_name} and b/{path} differ\n")
            continue
        lines = difflib.unified_diff(
            (old or b"").decode().splitlines(keepends=True), new.decode().splitlines(keepends=True), a_name, f"b/{path}"
        )
        chunks.append(f"diff --git a/{path} b/{path}\n" + "".join(_with_newline(line) for line in lines))
    return "".join(chunks)


def commit(target: Target, files: dict[str, bytes], message: str, author: str | None = None) -> str | None:
    """Commit `files` on top of the parent and move the branch there; None when nothing would change."""
    repo = target.repo
    if not changed_files(target, files):
        if target.local_tip is None and target.remote_tip == target.parent.hexsha:
            _move_branch(target, target.parent.hexsha)  # the remote's branch, here too: to compare and describe
        return None
    tree = _write_tree(repo, target.parent, files)
    actor = parse_author(author)
    full_message = f"{message.rstrip()}\n\n{TRAILER_KEY}: {TRAILER_VALUE}\n"
    new = git.Commit.create_from_tree(
        repo, tree, full_message, parent_commits=[target.parent], head=False, author=actor, committer=actor
    )
    _move_branch(target, new.hexsha)
    return new.hexsha


def _write_tree(repo: git.Repo, parent: git.Commit, files: dict[str, bytes]) -> str:
    """The parent's tree with `files` added or replaced, built on a temporary index (the user's is untouched)."""
    entries = []
    for path, data in sorted(files.items()):
        blob = repo.odb.store(IStream(git.Blob.type, len(data), BytesIO(data)))
        entries.append(f"100644 {blob.hexsha.decode()}\t{path}\n")
    with tempfile.TemporaryDirectory(prefix="meshpilot-index-") as scratch:
        env = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        repo.git.read_tree(parent.hexsha, env=env)
        listing = Path(scratch) / "entries"
        listing.write_text("".join(entries))
        with listing.open("rb") as stream:
            repo.git.update_index("--index-info", istream=stream, env=env)
        return repo.git.write_tree(env=env)


def _move_branch(target: Target, new: str) -> None:
    """Point the local branch at `new`, only if it still is where it was when this run looked (compare-and-swap)."""
    try:
        old = target.local_tip or _NO_COMMIT
        target.repo.git.update_ref("-m", "meshpilot: report", f"refs/heads/{target.branch}", new, old)
    except git.GitCommandError as e:
        raise RepoError(f"branch {target.branch} changed while meshpilot wrote it: {_last_line(e)}") from None


def push(target: Target) -> bool:
    """Push the branch to the remote as a fast-forward, never forced; False when the remote already has it."""
    repo = target.repo
    local = repo.heads[target.branch].commit.hexsha if target.branch in repo.heads else None
    if local is None or local == target.remote_tip:
        return False
    refspec = f"refs/heads/{target.branch}:refs/heads/{target.branch}"
    try:
        repo.git.push("--porcelain", target.remote, refspec)
    except git.GitCommandError as e:
        raise RepoError(f"push of {target.branch} to {target.remote!r} failed: {_last_line(e)}") from None
    return True


def undo(target: Target, pushed: bool) -> None:
    """Put the refs back as they were before this run: nothing half-made is left behind.

    A branch this run created is deleted (locally, and on the remote when it was pushed). A branch that existed
    keeps its old local tip; on the remote it cannot be moved back without a force push, so it keeps the new,
    complete commit.
    """
    repo, ref = target.repo, f"refs/heads/{target.branch}"
    current = repo.heads[target.branch].commit.hexsha if target.branch in repo.heads else None
    if current is not None and current != target.local_tip:
        if target.local_tip is None:
            repo.git.update_ref("-d", ref, current)
        else:
            repo.git.update_ref("-m", "meshpilot: undo", ref, target.local_tip, current)
    if pushed and target.remote_tip is None:
        try:
            repo.git.push("--porcelain", target.remote, "--delete", ref)
        except git.GitCommandError as e:
            raise RepoError(f"could not delete {target.branch} from {target.remote!r} again: {_last_line(e)}") from None


def parse_author(author: str | None) -> git.Actor:
    """`Name <email>` from the argument, else MESHPILOT_GIT_AUTHOR, else meshpilot's own identity."""
    text = author or os.environ.get("MESHPILOT_GIT_AUTHOR") or DEFAULT_AUTHOR
    name, _, rest = text.partition("<")
    email = rest.rstrip().removesuffix(">")
    if not name.strip() or not email or ">" in email or "@" not in email:
        raise RepoError(f"author {text!r}: expected 'Name <email>'")
    return git.Actor(name.strip(), email)


def _is_binary(data: bytes) -> bool:
    if b"\0" in data:
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return True
    return False


def _with_newline(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _last_line(error: git.GitCommandError) -> str:
    text = (error.stderr or str(error)).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("stderr:")]
    return (lines[-1] if lines else text).strip("' ")
