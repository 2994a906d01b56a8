"""Pull requests: the local provider against real bare repositories on disk; GitHub, GitLab and Gitea against
recorded HTTP exchanges (responses), asserting the exact requests sent and the handling of auth failures, rate
limits and conflicts. Pushes always go to a real bare repository, so rollbacks are checked on real refs."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import git
import pytest
import responses
from test_report import BENCH, BRANCH, DATE, REPORT_DIR, SLUG, make_repo, shared_sweep

from agent.repo.providers import make_provider, parse_remote_url
from agent.repo.providers.base import PullRequest
from agent.repo.providers.gitea import GiteaProvider
from agent.repo.providers.github import GitHubProvider
from agent.repo.providers.gitlab import GitLabProvider
from agent.repo.secrets import RepoError, install_log_redaction, redact
from agent.report import write_report

TOKEN = "ghp_test0123456789SECRET"
GITHUB = "https://api.github.com:443/repos/acme/exp"  # PyGithub names the port
REPO_JSON = {"id": 1, "name": "exp", "full_name": "acme/exp", "owner": {"login": "acme"},
             "url": "https://api.github.com/repos/acme/exp"}  # fmt: skip
PR_JSON = {"number": 7, "html_url": "https://github.com/acme/exp/pull/7",
           "url": "https://api.github.com/repos/acme/exp/pulls/7"}  # fmt: skip
REQUEST = PullRequest(BRANCH, "main", "meshpilot: layout sweep", "The report.", draft=True)


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    return shared_sweep(tmp_path_factory)


@pytest.fixture
def repos(tmp_path):
    """(the user's repository, its bare remote `origin`), both on main."""
    remote = git.Repo.init(tmp_path / "remote.git", bare=True, initial_branch="main")
    repo = make_repo(tmp_path / "repo")
    repo.create_remote("origin", str(tmp_path / "remote.git"))
    repo.git.push("origin", "main")
    return repo, remote


@pytest.fixture
def github_token(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.delenv("GITHUB_API_URL", raising=False)
    return TOKEN


def report(sweep, repo, **kwargs):
    return write_report(sweep, repo.working_tree_dir, slug=SLUG, date=DATE, pr=True, **kwargs)


def remote_heads(remote: git.Repo) -> dict[str, str]:
    return {h.name: h.commit.hexsha for h in remote.heads}


def test_local_provider_pushes_and_rerunning_updates_the_same_request(sweep, repos, tmp_path):
    repo, remote = repos
    first = report(sweep, repo)
    assert remote_heads(remote) == {"main": repo.head.commit.hexsha, BRANCH: first["commit"]}
    pr = first["pr"]
    assert (pr["provider"], pr["action"], pr["url"]) == ("local", "created", str(tmp_path / "remote.git"))
    description = Path(pr["description"]).read_text()
    assert description.startswith(f"[draft] meshpilot: layout sweep {SLUG} ({DATE})\n\n")
    assert f"`{REPORT_DIR}/README.md`" in description and "Winner: `t" in description
    assert "are available in the Git repository at:" in pr["summary"] and BRANCH in pr["summary"]
    assert "meshpilot (1):" in pr["summary"]

    second = report(sweep, repo, bench_results=[BENCH])  # a parsed result, as the agent passes it
    assert second["pr"]["action"] == "updated" and second["pr"]["description"] == pr["description"]
    assert remote_heads(remote)[BRANCH] == second["commit"] != first["commit"]
    assert repo.is_ancestor(first["commit"], second["commit"])  # a fast-forward: nothing was forced
    assert "meshpilot (2):" in second["pr"]["summary"]
    assert repo.active_branch.name == "main" and not repo.is_dirty(untracked_files=True)


def test_a_fresh_clone_continues_the_branch_on_the_remote(sweep, repos, tmp_path):
    repo, remote = repos
    first = report(sweep, repo)
    clone = git.Repo.clone_from(str(tmp_path / "remote.git"), tmp_path / "clone")
    assert BRANCH not in clone.heads
    second = report(sweep, clone, bench_results=[BENCH])
    assert clone.commit(second["commit"]).parents == (clone.commit(first["commit"]),)
    assert remote_heads(remote)[BRANCH] == second["commit"]


def test_no_remote_is_refused_before_anything_is_written(sweep, tmp_path):
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(RepoError, match="no remote named 'origin'; add one with: git remote add origin URL"):
        report(sweep, repo)
    assert [h.name for h in repo.heads] == ["main"]


def test_a_rejected_push_leaves_no_branch_behind(sweep, repos, tmp_path):
    repo, remote = repos
    hook = tmp_path / "remote.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'denied by policy' >&2\nexit 1\n")
    hook.chmod(0o755)
    with pytest.raises(RepoError, match=f"push of {BRANCH} to 'origin' failed"):
        report(sweep, repo)
    assert [h.name for h in repo.heads] == ["main"] and list(remote_heads(remote)) == ["main"]


def test_a_remote_branch_with_other_history_is_refused(sweep, repos, tmp_path):
    repo, remote = repos
    repo.git.checkout("-b", "work")
    (tmp_path / "repo" / "mine.txt").write_text("a person's work\n")
    repo.index.add(["mine.txt"])
    theirs = repo.index.commit("a person's commit")
    repo.git.push("origin", f"work:refs/heads/{BRANCH}")
    repo.git.checkout("main")
    with pytest.raises(RepoError, match="already exists with commits meshpilot did not make"):
        report(sweep, repo)
    assert BRANCH not in repo.heads and remote_heads(remote)[BRANCH] == theirs.hexsha


def test_github_pull_request_opened_as_a_draft(sweep, repos, github_token):
    repo, remote = repos
    with responses.RequestsMock() as http:
        http.get(GITHUB, json=REPO_JSON)
        http.get(f"{GITHUB}/pulls", json=[])
        http.post(f"{GITHUB}/pulls", json=PR_JSON, status=201)
        result = report(sweep, repo, provider="github", project="acme/exp")
        calls = [(c.request.method, c.request.url) for c in http.calls]
        body = json.loads(http.calls[2].request.body)
        assert all(c.request.headers["Authorization"] == f"token {TOKEN}" for c in http.calls)
    assert calls == [
        ("GET", GITHUB),
        ("GET", f"{GITHUB}/pulls?base=main&head=acme%3Ameshpilot%2Ftiny-2025-03-01&state=open"),
        ("POST", f"{GITHUB}/pulls"),
    ]
    assert body["head"] == BRANCH and body["base"] == "main" and body["draft"] is True
    assert body["title"] == f"meshpilot: layout sweep {SLUG} ({DATE})" and f"`{REPORT_DIR}/README.md`" in body["body"]
    assert result["pr"] == {"provider": "github", "url": PR_JSON["html_url"], "number": 7, "action": "created"}
    assert remote_heads(remote)[BRANCH] == result["commit"]


def test_github_auth_failure_is_reported_before_any_commit(sweep, repos, github_token):
    repo, remote = repos
    with responses.RequestsMock() as http:
        http.get(GITHUB, json={"message": "Bad credentials"}, status=401)
        with pytest.raises(RepoError, match=r"authentication failed \(401\)") as error:
            report(sweep, repo, provider="github", project="acme/exp")
    assert TOKEN not in str(error.value) and "\n" not in str(error.value)
    assert [h.name for h in repo.heads] == ["main"] and list(remote_heads(remote)) == ["main"]


def test_github_conflict_after_the_push_takes_the_new_branch_back(sweep, repos, github_token):
    repo, remote = repos
    conflict = {"message": "Validation Failed",
                "errors": [{"message": f"A pull request already exists for acme:{BRANCH}."}]}  # fmt: skip
    with responses.RequestsMock() as http:
        http.get(GITHUB, json=REPO_JSON)
        http.get(f"{GITHUB}/pulls", json=[])
        http.post(f"{GITHUB}/pulls", json=conflict, status=422)
        with pytest.raises(RepoError, match="conflict \\(422\\): Validation Failed: A pull request already exists"):
            report(sweep, repo, provider="github", project="acme/exp")
    assert [h.name for h in repo.heads] == ["main"] and list(remote_heads(remote)) == ["main"]


def test_github_updates_the_open_pull_request_of_the_branch():
    with responses.RequestsMock() as http:
        http.get(GITHUB, json=REPO_JSON)
        http.get(f"{GITHUB}/pulls", json=[PR_JSON])
        http.patch(f"{GITHUB}/pulls/7", json=PR_JSON)
        result = GitHubProvider("acme/exp", TOKEN).publish(REQUEST)
        assert json.loads(http.calls[2].request.body) == {"title": REQUEST.title, "body": REQUEST.body}
    assert result == {"provider": "github", "url": PR_JSON["html_url"], "number": 7, "action": "updated"}


def test_github_rate_limit_says_when_it_resets():
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1767225600"}
    with responses.RequestsMock() as http:
        http.get(GITHUB, json={"message": "API rate limit exceeded for 192.0.2.1."}, status=403, headers=headers)
        with pytest.raises(RepoError, match="rate limit exceeded while repository acme/exp; it resets at 2026-01-01 "
                                            "00:00:00 UTC"):  # fmt: skip
            GitHubProvider("acme/exp", TOKEN).check()
        assert len(http.calls) == 1  # reported, not retried


GITLAB = "https://gitlab.example.com/api/v4"
MR_JSON = {
    "iid": 3,
    "title": "old",
    "description": "old",
    "web_url": "https://gitlab.example.com/acme/exp/-/merge_requests/3",
}
MR_QUERY = "state=opened&source_branch=meshpilot%2Ftiny-2025-03-01&target_branch=main"


def test_gitlab_opens_then_updates_one_merge_request():
    provider = GitLabProvider("acme/exp", "glpat-SECRET", "https://gitlab.example.com")
    with responses.RequestsMock() as http:
        http.get(f"{GITLAB}/projects/acme%2Fexp", json={"id": 42, "path_with_namespace": "acme/exp"})
        http.get(f"{GITLAB}/projects/42/merge_requests", json=[])
        http.post(f"{GITLAB}/projects/42/merge_requests", json=MR_JSON, status=201)
        created = provider.publish(REQUEST)
        http.get(f"{GITLAB}/projects/42/merge_requests", json=[MR_JSON])
        http.put(f"{GITLAB}/projects/42/merge_requests/3", json=MR_JSON)
        updated = provider.publish(REQUEST)
        calls = [(c.request.method, c.request.url, c.request.body) for c in http.calls]
        assert all(c.request.headers["PRIVATE-TOKEN"] == "glpat-SECRET" for c in http.calls)
    fields = {"title": f"Draft: {REQUEST.title}", "description": REQUEST.body}
    assert [(m, u) for m, u, _ in calls] == [
        ("GET", f"{GITLAB}/projects/acme%2Fexp"),
        ("GET", f"{GITLAB}/projects/42/merge_requests?{MR_QUERY}"),
        ("POST", f"{GITLAB}/projects/42/merge_requests"),
        ("GET", f"{GITLAB}/projects/42/merge_requests?{MR_QUERY}"),
        ("PUT", f"{GITLAB}/projects/42/merge_requests/3"),
    ]
    assert json.loads(calls[2][2]) == {"source_branch": BRANCH, "target_branch": "main", **fields}
    assert json.loads(calls[4][2]) == fields
    assert (created["action"], updated["action"], updated["number"]) == ("created", "updated", 3)


@pytest.mark.parametrize(
    ("status", "payload", "message"),
    [
        (401, {"message": "401 Unauthorized"}, r"authentication failed \(401\)"),
        (429, {"message": "Retry later"}, r"rate limit exceeded \(429\)"),
        (404, {"message": "404 Project Not Found"}, r"not found \(404\)"),
    ],
)
def test_gitlab_errors_are_one_line(status, payload, message):
    with responses.RequestsMock() as http:
        http.get(f"{GITLAB}/projects/acme%2Fexp", json=payload, status=status)
        with pytest.raises(RepoError, match=message):
            GitLabProvider("acme/exp", "glpat-SECRET", "https://gitlab.example.com").check()
        assert len(http.calls) == 1


def test_gitlab_conflict_names_the_existing_request():
    provider = GitLabProvider("acme/exp", "glpat-SECRET", "https://gitlab.example.com")
    existing = {"message": ["Another open merge request already exists for this source branch: !3"]}
    with responses.RequestsMock() as http:
        http.get(f"{GITLAB}/projects/acme%2Fexp", json={"id": 42})
        http.get(f"{GITLAB}/projects/42/merge_requests", json=[])
        http.post(f"{GITLAB}/projects/42/merge_requests", json=existing, status=409)
        with pytest.raises(RepoError, match="conflict \\(409\\): Another open merge request already exists"):
            provider.publish(REQUEST)


GITEA = "https://gitea.example.com/api/v1/repos/acme/exp"
GITEA_PR = {"number": 12, "html_url": "https://gitea.example.com/acme/exp/pulls/12",
            "head": {"ref": BRANCH}, "base": {"ref": "main"}}  # fmt: skip


def test_gitea_finds_its_request_on_a_later_page_and_updates_it():
    others = [{"number": n, "html_url": "x", "head": {"ref": f"feature-{n}"}, "base": {"ref": "main"}} for n in
              range(100, 150)]  # fmt: skip
    provider = GiteaProvider("acme/exp", "gitea-SECRET", "https://gitea.example.com")
    with responses.RequestsMock() as http:
        http.get(GITEA, json={"full_name": "acme/exp"})
        http.get(f"{GITEA}/pulls", json=others)
        http.get(f"{GITEA}/pulls", json=[GITEA_PR])
        http.patch(f"{GITEA}/pulls/12", json=GITEA_PR)
        provider.check()
        result = provider.publish(REQUEST)
        calls = [(c.request.method, c.request.url) for c in http.calls]
        assert json.loads(http.calls[3].request.body) == {"title": f"WIP: {REQUEST.title}", "body": REQUEST.body}
        assert all(c.request.headers["Authorization"] == "token gitea-SECRET" for c in http.calls)
    assert calls == [
        ("GET", GITEA),
        ("GET", f"{GITEA}/pulls?state=open&page=1&limit=50"),
        ("GET", f"{GITEA}/pulls?state=open&page=2&limit=50"),
        ("PATCH", f"{GITEA}/pulls/12"),
    ]
    assert result == {"provider": "gitea", "url": GITEA_PR["html_url"], "number": 12, "action": "updated"}


def test_gitea_opens_a_request_when_none_is_open():
    with responses.RequestsMock() as http:
        http.get(f"{GITEA}/pulls", json=[])
        http.post(f"{GITEA}/pulls", json=GITEA_PR, status=201)
        result = GiteaProvider("acme/exp", "gitea-SECRET", "https://gitea.example.com").publish(REQUEST)
        sent = json.loads(http.calls[1].request.body)
    assert sent == {"head": BRANCH, "base": "main", "title": f"WIP: {REQUEST.title}", "body": REQUEST.body}
    assert result["action"] == "created" and result["number"] == 12


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (401, {}, r"authentication failed \(401\)"),
        (429, {"Retry-After": "60"}, r"rate limit exceeded \(429\); retry after 60 s"),
        (409, {}, r"conflict \(409\): pull request already exists"),
    ],
)
def test_gitea_errors_are_one_line(status, headers, message):
    with responses.RequestsMock() as http:
        http.get(f"{GITEA}/pulls", json=[])
        http.post(f"{GITEA}/pulls", json={"message": "pull request already exists"}, status=status, headers=headers)
        with pytest.raises(RepoError, match=message):
            GiteaProvider("acme/exp", "gitea-SECRET", "https://gitea.example.com").publish(REQUEST)


