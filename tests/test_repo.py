"""The git writer on real repositories: a branch of meshpilot's own, commits of its files only, the user's checkout
untouched, and clear refusals (not a repository, detached HEAD, dirty paths, someone else's branch)."""

from __future__ import annotations

import git
import pytest
from test_report import USER_README, make_repo

from agent.repo.git_writer import commit, diff, ensure_clean, open_repository, prepare_branch, push, undo
from agent.repo.secrets import RepoError

BRANCH = "meshpilot/tiny-2025-03-01"
FILES = {"docs/report/README.md": b"# Report\n\nfigure 1\n", "docs/report/plot.png": b"\x89PNG\r\n\x1a\n\x00\x01"}


def loose_objects(repo: git.Repo) -> int:
    return int(dict(line.split(": ") for line in repo.git.count_objects("-v").splitlines())["count"])


def test_commit_holds_only_the_files_and_leaves_the_checkout_alone(tmp_path):
    repo = make_repo(tmp_path)
    (tmp_path / "train.py").write_text("staged work\n")
    repo.index.add(["train.py"])
    (tmp_path / "README.md").write_text(USER_README + "unstaged edit\n")
    (tmp_path / "notes.txt").write_text("untracked\n")
    index = (tmp_path / ".git" / "index").read_bytes()
    target = prepare_branch(open_repository(tmp_path), BRANCH)
    ensure_clean(repo, ["docs/report"])
    sha = commit(target, FILES, "meshpilot: report", author="Ada Lovelace <ada@example.com>")
    new = repo.commit(sha)
    assert new.parents == (repo.head.commit,) and repo.heads[BRANCH].commit == new
    assert sorted(repo.git.diff("--name-only", "main", sha).splitlines()) == sorted(FILES)
    assert all(new.tree[path].data_stream.read() == data for path, data in FILES.items())
    assert new.tree["README.md"].data_stream.read().decode() == USER_README  # the committed file, not the edit
    assert (new.author.name, new.author.email, new.committer.email) == ("Ada Lovelace", "ada@example.com",
                                                                         "ada@example.com")  # fmt: skip
    assert new.trailers_dict == {"Generated-by": ["meshpilot"]}
    assert repo.active_branch.name == "main" and (tmp_path / ".git" / "index").read_bytes() == index
    assert (tmp_path / "README.md").read_text().endswith("unstaged edit\n") and (tmp_path / "notes.txt").is_file()
    assert not (tmp_path / "docs").exists()


def test_author_comes_from_the_environment_when_not_given(tmp_path, monkeypatch):
    monkeypatch.setenv("MESHPILOT_GIT_AUTHOR", "Lab Bot <bot@lab.example>")
    repo = make_repo(tmp_path)
    sha = commit(prepare_branch(repo, BRANCH), FILES, "report")
    assert repo.commit(sha).author.email == "bot@lab.example"


def test_a_rerun_commits_on_top_and_an_unchanged_one_commits_nothing(tmp_path):
    repo = make_repo(tmp_path)
    first = commit(prepare_branch(repo, BRANCH), FILES, "report")
    assert commit(prepare_branch(repo, BRANCH), FILES, "report") is None
    second = commit(prepare_branch(repo, BRANCH), {**FILES, "docs/report/README.md": b"# Report\n\nfigure 2\n"}, "r")
    assert repo.commit(second).parents == (repo.commit(first),)
    assert repo.git.diff("--name-only", first, second).splitlines() == ["docs/report/README.md"]


def test_a_merged_branch_starts_again_from_the_current_branch(tmp_path):
    repo = make_repo(tmp_path)
    commit(prepare_branch(repo, BRANCH), FILES, "report")
    repo.git.merge("--ff-only", BRANCH)
    (tmp_path / "train.py").write_text("later work\n")
    repo.index.add(["train.py"])
    repo.index.commit("later work")
    target = prepare_branch(repo, BRANCH)
    assert target.parent == repo.head.commit
    sha = commit(target, {"docs/report/README.md": b"updated\n"}, "report")
    assert repo.commit(sha).parents == (repo.head.commit,)


def test_dry_run_diff_writes_nothing(tmp_path):
    repo = make_repo(tmp_path)
    target = prepare_branch(repo, BRANCH)
    before = loose_objects(repo)
    text = diff(target, {**FILES, "README.md": b"# Experiments\n\nnew line\n"})
    assert "--- a/README.md\n+++ b/README.md\n" in text and "-Notes from 2024: 3 runs on 8 GPUs.\n+new line\n" in text
    assert "--- /dev/null\n+++ b/docs/report/README.md\n" in text and "+figure 1\n" in text
    assert "Binary files /dev/null and b/docs/report/plot.png differ" in text
    assert diff(target, {"README.md": USER_README.encode()}) == ""
    assert loose_objects(repo) == before and BRANCH not in repo.heads


