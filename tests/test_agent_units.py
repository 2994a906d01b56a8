"""The agent's pieces on their own: figure checking, approvals and costs, LLM settings, request parsing."""

from __future__ import annotations

import json
import math

import pytest

from agent.approvals import (
    Policy,
    Request,
    automatic_decision,
    check_decision,
    launch_cost,
    sweep_cost,
    threshold_from_env,
)
from agent.figures import FLAG, check_reply
from agent.llm import LLMSettings, llm_settings, make_llm, redact
from agent.requests import parse_request
from tests.support import write_experiment
from trainer.config import ConfigError

METRICS = json.dumps(
    {
        "source": "runs/a/metrics.json",
        "tokens_per_s": 36294.31,
        "final_loss": 6.232689,
        "peak_mem_bytes": [383_778_816],
        "layout": "dp_shard=2,tp=2",
        "memory": {"source": "runs/a/memory.json", "peak": 1_500_000_000},
    }
)


def test_numbers_found_in_results_name_their_file():
    checked = check_reply("Loss 6.2327 at 36,294 tokens/s (36.3k), peak 0.357 GiB, dp_shard=2.", [METRICS], [])
    assert checked.unverified == []
    assert checked.sources == ["runs/a/metrics.json"]
    assert checked.text.endswith("Sources: runs/a/metrics.json")


def test_a_nested_source_is_named_for_its_own_figures():
    checked = check_reply("Peak 1.4 GiB (source: runs/a/memory.json)", [METRICS], [])
    assert checked.sources == ["runs/a/memory.json"]
    assert "Sources:" not in checked.text  # the reply named it already


def test_numbers_found_nowhere_are_flagged_not_removed():
    checked = check_reply("FSDP is 2.5x faster, loss 6.2327, 45% better.", [METRICS], [])
    assert checked.unverified == ["2.5x", "45%"]
    assert f"2.5x {FLAG} faster" in checked.text and f"45% {FLAG}" in checked.text
    assert "6.2327 " + FLAG not in checked.text


def test_rounding_is_judged_by_the_digits_written():
    assert check_reply("loss 6.23", [METRICS], []).unverified == []
    assert check_reply("loss 6.24", [METRICS], []).unverified == ["6.24"]
    assert check_reply("loss 6.2", [METRICS], []).unverified == []


def test_user_numbers_list_markers_identifiers_and_quoted_text_are_not_figures():
    text = ("1. On 8 GPUs\n2) FSDP2 in runs/x-3f2a/step_00000003 ran `--set train.lr=1e-3 --steps 99`.\n"
            "Do you want me to run (/run nproc=4, layout=dp_shard=4)? yes / edit\n"
            "I can only act now, so I have done nothing. Do it now: /run nproc=3, steps=10? yes / edit")  # fmt: skip
    checked = check_reply(text, [METRICS], ["plan for 8 GPUs"])
    assert checked.unverified == []
    assert checked.text == text  # nothing to add: no figure from a file, nothing flagged


def test_a_commit_id_that_reads_as_a_huge_number_is_no_figure():
    """70e9123 would be 70 x 10^9123: an identifier (here a commit id), neither verified nor flagged."""
    text = "Committed 70e9123 and 0e99999 with loss 6.2327."
    checked = check_reply(text, [METRICS], [])
    assert checked.unverified == [] and checked.text.startswith(text)


def test_policy_parse_and_errors():
    policy = Policy.parse("device_hours=2.5, trials=4, pr=yes")
    assert (policy.unattended, policy.device_hours, policy.trials, policy.pull_requests) == (True, 2.5, 4, True)
    assert Policy.parse("").device_hours == math.inf
    for bad in ("device_hours=-1", "trials=two", "pr=maybe", "budget=3", "device_hours"):
        with pytest.raises(ConfigError, match=r"--policy|negative"):
            Policy.parse(bad)
    with pytest.raises(ConfigError, match="negative"):
        Policy().with_threshold(-0.5)
    assert threshold_from_env({"MESHPILOT_APPROVE_BELOW": "0.25"}) == 0.25
    with pytest.raises(ConfigError, match="MESHPILOT_APPROVE_BELOW"):
        threshold_from_env({"MESHPILOT_APPROVE_BELOW": "lots"})


def _launch(hours: float, runs: int = 1) -> Request:
    from agent.approvals import Cost

    return Request("c1", "launch_run", {}, "launch", "launch", Cost(hours, 1, 10, runs, 1.0, "predicted"))


def test_automatic_decisions():
    nothing = {"device_hours": 0.0, "launches": 0}
    pull_request = Request("c2", "open_pull_request", {}, "pull_request", "open a pull request")
    interactive = Policy(approve_below=1.0)
    assert automatic_decision(interactive, _launch(0.5), nothing) == {"action": "approve"}
    assert automatic_decision(interactive, _launch(1.5), nothing) is None  # a person decides
    assert automatic_decision(interactive, pull_request, nothing) is None  # always a person, interactively
    budget = Policy.parse("device_hours=2,trials=3")
    assert automatic_decision(budget, _launch(1.5), nothing) == {"action": "approve"}
    assert automatic_decision(budget, _launch(1.5), {"device_hours": 1.0, "launches": 1})["action"] == "reject"
    assert "trials" in automatic_decision(budget, _launch(0.1, runs=4), nothing)["reason"]
    assert automatic_decision(budget, pull_request, nothing)["action"] == "reject"
    assert automatic_decision(Policy.yes(), pull_request, nothing) == {"action": "approve"}