def test_tokens_come_from_the_environment_and_never_show(tmp_path, monkeypatch):
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    repo = make_repo(tmp_path)
    repo.create_remote("origin", "git@github.com:acme/exp.git")
    with pytest.raises(RepoError, match="github: no token in the environment; set GITHUB_TOKEN or GH_TOKEN"):
        make_provider("github", repo, "origin")
    monkeypatch.setenv("GITLAB_TOKEN", "glpat-SECRET123")
    error = RepoError("push to https://oauth2:glpat-SECRET123@gitlab.example.com/acme/exp.git failed: glpat-SECRET123")
    assert str(error) == "push to https://***@gitlab.example.com/acme/exp.git failed: ***"
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger().addHandler(handler)
    try:
        install_log_redaction()
        logging.getLogger("gitlab.client").warning("sending PRIVATE-TOKEN %s", "glpat-SECRET123")
    finally:
        logging.getLogger().removeHandler(handler)
    assert stream.getvalue() == "sending PRIVATE-TOKEN ***\n"
    assert redact("nothing secret here") == "nothing secret here"


def test_project_and_server_come_from_the_remote_url(tmp_path, monkeypatch):
    assert parse_remote_url("git@github.com:acme/exp.git") == ("github.com", "acme/exp")
    assert parse_remote_url("https://gitlab.example.com/group/sub/exp.git") == ("gitlab.example.com", "group/sub/exp")
    assert parse_remote_url("ssh://git@gitea.example.com:2222/acme/exp") == ("gitea.example.com", "acme/exp")
    assert parse_remote_url("/srv/git/exp.git") == (None, None)
    monkeypatch.setenv("GITEA_TOKEN", "gitea-SECRET")
    monkeypatch.delenv("GITEA_URL", raising=False)
    repo = make_repo(tmp_path)
    repo.create_remote("origin", "ssh://git@gitea.example.com:2222/acme/exp")
    provider = make_provider("gitea", repo, "origin")
    assert provider.api == "https://gitea.example.com/api/v1/repos/acme/exp"