def test_uncommitted_changes_to_paths_it_would_write_are_refused(tmp_path):
    repo = make_repo(tmp_path)
    ensure_clean(repo, ["README.md", "docs/report"])
    (tmp_path / "README.md").write_text("edited\n")
    with pytest.raises(RepoError, match=r"uncommitted changes to files meshpilot would write: README.md; commit"):
        ensure_clean(repo, ["README.md", "docs/report"])
    repo.git.checkout("README.md")
    (tmp_path / "docs" / "report").mkdir(parents=True)
    (tmp_path / "docs" / "report" / "draft.md").write_text("mine\n")
    with pytest.raises(RepoError, match=r"docs/report/draft\.md"):
        ensure_clean(repo, ["README.md", "docs/report"])
    ensure_clean(repo, ["README.md", "docs/other"])  # changes elsewhere are the user's business


def test_not_a_repository_detached_head_and_empty_repository(tmp_path):
    with pytest.raises(RepoError, match="is not the top folder of a git repository"):
        open_repository(tmp_path)
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "repo" / "sub").mkdir()
    with pytest.raises(RepoError, match="is not the top folder"):
        open_repository(tmp_path / "repo" / "sub")
    repo.git.checkout("--detach")
    with pytest.raises(RepoError, match="HEAD is detached; check out the branch"):
        open_repository(tmp_path / "repo")
    git.Repo.init(tmp_path / "empty", initial_branch="main")
    with pytest.raises(RepoError, match="the branch main has no commits yet"):
        open_repository(tmp_path / "empty")
    git.Repo.init(tmp_path / "bare.git", bare=True)
    with pytest.raises(RepoError, match="is a bare repository"):
        open_repository(tmp_path / "bare.git")


def test_a_branch_with_someone_elses_commits_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    repo.git.checkout("-b", BRANCH)
    (tmp_path / "mine.txt").write_text("a person's work\n")
    repo.index.add(["mine.txt"])
    theirs = repo.index.commit("a person's commit")
    repo.git.checkout("main")
    with pytest.raises(RepoError, match=rf"branch {BRANCH} already exists with commits meshpilot did not make"):
        prepare_branch(repo, BRANCH)
    assert repo.heads[BRANCH].commit == theirs


def test_the_checked_out_branch_and_bad_names_are_refused(tmp_path):
    repo = make_repo(tmp_path)
    commit(prepare_branch(repo, BRANCH), FILES, "report")
    repo.git.checkout(BRANCH)
    with pytest.raises(RepoError, match=f"{BRANCH} is checked out"):
        prepare_branch(repo, BRANCH)
    repo.git.checkout("main")
    with pytest.raises(RepoError, match="not a valid git branch name"):
        prepare_branch(repo, "meshpilot/bad..name")


def test_a_branch_moved_by_someone_else_meanwhile_is_not_overwritten(tmp_path):
    repo = make_repo(tmp_path)
    target = prepare_branch(repo, BRANCH)
    repo.create_head(BRANCH, repo.head.commit)  # another process made the branch after meshpilot looked
    with pytest.raises(RepoError, match="changed while meshpilot wrote it"):
        commit(target, FILES, "report")
    assert repo.heads[BRANCH].commit == repo.head.commit


def test_undo_puts_the_branch_back(tmp_path):
    repo = make_repo(tmp_path)
    target = prepare_branch(repo, BRANCH)
    commit(target, FILES, "report")
    undo(target, pushed=False)
    assert BRANCH not in repo.heads
    first = commit(prepare_branch(repo, BRANCH), FILES, "report")
    target = prepare_branch(repo, BRANCH)
    commit(target, {"docs/report/README.md": b"changed\n"}, "report")
    undo(target, pushed=False)
    assert repo.heads[BRANCH].commit.hexsha == first


def test_the_branch_on_the_remote_is_built_on_and_a_diverged_one_refused(tmp_path):
    git.Repo.init(tmp_path / "remote.git", bare=True, initial_branch="main")
    repo = make_repo(tmp_path / "repo")
    repo.create_remote("origin", str(tmp_path / "remote.git"))
    repo.git.push("origin", "main")
    target = prepare_branch(repo, BRANCH, "origin")
    first = commit(target, FILES, "report")
    push(target)
    clone = git.Repo.clone_from(str(tmp_path / "remote.git"), tmp_path / "clone")
    in_clone = prepare_branch(clone, BRANCH, "origin")
    assert in_clone.parent.hexsha == first and in_clone.remote_tip == first and in_clone.local_tip is None
    commit(in_clone, {"docs/report/README.md": b"from the clone\n"}, "report")  # not pushed
    target = prepare_branch(repo, BRANCH, "origin")
    commit(target, {"docs/report/README.md": b"from the first copy\n"}, "report")
    push(target)
    with pytest.raises(RepoError, match=f"branch {BRANCH} differs locally and on the remote"):
        prepare_branch(clone, BRANCH, "origin")
