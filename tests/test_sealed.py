"""Sealed means sealed, and secrets never leave (issue 35, items 1 and 2).

The agent is pointed at a home directory that holds the sealed store, a second store, meshpilot's caches and
credential files, and asked, through its tools, the offline planner and `meshpilot ask`, to read each of them by
every spelling: directly, through `..`, a symlink, a hard link and another case. Nothing it returns, prints or
stores holds the store's secret or a private label. Then tokens are planted in a remote URL, in the environment
and in a file the agent reads: none reaches a reply, a tool result or the bytes of the conversation database,
which only its owner can read.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from agent.private import PrivatePathError, check_readable
from agent.repo.secrets import redact
from agent.session import Agent, Reply, ToolResult
from evalsuite.cache import ResumeCache
from evalsuite.errors import BenchError
from evalsuite.store import Store
from tests.support import meshpilot, write_experiment
from tests.test_agent_graph import ScriptedModel, call

STORE = Path(".local/share/meshpilot")  # the platform's data directory under HOME, where the store goes by default


def stored(path: Path) -> bytes:
    """A file's bytes and, for an SQLite database, every value of every table (serialised messages included)."""
    data = path.read_bytes()
    if data.startswith(b"SQLite format 3\x00"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                for row in db.execute(f'SELECT * FROM "{table}"'):
                    data += b"".join(v if isinstance(v, bytes) else str(v).encode() for v in row)
    return data


def written_by_the_agent(home: Path) -> list[Path]:
    """Every file the agent wrote: its state directory (conversation database, plans, results)."""
    return [p for p in (home / ".meshpilot").rglob("*") if p.is_file()]


@pytest.fixture
def home(tmp_path, monkeypatch) -> dict:
    """A home directory with the sealed store at its default place, an older store elsewhere in it, the configured
    and the default cache, and links to them; the secrets and labels that must stay sealed."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MESHPILOT_DATA", "")  # the platform's default place: HOME/.local/share/meshpilot
    monkeypatch.setenv("MESHPILOT_CACHE", str(home / "work-cache"))  # configured, not the default
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    label = "LABEL-" + secrets.token_hex(8)
    store = Store.open()
    assert store.root == (home / STORE).resolve()
    store.seal("secret_qa", "test", [{"question": "What is 7 squared?", "answer": label}])
    ResumeCache(store.cache_dir, "k" * 32).add({0: {"prediction": label}})
    old = Store.open(home / "old-store")  # a store MESHPILOT_DATA pointed at once: known by its shape
    for cache in (home / "work-cache", home / ".cache" / "meshpilot"):
        cache.mkdir(parents=True)
        (cache / "calibration.json").write_text(json.dumps({"label": label}))
    (home / "store-link").symlink_to(home / STORE)
    (home / "secret-link.json").symlink_to(home / STORE / "secret.json")
    os.link(home / STORE / "secret.json", home / "notes.json")  # a hard link: same file, innocent name
    os.link(store.cache_dir / f"{'k' * 32}.jsonl", home / "results.jsonl")
    write_experiment(home)
    return {"home": home, "sealed": [store.secret(), old.secret(), label]}


# Every way of naming a sealed file or directory from the home directory.
PRIVATE_PATHS = [
    f"{STORE}/secret.json",
    str(STORE),
    f"{STORE}/sealed/secret_qa/test.jsonl.gz",
    f"{STORE}/cache/{'k' * 32}.jsonl",
    f"{STORE}/leaderboard.sqlite",
    "./.local/share/../share/meshpilot/./secret.json",
    ".local/share/meshpilot//secret.json",
    "store-link/secret.json",
    "secret-link.json",
    "notes.json",
    "results.jsonl",
    "old-store/secret.json",
    "old-store",
    "work-cache/calibration.json",
    ".cache/meshpilot/calibration.json",
]


def assert_nothing_sealed_in(texts: list[str], sealed: list[str]) -> None:
    for text in texts:
        for value in sealed:
            assert value not in text


def test_the_offline_agent_in_the_home_directory_reads_nothing_sealed(home):
    agent = Agent(home["home"])
    shown = []
    for path in PRIVATE_PATHS:
        events = list(agent.send("t", f"/read {path}"))
        [result] = [e for e in events if isinstance(e, ToolResult)]
        assert result.error and "is private" in result.result, (path, result)
        shown += [json.dumps(e.as_dict()) for e in events]
    agent.close()
    assert_nothing_sealed_in(shown, home["sealed"])
    assert_nothing_sealed_in([stored(p).decode(errors="replace") for p in written_by_the_agent(home["home"])],
                             home["sealed"])  # fmt: skip
    # The control: an ordinary file of the same directory is read, so the refusals above are the rule's.
    events = list(Agent(home["home"]).send("t2", "/read meshpilot.yaml"))
    assert "hidden_size" in events[-1].text


def test_every_tool_that_takes_a_path_refuses_sealed_ones(home):
    """The LLM path: a model that asks each tool taking a path for the store gets a refusal, and so sees nothing."""
    script = [
        call("plan_layouts", "c1", devices=1, device_type="cpu", experiment=f"{STORE}/secret.json"),
        call("launch_run", "c2", experiment="old-store/secret.json", nproc=1, steps=1),
        call("read_results", "c3", run=str(STORE)),
        call("read_sweep", "c4", sweep="store-link"),
        call("run_benchmark", "c5", model="work-cache", suite="notes.json"),
        call("wait_for_job", "c6", job_id=f"{STORE}/cache"),
        call("read_file", "c7", path="results.jsonl"),
    ]
    model = ScriptedModel(script=[*script, call("read_file", "c8", path="meshpilot.yaml"), AIMessage("done")])
    events = list(Agent(home["home"], model).send("t", "read the store"))
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.error for r in results] == [True] * len(script) + [False]
    assert all("is private" in str(r.result) for r in results[:-1]), results
    assert "hidden_size" in results[-1].result["text"]
    assert_nothing_sealed_in([json.dumps(e.as_dict()) for e in events] + [str(m) for m in model.seen],
                             home["sealed"])  # fmt: skip


def test_meshpilot_ask_in_the_home_directory_prints_and_stores_nothing_sealed(home):
    env = {k: os.environ[k] for k in ("HOME", "MESHPILOT_DATA", "MESHPILOT_CACHE")}
    env |= {"XDG_DATA_HOME": "", "XDG_CACHE_HOME": ""}
    printed = []
    for path in (f"{STORE}/secret.json", "./.local/share/../share/meshpilot/./secret.json", "notes.json"):
        done = meshpilot("ask", "--repo", str(home["home"]), "--json", f"/read {path}", env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "is private" in done.stdout
        printed.append(done.stdout + done.stderr)
    assert_nothing_sealed_in(printed, home["sealed"])
    database = home["home"] / ".meshpilot" / "agent.sqlite"
    assert database in written_by_the_agent(home["home"])
    assert_nothing_sealed_in([stored(p).decode(errors="replace") for p in written_by_the_agent(home["home"])],
                             home["sealed"])  # fmt: skip


def test_credential_files_are_refused_by_rule(tmp_path, monkeypatch):
    """By what the file is, however the path spells it: names in any case, symlinks, hard links, key contents."""
    monkeypatch.setenv("HOME", str(tmp_path))
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
    files = {
        ".netrc": "machine github.com login me password hunter2hunter2",
        ".git-credentials": "https://me:tok@github.com",
        ".pypirc": "[pypi]\npassword = pypi-xyz",
        ".ssh/id_ed25519": key,
        ".ssh/config": "Host *",
        ".aws/credentials": "[default]\naws_secret_access_key = abc",
        ".config/gh/hosts.yml": "github.com:\n  oauth_token: gho_abc",
        ".docker/config.json": '{"auths": {}}',
        ".kube/config": "users: []",
        "deploy/server.pem": "certificate",
        "deploy/renamed-key.txt": key,  # a private key by its content, whatever its name
        "Project/.GIT/CONFIG": "[remote]",  # another case: one file on a case-insensitive file system
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    (repo / "netrc-link").symlink_to(tmp_path / ".netrc")
    os.link(tmp_path / ".netrc", repo / "innocent.txt")
    os.link(repo / ".git" / "config", repo / "settings.ini")
    refused = [*files, "repo/.git/config", "repo/.git/../.git/config", "remote.git/config", "repo/netrc-link",
               "repo/innocent.txt", "repo/settings.ini", ".ssh", ".config/gh"]  # fmt: skip
    for name in refused:
        with pytest.raises(PrivatePathError, match="is private"):
            check_readable(tmp_path / name)
    with pytest.raises(PrivatePathError, match="process information"):
        check_readable(Path("/proc/self/environ"))
    (repo / "docs").mkdir()
    (repo / "docs" / "config").write_text("not git's")
    os.link(repo / "docs" / "config", repo / "docs" / "config-copy")  # hard links to an ordinary file
    for name in ("repo/docs/config", "repo/docs/config-copy", "repo/.git/HEAD", "repo", ".config"):
        assert check_readable(tmp_path / name) == (tmp_path / name).resolve()


def test_the_agent_reads_no_credential_file_of_its_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".netrc").write_text("machine example.com password hunter2hunter2")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    agent = Agent(tmp_path)
    for path in (".netrc", ".git/config", ".GIT/config", "./.git/../.git/config"):
        [result] = [e for e in agent.send("t", f"/read {path}") if isinstance(e, ToolResult)]
        assert result.error and "is private" in result.result, path


@pytest.mark.parametrize("marker", [".hg", ".svn", ".git"])
def test_the_store_refuses_to_lie_in_any_version_controlled_repository(tmp_path, marker):
    (tmp_path / marker).mkdir()
    with pytest.raises(BenchError, match=r"lies inside the .* " + re.escape(str(tmp_path))):
        Store.open(tmp_path / "data" / "store")
    assert not (tmp_path / "data").exists()
    Store.open(tmp_path.parent / f"{tmp_path.name}-store")  # beside the repository is fine


# --- secrets never leave -----------------------------------------------------------------------------------------


def token(prefix: str, length: int = 36) -> str:
    return prefix + secrets.token_hex(length)[:length]


@pytest.fixture
def planted(tmp_path) -> dict:
    """A repository with a token in its remote URL and in a notes file, and tokens in the environment."""
    env = {
        "GITHUB_TOKEN": token("ghp_"),
        "HF_TOKEN": token("hf_", 34),
        "MY_SERVICE_SECRET": secrets.token_hex(12),  # any *_SECRET variable, whatever shape its value has
        "OPENAI_API_KEY": token("sk-proj-", 40),
    }
    in_url, pat, aws, slack, hexed = token("glpat-", 20), token("github_pat_", 40), "AKIA" + "Q7" * 8, \
        token("xoxb-", 30), secrets.token_hex(20)  # fmt: skip
    repo = tmp_path / "repo"
    repo.mkdir()
    write_experiment(repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    url = f"https://oauth2:{in_url}@gitlab.example.com/acme/exp.git"
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", url], check=True)
    notes = [
        "# Notes: ordinary text stays",
        f"git clone {url}",
        f"export HF_TOKEN={env['HF_TOKEN']}",
        f"the service secret is {env['MY_SERVICE_SECRET']}",
        f"GITHUB_TOKEN={env['GITHUB_TOKEN']} and OPENAI_API_KEY={env['OPENAI_API_KEY']}",
        f"fine-grained: {pat}",
        f"aws: {aws}",
        f'slack "{slack}"',
        f'"api_key": "{hexed}"',
        f"Authorization: Bearer {hexed}Zz",
        "commit 0123456789abcdef0123456789abcdef01234567, tokens_per_s 36294.31",
    ]
    (repo / "notes.md").write_text("\n".join(notes) + "\n")
    tokens = [*env.values(), in_url, pat, aws, slack, hexed]
    return {"repo": repo, "env": env, "tokens": tokens}


def assert_no_token_in(texts: list[str], tokens: list[str]) -> None:
    for text in texts:
        for value in tokens:
            assert value not in text


def database_files(repo: Path) -> list[Path]:
    return sorted((repo / ".meshpilot").glob("agent.sqlite*"))


def test_planted_tokens_reach_no_reply_tool_result_or_database(planted):
    repo = planted["repo"]
    printed = []
    for request in ("/read notes.md", "/read .git/config", f"/read {planted['tokens'][4]}/missing.txt"):
        done = meshpilot("ask", "--repo", str(repo), "--json", request, env=planted["env"])
        assert done.returncode == 0, done.stderr[-2000:]
        printed.append(done.stdout + done.stderr)
    assert "ordinary text stays" in printed[0] and "0123456789abcdef0123456789abcdef01234567" in printed[0]
    assert "tokens_per_s 36294.31" in printed[0] and "gitlab.example.com/acme/exp.git" in printed[0]
    assert "is private" in printed[1]
    assert_no_token_in(printed, planted["tokens"])
    assert_no_token_in([stored(p).decode(errors="replace") for p in database_files(repo)], planted["tokens"])


def test_what_the_model_writes_and_reads_is_redacted_before_it_is_kept(planted, monkeypatch):
    """The LLM path: a token in the user's request, in a tool's arguments and error, and in the model's reply."""
    for name, value in planted["env"].items():
        monkeypatch.setenv(name, value)
    github, hf = planted["env"]["GITHUB_TOKEN"], planted["env"]["HF_TOKEN"]
    reply = AIMessage(f"Your token is {github}; and HF's {hf}.")
    script = [call("read_file", "c1", path=f"{github}.txt"), call("read_file", "c2", path="notes.md"), reply]
    model = ScriptedModel(script=script)
    agent = Agent(planted["repo"], model)
    events = list(agent.send("t", f"my token is {github}, read notes.md"))
    assert isinstance(events[-1], Reply) and "Your token is ***" in events[-1].text
    shown = [json.dumps(e.as_dict()) for e in events] + [str(m) for seen in model.seen for m in seen]
    assert_no_token_in(shown, planted["tokens"])
    assert_no_token_in([str(m) for m in agent.messages("t")], planted["tokens"])
    agent.close()
    assert_no_token_in([stored(p).decode(errors="replace") for p in database_files(planted["repo"])],
                       planted["tokens"])  # fmt: skip


def test_the_conversation_database_is_owner_only_even_when_it_was_not(tmp_path):
    write_experiment(tmp_path)
    list(Agent(tmp_path).send("t", "/read meshpilot.yaml"))
    state = tmp_path / ".meshpilot"
    state.chmod(0o755)
    for path in database_files(tmp_path):
        path.chmod(0o644)
    (state / "agent.sqlite-wal").touch(mode=0o666)
    os.chmod(state / "agent.sqlite-wal", 0o666)
    agent = Agent(tmp_path)
    list(agent.send("t", "/read meshpilot.yaml"))
    files = database_files(tmp_path)
    assert {p.name for p in files} >= {"agent.sqlite", "agent.sqlite-wal", "agent.sqlite-shm"}  # open: WAL mode
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    agent.close()


def test_a_new_conversation_database_is_owner_only_whatever_the_umask(tmp_path):
    write_experiment(tmp_path)
    previous = os.umask(0)
    try:
        agent = Agent(tmp_path)
        list(agent.send("t", "/read meshpilot.yaml"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / ".meshpilot").stat().st_mode) == 0o700
    for path in database_files(tmp_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    agent.close()


@pytest.mark.parametrize(
    "secret",
    [
        "ghp_" + "a1B2" * 9,
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "glpat-" + "x1Y2z3" * 4,
        "hf_" + "AbCdEf123" * 4,
        "sk-proj-" + "Ab1" * 16,
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_key_shaped_strings_are_redacted(secret):
    assert redact(f"found {secret} here", env={}) == "found *** here"


def test_redaction_keeps_ordinary_result_text():
    ordinary = (
        '{"source": "runs/meshpilot-3f2a1b2c/metrics.json", "tokens_per_s": 36294.31, "layout": "dp_shard=2,tp=2", '
        '"commit": "0123456789abcdef0123456789abcdef01234567", "task": "secret_qa", "tokenizer_hash": '
        '"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "recommended_global_batch_tokens": '
        '1234567890123456789, "skipped": "sk-learn-layouts", "note": "the key-value recall task"}'
    )
    assert redact(ordinary, env={"PATH": "/usr/bin", "SHORT_TOKEN": "abc"}) == ordinary
    assert redact('{"secret": "9f86d081884c7d659a2feaa0c55ad015"}', env={}) == '{"secret": "***"}'
    assert redact("pip install --index-url https://__token__:pypi-AgEI@example.org/simple", env={}) == (
        "pip install --index-url https://***@example.org/simple"
    )
    assert redact("value: s3cr3t-Value-0001", env={"DEPLOY_TOKEN": "s3cr3t-Value-0001"}) == "value: ***"