def test_decisions_are_checked():
    assert check_decision({"action": "edit", "args": {"nproc": 1}})["args"] == {"nproc": 1}
    for bad in ({"action": "maybe"}, "approve", {"action": "edit"}, {"action": "reject", "reason": 3}):
        with pytest.raises(ConfigError):
            check_decision(bad)


def test_launch_cost_is_devices_times_steps_times_predicted_step_time(tmp_path):
    experiment = write_experiment(tmp_path)
    one = launch_cost(experiment, nproc=1, steps=10)
    longer = launch_cost(experiment, nproc=1, steps=100)
    assert one.basis == "predicted" and one.step_s > 0
    assert one.device_hours == pytest.approx(1 * 10 * one.step_s / 3600)
    assert longer.device_hours == pytest.approx(10 * one.device_hours)
    two = launch_cost(experiment, nproc=2, layout="dp_shard=2", steps=10)
    assert two.devices == 2 and two.device_hours == pytest.approx(2 * 10 * two.step_s / 3600)
    sweep = sweep_cost(write_experiment(tmp_path, {"search": {"trials": 3, "trial_steps": 5}}, "sweep.yaml"))
    assert sweep.runs == 3 and sweep.steps == 5
    assert sweep.device_hours == pytest.approx(3 * launch_cost(tmp_path / "sweep.yaml", steps=5).device_hours)


def test_launch_cost_refuses_what_the_launcher_would(tmp_path):
    experiment = write_experiment(tmp_path)
    with pytest.raises(ConfigError, match=r"multiplies|divide"):
        launch_cost(experiment, nproc=2, layout="tp=4")
    with pytest.raises(ConfigError, match="trian"):
        launch_cost(experiment, overrides=["trian.lr=1"])
    with pytest.raises(ConfigError, match="not found"):
        launch_cost(tmp_path / "missing.yaml")


def test_llm_settings_from_flags_and_environment():
    assert llm_settings(env={}).offline
    env = {"MESHPILOT_LLM_BASE_URL": "http://localhost:8000/v1", "MESHPILOT_LLM_MODEL": "qwen"}
    assert llm_settings(env=env) == LLMSettings("http://localhost:8000/v1", "qwen")
    assert llm_settings("http://gpu:9000/v1", "llama", env=env) == LLMSettings("http://gpu:9000/v1", "llama")
    with pytest.raises(ConfigError, match="needs a model"):
        llm_settings("http://localhost:8000/v1", env={})
    with pytest.raises(ConfigError, match="http"):
        llm_settings("localhost:8000", "m", env={})
    with pytest.raises(ConfigError, match="needs a key"):
        make_llm(LLMSettings(None, "gpt-x"), env={})


def test_the_api_key_reaches_only_the_client():
    secret = "sk-test-0123456789abcdefSECRET"
    llm = make_llm(LLMSettings("http://127.0.0.1:9/v1", "m"), env={"MESHPILOT_LLM_API_KEY": secret})
    assert llm.openai_api_key.get_secret_value() == secret
    assert secret not in repr(llm) and secret not in str(llm.model_dump())
    assert secret not in redact(f"Error 401: Incorrect API key provided: {secret}", {"OPENAI_API_KEY": secret})
    assert "sk-abc*****wxyz" not in redact("Incorrect API key provided: sk-abc*****wxyz", {})


@pytest.mark.parametrize(
    ("text", "command", "args"),
    [
        ("find the fastest layout for this model on 8 GPUs", "plan", {"devices": 8}),
        ("which layout is best on 4 nodes of 8 H100s with 80GB", "plan", {"devices": 8, "nodes": 4}),
        ("why did FSDP win?", "why", {}),
        ("train it on 2 processes for 3 steps with dp_shard=2", "run", {"nproc": 2, "steps": 3}),
        ("what is the status of the run?", "status", {}),
        ("show me the results", "results", {}),
        ("run the benchmark", "bench", {}),
        ("open a PR with the report", "pr", {}),
        ("write the report", "report", {}),
        ("show meshpilot.yaml", "read", {}),
        ("hello", "help", {}),
        ("/run nproc=2 layout=dp_shard=2,tp=1 set=train.lr=1e-3 set=train.seed=3", "run", {"nproc": "2"}),
        ("/frobnicate", "help", {"unknown": "/frobnicate"}),
        ("/", "help", {}),
    ],
)
def test_requests_map_to_commands(text, command, args):
    intent = parse_request(text)
    assert intent.command == command
    assert args.items() <= intent.args.items()


def test_slash_arguments_keep_layouts_and_repeated_overrides():
    intent = parse_request("/run layout=dp_shard=2,tp=1 set=train.lr=1e-3 set=train.seed=3")
    assert intent.args["layout"] == "dp_shard=2,tp=1"
    assert intent.args["set"] == ["train.lr=1e-3", "train.seed=3"]
    assert parse_request("train with dp_shard=2,tp=2").args["layout"] == "dp_shard=2,tp=2"
    assert parse_request("show Docs/Notes.md").words == ["Docs/Notes.md"]
