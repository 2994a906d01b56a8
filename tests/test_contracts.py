"""Result-file contracts (issue 14, item 1): one schema per file, one writer and one reader.

For every contract, the run directory's (trainer.results.schemas) and the agent's (job.json, trial.json, sweep.json,
summary.json): a file with an unknown field, a missing field or a wrongly typed one fails in one line naming the
file and the field; a valid file round-trips; a writer refuses bad data before writing anything. The recorded
sweep of the terminal UI's tests (tests/fixtures/tui-sweep) holds valid files of each. No training runs here.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from agent.jobs import JOB
from agent.records import SUMMARY, SWEEP, TRIAL
from agent.sweep.summary import summarize
from trainer.results.contracts import Contract, ContractError
from trainer.results.schemas import FAILURE, LAUNCH, MEMORY, METRICS, STEPS

FIXTURE = Path(__file__).parent / "fixtures" / "tui-sweep" / "sweep"
TRIAL_DIR = FIXTURE / "trials" / "t000"
# The recorded sweep's files, each with the contract that reads it.
RECORDED = {
    "sweep.json": SWEEP,
    "trials/t000/trial.json": TRIAL,
    "trials/t000/job.json": JOB,
    "trials/t000/launch.json": LAUNCH,
    "trials/t000/metrics.json": METRICS,
    "trials/t000/memory.json": MEMORY,
}
FAILURE_RECORD = {
    "rank": 1,
    "status": "failed",
    "time": 1795410250.5,
    "error": "RuntimeError: injected fault on rank 1",
    "traceback": "Traceback (most recent call last):\n  ...\nRuntimeError: injected fault on rank 1\n",
}


def _summary(tmp_path: Path) -> dict:
    """summary.json of the recorded sweep, as summarize writes it."""
    sweep = tmp_path / "recorded"
    shutil.copytree(FIXTURE, sweep)
    summarize(sweep)
    return json.loads((sweep / "summary.json").read_text())


def _recorded(name: str):
    return lambda tmp_path: json.loads((FIXTURE / name).read_text())


# contract, file name, valid content (from tmp_path), a required field, and a field given a value of the wrong type
CASES = {
    "metrics": (METRICS, "metrics.json", _recorded("trials/t000/metrics.json"), "status", ("world_size", "two")),
    "memory": (MEMORY, "memory.json", _recorded("trials/t000/memory.json"), "peak_source", ("units", "kilobytes")),
    "failure": (FAILURE, "failure.rank1.json", lambda _: dict(FAILURE_RECORD), "traceback", ("rank", "one")),
    "launch": (LAUNCH, "launch.json", _recorded("trials/t000/launch.json"), "vocab_size", ("resume", "maybe")),
    "job": (JOB, "job.json", _recorded("trials/t000/job.json"), "token", ("state", "finished")),
    "job creator": (JOB, "job.json", _recorded("trials/t000/job.json"), "creator", ("creator.pid", "me")),
    "trial": (TRIAL, "trial.json", _recorded("trials/t000/trial.json"), "settings", ("devices", "0")),
    "trial request": (TRIAL, "trial.json", _recorded("trials/t000/trial.json"), "request", ("request.nproc", "x")),
    "sweep": (SWEEP, "sweep.json", _recorded("sweep.json"), "budget", ("objective", "vibes")),
    "summary": (SUMMARY, "summary.json", _summary, "winner", ("sampler", 3)),
    "summary trial": (SUMMARY, "summary.json", _summary, "planner", ("trials.0.status", "great")),
}


def _set(data: dict, dotted: str, value) -> dict:
    """A deep copy of `data` with the field at `dotted` (keys and list indices) set to `value`."""
    changed = copy.deepcopy(data)
    *parents, last = dotted.split(".")
    node = changed
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = value
    return changed


def _write_raw(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data, indent=1))
    return path


def _one_line(error: pytest.ExceptionInfo, path: Path, field: str) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: {field}: "), message
    return message


@pytest.fixture(params=list(CASES), ids=list(CASES))
def case(request, tmp_path):
    contract, name, valid, required, wrong = CASES[request.param]
    return contract, tmp_path / name, valid(tmp_path), required, wrong


def test_an_unknown_field_fails_in_one_line_naming_the_file_and_the_field(case):
    contract, path, valid, _, _ = case
    with pytest.raises(ContractError) as error:
        contract.read(_write_raw(path, {**valid, "surprise": 1}))
    assert "unknown field" in _one_line(error, path, "surprise")


def test_a_missing_field_fails_in_one_line_naming_the_file_and_the_field(case):
    contract, path, valid, required, _ = case
    with pytest.raises(ContractError) as error:
        contract.read(_write_raw(path, {k: v for k, v in valid.items() if k != required}))
    assert "missing" in _one_line(error, path, required)


def test_a_wrongly_typed_field_fails_in_one_line_naming_the_file_and_the_field(case):
    contract, path, valid, _, (field, value) = case
    with pytest.raises(ContractError) as error:
        contract.read(_write_raw(path, _set(valid, field, value)))
    _one_line(error, path, field)


def test_a_valid_file_round_trips(case):
    contract, path, valid, _, _ = case
    written = contract.write(path, valid)
    assert contract.read(path) == written == contract.check(valid)
    assert json.loads(path.read_text()) == written
    assert contract.read(path.parent / "absent.json") is None


def test_the_writer_refuses_bad_data_and_leaves_the_old_file(case):
    contract, path, valid, required, (field, value) = case
    contract.write(path, valid)
    before, files = path.read_bytes(), sorted(path.parent.iterdir())
    for bad in ({**valid, "surprise": 1}, {k: v for k, v in valid.items() if k != required}, _set(valid, field, value)):
        with pytest.raises(ContractError) as error:
            contract.write(path, bad)
        assert str(error.value).startswith(f"{path}: ")
        assert path.read_bytes() == before
    assert sorted(path.parent.iterdir()) == files  # no half-written temporary left behind


# steps.jsonl: one record per line, appended by rank 0


def _step(**changes) -> dict:
    line = (TRIAL_DIR / "steps.jsonl").read_text().splitlines()[0]
    return {**json.loads(line), **changes}


@pytest.mark.parametrize(
    ("record", "field", "problem"),
    [
        ({**_step(), "surprise": 1}, "surprise", "unknown field"),
        ({k: v for k, v in _step().items() if k != "grad_norm"}, "grad_norm", "missing"),
        (_step(tokens="many"), "tokens", "integer"),
        (_step(step=0), "step", "greater than or equal to 1"),
    ],
    ids=["unknown", "missing", "wrong type", "out of range"],
)
def test_a_bad_steps_line_fails_in_one_line_naming_the_file_line_and_field(tmp_path, record, field, problem):
    path = tmp_path / "steps.jsonl"
    path.write_text(STEPS.line(_step()) + json.dumps(record) + "\n")
    with pytest.raises(ContractError) as error:
        STEPS.read_lines(path)
    assert problem in _one_line(error, f"{path} line 2", field)
    with pytest.raises(ContractError):
        STEPS.line(record)  # the writer refuses it before anything is appended


def test_steps_round_trip_and_a_line_being_written_is_not_read(tmp_path):
    path = tmp_path / "steps.jsonl"
    records = [_step(step=1), _step(step=2)]
    path.write_text("".join(STEPS.line(r) for r in records) + '{"step": 3, "lo')
    assert STEPS.read_lines(path) == [STEPS.check(r) for r in records]
    assert STEPS.read_lines(tmp_path / "absent.jsonl") == []


def test_the_job_reads_its_last_step_from_the_last_complete_line(tmp_path):
    from agent.jobs.status import last_step
    from trainer.results.rundir import RunDir

    run = RunDir(tmp_path)
    assert last_step(run) == 0
    run.steps.write_text("".join(STEPS.line(_step(step=s)) for s in (1, 2)) + '{"step": 3, "lo')
    assert last_step(run) == 2
    run.steps.write_text(STEPS.line(_step(step=1)) + json.dumps({"step": 2}) + "\n")
    with pytest.raises(ContractError, match=r"steps.jsonl: loss: missing"):
        last_step(run)


# The recorded fixture, and what the trial record holds


def test_every_recorded_file_of_the_tui_fixture_is_valid(tmp_path):
    for name, contract in RECORDED.items():
        assert contract.read(FIXTURE / name) is not None, name
    assert STEPS.read_lines(TRIAL_DIR / "steps.jsonl")
    assert SUMMARY.check(_summary(tmp_path))["winner"] == "t000"  # what summarize makes of them


def test_the_trial_record_holds_the_exact_overrides_it_ran_with():
    record = TRIAL.read(TRIAL_DIR / "trial.json")
    request = record["request"]
    assert record["settings"] == ["train.micro_batch=2", "train.activation_checkpointing=false", "data.packing=true"]
    assert request["overrides"][: len(record["settings"])] == record["settings"]
    assert "train.save_final_checkpoint=false" in request["overrides"]  # the sweep's own, for every trial
    job = JOB.read(TRIAL_DIR / "job.json")
    assert [f"--set={o}" for o in request["overrides"]] == [a for a in job["command"] if a.startswith("--set=")][:-1]
    assert (request["nproc"], request["layout"], request["steps"]) == (1, "pp=1,dp_replicate=1,dp_shard=1,cp=1,tp=1", 3)


def test_point_settings_are_its_overrides_without_the_sweeps_own():
    from agent.sweep.space import TRIAL_OVERRIDES, Point

    point = Point("t000", {"pp": 1, "dp_replicate": 2, "dp_shard": 1, "cp": 1, "tp": 1}, 2, 1, False, True,
                  extra={"data.seq_len": 64})  # fmt: skip
    settings = point.settings({"train.lr": 0.001})
    assert settings == ["train.micro_batch=2", "train.activation_checkpointing=false", "data.packing=true",
                        "data.seq_len=64", "train.lr=0.001"]  # fmt: skip
    assert point.overrides({"train.lr": 0.001}) == settings + list(TRIAL_OVERRIDES)
    assert point.params({"train.lr": 0.001})["lr"] == 0.001  # what the summary shows: the section stripped


def test_the_reports_train_command_sets_exactly_the_recorded_settings(tmp_path):
    """A swept key the summary's params show without its section (lr) is reproduced with it, and a value with a
    space stays one argument."""
    from test_report_wording import build_report, readme, write_sweep

    sweep = write_sweep(tmp_path)
    summary = json.loads((sweep / "summary.json").read_text())
    summary["trials"][0]["params"]["lr"] = 0.003
    summary["trials"][0]["settings"] += ["train.lr=0.003", "train.betas=[0.9, 0.99]"]
    (sweep / "summary.json").write_text(json.dumps(summary))
    files, _, _ = build_report(sweep)
    reproduce = readme(files).split("## Reproduce", 1)[1].split("```bash\n", 1)[1].split("\n", 1)[0]
    assert reproduce.startswith("meshpilot train meshpilot.yaml --nproc ")
    assert reproduce.endswith(
        " --set train.micro_batch=2 --set train.activation_checkpointing=false --set data.packing=true"
        " --set train.lr=0.003 --set 'train.betas=[0.9, 0.99]'"
    )


def test_the_report_refuses_a_summary_from_another_version_in_one_line(tmp_path):
    from test_report_wording import write_sweep

    from agent.report.inputs import ReportError, load_sweep

    sweep = write_sweep(tmp_path)
    summary = json.loads((sweep / "summary.json").read_text())
    del summary["trials"][1]["settings"]
    (sweep / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ReportError) as error:
        load_sweep(sweep)
    _one_line(error, sweep / "summary.json", "trials.1.settings")
    (sweep / "trials" / "t000" / "metrics.json").write_text("{}")
    summary["trials"][1]["settings"] = []
    (sweep / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ReportError) as error:
        load_sweep(sweep)
    _one_line(error, sweep / "trials" / "t000" / "metrics.json", "layout")


def test_contracts_are_named_by_their_files():
    for contract, name in ((JOB, "job.json"), (TRIAL, "trial.json"), (SWEEP, "sweep.json"), (SUMMARY, "summary.json")):
        assert isinstance(contract, Contract) and contract.name == name
