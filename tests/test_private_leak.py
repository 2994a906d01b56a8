"""No private label leaves the sealed store, whatever the agent does with it.

A user seals a private test split whose labels include a canary, then drives the agent from the command line
(offline planner, unattended): a sweep, a training run, its benchmark on the private split, the report and a
pull request. Then a scan looks for the canary in everything that exists afterwards: every file under the test's
directory (the agent's SQLite state, job, torchrun and trainer logs, results, the report, the pull request's
description, the leaderboard), every git object of the repository and its remote (the whole history, all
branches), and every reply and leaderboard listing printed. The scan reads through gzip and SQLite, and must find
the canary exactly once: in the sealed store, where it belongs (the control that shows it could find it at all).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import secrets
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml
from support import meshpilot, write_experiment
from test_evalsuite import SECRET_QA

from agent.cli import main

pytestmark = pytest.mark.slow  # an agent-driven sweep, benchmark and pull request

SEALED = Path("store") / "sealed" / "secret_qa" / "test.jsonl.gz"


def git(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The user's repository after the agent's benchmark, report and pull request; what was printed; the canary."""
    root = tmp_path_factory.mktemp("leak")
    env = {"MESHPILOT_DATA": str(root / "store")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MESHPILOT_DATA", env["MESHPILOT_DATA"])  # for the commands run in this process
        return _agent_session(root, env)


def _agent_session(root: Path, env: dict[str, str]) -> tuple[Path, list[str], str]:
    repo, remote = root / "repo", root / "remote.git"
    repo.mkdir()
    git(root, "init", "-q", "--bare", str(remote))
    git(repo, "init", "-q", "-b", "main")
    write_experiment(repo, {"search": {"trials": 1, "trial_steps": 2}})
    (repo / "tasks").mkdir()
    (repo / "tasks" / "secret_qa.yaml").write_text(yaml.safe_dump(SECRET_QA))
    dev = [{"question": f"What is {n} doubled?", "answer": str(2 * n)} for n in range(4)]
    (repo / "tasks" / "secret_qa_dev.jsonl").write_text("".join(json.dumps(d) + "\n" for d in dev))
    (repo / ".gitignore").write_text(".meshpilot/\nruns/\nsweeps/\n")  # as the README advises
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "experiment")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")

    canary = "CANARY-" + secrets.token_hex(12)
    private = root / "private.jsonl"  # outside the repository, deleted once sealed
    items = [{"question": f"What is {n} squared?", "answer": str(n * n)} for n in range(5)]
    items[2]["answer"] = canary
    private.write_text("".join(json.dumps(i) + "\n" for i in items))
    printed = [_main("bench", "seal", str(repo / "tasks" / "secret_qa.yaml"), str(private), "--split", "test")]
    private.unlink()

    ask = ("ask", "--repo", str(repo), "--thread", "leak", "--yes")
    # Sweep trials keep no checkpoint: the benchmark scores a run trained after the sweep (as the demo does).
    for request in ("/sweep trials=1", "/run nproc=1 steps=2", "/bench suite=tasks/secret_qa.yaml", "/pr"):
        printed.append(_ok(meshpilot(*ask, request, env=env)))
    for flags in ([], ["--private"], ["--json"], ["--json", "--private"]):
        printed.append(_main("bench", "leaderboard", *flags))
    return root, printed, canary


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def _main(*args: str) -> str:
    """A quick `meshpilot` command, run in this process (the agent's requests each get a process of their own)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == 0, out.getvalue() + err.getvalue()
    return out.getvalue() + err.getvalue()


def readable(path: Path) -> bytes:
    """A file's bytes, plus its text when gzip-compressed, plus every value of every table of an SQLite file."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data += gzip.decompress(data)
    if data.startswith(b"SQLite format 3\x00"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for row in db.execute(f'SELECT * FROM "{table}"'):
                    data += b"".join(v if isinstance(v, bytes) else str(v).encode() for v in row)
    return data


def places_holding(canary: str, root: Path) -> list[str]:
    """Every file under root, and the git objects of every repository there, that hold the canary."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file()]
    found = [str(p.relative_to(root)) for p in files if canary.encode() in readable(p)]
    for git_dir in [p.parent for p in root.rglob("HEAD") if (p.parent / "objects").is_dir()]:
        objects = git(git_dir, "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch")
        if canary.encode() in objects:
            found.append(f"git objects of {git_dir.relative_to(root)}")
    return found


def test_the_canary_is_only_in_the_sealed_store(world):
    root, printed, canary = world
    assert places_holding(canary, root) == [str(SEALED)]
    for text in printed:
        assert canary not in text


def test_the_scan_covered_what_the_agent_wrote(world):
    """The places the scan must read exist: otherwise finding nothing would prove nothing."""
    root, printed, _ = world
    repo = root / "repo"
    names = {p.name for p in root.rglob("*") if p.is_file()}
    assert {"torchrun.log", "job.log", "log.txt", "leaderboard.sqlite", "result.json"} <= names
    state = [p for p in (repo / ".meshpilot").rglob("*") if p.is_file() and readable(p) != p.read_bytes()]
    assert state, "the agent's SQLite state was read table by table"
    [description] = (repo / ".git" / "meshpilot" / "pull-requests").iterdir()
    [bench] = (repo / ".meshpilot" / "bench").glob("*/result.json")
    private = [t for t in json.loads(bench.read_text())["tasks"] if t["task"] == "secret_qa" and t["split"] == "test"]
    assert private[0]["private"] and private[0]["n_examples"] == 5  # the canary's split was really scored
    branch = next(b for b in git(root / "remote.git", "branch").decode().split() if b.startswith("meshpilot/"))
    report = git(root / "remote.git", "show", branch).decode()  # the pushed report's commit alone
    assert "### `secret_qa`" in report and "results/bench/secret-qa.json" in report  # it covers the private task
    assert description.read_text().startswith("[draft] meshpilot: layout sweep")
    assert any("secret_qa" in text for text in printed[-4:])  # and so does the leaderboard


def test_the_scan_finds_a_canary_in_history_sqlite_and_gzip(tmp_path):
    """Control for the scan itself: a canary only in git history (deleted since), in an SQLite row and in a gzip
    file is found in each place."""
    canary = "CANARY-" + secrets.token_hex(12)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "leak.txt").write_text(canary)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "leak")
    git(repo, "rm", "-q", "leak.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "gone")
    git(repo, "gc", "-q")  # packed and compressed: not in any file's bytes
    with contextlib.closing(sqlite3.connect(tmp_path / "state.sqlite")) as db, db:
        db.execute("CREATE TABLE t (v BLOB)")
        db.execute("INSERT INTO t VALUES (?)", (gzip.compress(b"x") + canary.encode(),))
    (tmp_path / "log.gz").write_bytes(gzip.compress(canary.encode()))
    found = places_holding(canary, tmp_path)
    assert found == ["log.gz", "state.sqlite", "git objects of repo/.git"]
