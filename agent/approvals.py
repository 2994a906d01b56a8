"""Human in the loop: which tool calls need a person's approval, what a launch costs, and unattended policies.

A launch costs device-hours: devices x steps x the step time trainer.costs.throughput predicts for this model, layout
and machine (calibrated by earlier runs here). Launches cheaper than `approve_below` go without asking; pushing
or opening a pull request always asks. Unattended, nobody can be asked, so an explicit policy decides: approve
while the conversation's launches stay within a budget of device-hours and trials, and pull requests only when
the policy says so.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from agent import jobs
from agent.private import check_readable
from agent.state import Spent
from trainer.config import ConfigError, load_experiment
from trainer.hardware import this_machine
from trainer.layout import Layout, LayoutError

# Stated assumption where the throughput model cannot predict a step (a model family it does not know):
# generous, so that such a launch is shown to a person rather than waved through.
FALLBACK_STEP_S = 10.0
DEFAULT_APPROVE_BELOW = 1.0  # device-hours
LAUNCH_TOOLS = ("launch_run", "run_sweep", "resume_job")
PULL_REQUEST_TOOLS = ("open_pull_request", "update_docs")
ACTIONS = ("approve", "reject", "edit")


@dataclass(frozen=True)
class Cost:
    device_hours: float
    devices: int
    steps: int  # per run
    runs: int  # 1, or the trials of a sweep
    step_s: float
    basis: str  # how step_s was found

    def describe(self) -> str:
        runs = f"{self.runs} runs x " if self.runs > 1 else ""
        return (
            f"{self.device_hours:.3g} device-hours ({runs}{self.devices} devices x {self.steps} steps x "
            f"{self.step_s:.3g} s/step, {self.basis})"
        )


@dataclass(frozen=True)
class Policy:
    """How gated tool calls are decided. Interactive unless `unattended`."""

    approve_below: float = DEFAULT_APPROVE_BELOW  # device-hours under which a launch needs no approval
    unattended: bool = False
    device_hours: float = math.inf  # unattended budget for all launches of a conversation
    trials: float = math.inf  # unattended budget of runs (a sweep counts its trials)
    pull_requests: bool = False  # unattended: may push branches and open pull requests

    @classmethod
    def yes(cls) -> Policy:
        """Approve everything without asking (`--yes`)."""
        return cls(unattended=True, pull_requests=True)

    @classmethod
    def parse(cls, text: str) -> Policy:
        """An unattended policy from `device_hours=4,trials=20,pr=no` (`--policy`); every key is optional."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = (x.strip() for x in part.partition("="))
            key = key.replace("-", "_")
            try:
                if key == "device_hours" and sep:
                    values["device_hours"] = float(value)
                elif key == "trials" and sep:
                    values["trials"] = int(value)
                elif key == "pr" and value.lower() in ("yes", "no"):
                    values["pull_requests"] = value.lower() == "yes"
                else:
                    raise ValueError
            except ValueError:
                raise ConfigError(
                    f"--policy: cannot read {part!r}; expected device_hours=HOURS, trials=N and pr=yes|no, "
                    "comma-separated"
                ) from None
        for key in ("device_hours", "trials"):
            if key in values:
                _non_negative(values[key], f"--policy {key}")
        return cls(unattended=True, **values)

    def with_threshold(self, approve_below: float | None) -> Policy:
        if approve_below is None:
            return self
        return replace(self, approve_below=_non_negative(approve_below, "--approve-below"))


def threshold_from_env(env: dict[str, str] | None = None) -> float | None:
    """MESHPILOT_APPROVE_BELOW, in device-hours, if set."""
    text = (env if env is not None else os.environ).get("MESHPILOT_APPROVE_BELOW")
    if not text:
        return None
    try:
        return _non_negative(float(text), "MESHPILOT_APPROVE_BELOW")
    except ValueError:
        raise ConfigError(f"MESHPILOT_APPROVE_BELOW must be a number of device-hours, got {text!r}") from None


def _non_negative(value: float, name: str = "value") -> float:
    if not value >= 0:  # also refuses nan
        raise ConfigError(f"{name} must not be negative, got {value}")
    return value


@dataclass(frozen=True)
class Request:
    """A tool call waiting for a decision: what the interrupt shows a person."""

    tool_call_id: str
    tool: str
    args: dict[str, Any]
    kind: str  # launch | pull_request
    summary: str
    cost: Cost | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def request_for(call: dict[str, Any], repo: Path) -> Request | None:
    """The approval request a tool call needs, or None; raises ConfigError for a launch that cannot run."""
    name, args = call["name"], call["args"]
    if name in PULL_REQUEST_TOOLS:
        return Request(call["id"], name, args, "pull_request", f"push a branch and open a pull request ({args})")
    if name not in LAUNCH_TOOLS:
        return None
    if name == "resume_job":
        what, cost = resume_cost(repo, args.get("job_id") or "")
        return Request(call["id"], name, args, "launch", f"{what}: {cost.describe()}", cost)
    cost = call_cost(name, args, repo)
    what = "start a sweep" if name == "run_sweep" else "launch a run"
    return Request(
        call["id"],
        name,
        args,
        "launch",
        f"{what} of {args.get('experiment') or 'meshpilot.yaml'}: {cost.describe()}",
        cost,
    )


def resume_cost(repo: Path, job_id: str) -> tuple[str, Cost]:
    """What resuming the preempted job `job_id` will do, and what it costs: a run's steps left after its checkpoint,
    a sweep's trials not yet ended. ConfigError for a job that cannot be resumed (agent.jobs.resumable_job)."""
    out = resolve_in_repo(repo, job_id)
    job = jobs.resumable_job(out)
    launch = jobs.recorded_launch(job)
    if job.get("kind") == jobs.SWEEP:
        left = max(1, job["trials"] - jobs.run_status(out)["trials_ended"])
        cost = sweep_cost(launch["experiment"], left)
        return f"resume the preempted sweep {job_id} of {launch['experiment'].name} ({left} trials to go)", cost
    checkpoint = jobs.resume_checkpoint(out)
    done = int(checkpoint.name.removeprefix("step_"))
    left = max(1, job["steps"] - done)
    cost = launch_cost(
        launch["experiment"], nproc=launch["nproc"], layout=launch["layout"], overrides=launch["overrides"], steps=left
    )
    what = (
        f"resume the preempted run {job_id} from its checkpoint {checkpoint.name} ({left} of {job['steps']} steps left)"
    )
    return what, cost


def call_cost(name: str, args: dict[str, Any], repo: Path) -> Cost:
    """The device-hours a launch_run or run_sweep call would use."""
    experiment = resolve_in_repo(repo, args.get("experiment") or "meshpilot.yaml")
    if name == "run_sweep":
        return sweep_cost(experiment, args.get("trials"))
    return launch_cost(
        experiment,
        nproc=args.get("nproc"),
        layout=args.get("layout"),
        steps=args.get("steps"),
        overrides=args.get("overrides") or (),
    )


def resolve_in_repo(repo: Path, path: str) -> Path:
    """A path the model gave, relative to the repository; refuses one outside it, and a private one inside it
    (the sealed store, meshpilot's cache, credentials: agent.private), whatever directory the repository is."""
    resolved = (repo / path).resolve()
    if not resolved.is_relative_to(repo.resolve()):
        raise ConfigError(f"{path} lies outside the repository {repo}")
    check_readable(resolved)
    return resolved


def launch_cost(
    experiment: Path,
    *,
    nproc: int | None = None,
    layout: str | None = None,
    steps: int | None = None,
    overrides: tuple[str, ...] | list[str] = (),
) -> Cost:
    """Device-hours of one run; checks the request as the launcher would (ConfigError) without starting anything."""
    # torch (seconds to import) only to price a run
    import torch

    # imported here, as torch is: they load transformers (seconds), which the TUI and `meshpilot ask`, importing this
    # module at start, wait for only once a cost is asked for
    from trainer.data.rows import plan_batches
    from trainer.model.build import model_config

    loaded = load_experiment(experiment, [*overrides, *([f"train.steps={steps}"] if steps is not None else [])])
    device_type = loaded.hardware.device_type
    if device_type == "auto":
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    nproc = next((n for n in (nproc, loaded.hardware.devices) if n is not None), None)
    if nproc is None:
        nproc = torch.cuda.device_count() if device_type == "cuda" else 1
    devices = nproc * loaded.hardware.nodes
    if nproc < 1 or loaded.train.steps < 1:
        raise ConfigError(f"a run needs at least one process and one step (got {nproc} and {loaded.train.steps})")
    try:
        resolved = (Layout.parse(layout) if layout else loaded.layout).resolve(devices)
    except LayoutError as e:
        raise ConfigError(str(e)) from None
    batches = plan_batches(
        loaded.train.global_batch_tokens, loaded.data.seq_len, loaded.train.micro_batch, resolved.dp_degree
    )
    config = model_config(loaded.model, Path(loaded.base_dir))
    try:
        resolved_experiment = replace(loaded, layout=resolved)
        step_s = _predicted_step_s(resolved_experiment, config, device_type, nproc, batches.grad_accum)
        basis = "predicted"
    except Exception as e:
        step_s, basis = FALLBACK_STEP_S, f"assumed: no prediction ({type(e).__name__})"
    hours = devices * loaded.train.steps * step_s / 3600
    return Cost(hours, devices, loaded.train.steps, 1, step_s, basis)


def sweep_cost(experiment: Path, trials: int | None = None) -> Cost:
    """A sweep runs `trials` runs of `search.trial_steps` steps each."""
    search = load_experiment(experiment).search
    trials = search.trials if trials is None else trials
    if trials < 1:
        raise ConfigError(f"a sweep needs at least one trial, got {trials}")
    one = launch_cost(experiment, steps=search.trial_steps)
    return replace(one, device_hours=one.device_hours * trials, runs=trials)


def _predicted_step_s(experiment, config, device_type: str, nproc: int, grad_accum: int) -> float:
    """trainer.costs.throughput's calibrated step time for this resolved launch on this machine kind."""
    # imported here: they load torch and transformers (see launch_cost)
    from trainer.costs.calibration import Calibration
    from trainer.costs.throughput import predict_run

    hardware = this_machine(device_type, nproc, experiment.hardware.nodes)
    return predict_run(experiment, config, hardware, grad_accum, Calibration.load(hardware)).step_s


def automatic_decision(policy: Policy, request: Request, spent: Spent) -> dict[str, Any] | None:
    """The decision the policy makes by itself, or None when a person must be asked."""
    if request.kind == "pull_request":
        if not policy.unattended:
            return None
        if policy.pull_requests:
            return {"action": "approve"}
        return {"action": "reject", "reason": "the unattended policy does not allow pushing or pull requests"}
    cost = request.cost
    if not policy.unattended:
        return {"action": "approve"} if cost.device_hours < policy.approve_below else None
    hours, launches = spent["device_hours"] + cost.device_hours, spent["launches"] + cost.runs
    if hours > policy.device_hours:
        return {
            "action": "reject",
            "reason": f"over the policy's budget: {hours:.3g} of {policy.device_hours:g} device-hours",
        }
    if launches > policy.trials:
        return {"action": "reject", "reason": f"over the policy's budget: {launches} of {policy.trials:g} trials"}
    return {"action": "approve"}


def check_decision(value: Any) -> dict[str, Any]:
    """A person's decision: {"action": "approve"} | {"action": "reject", "reason": ...} |
    {"action": "edit", "args": {...}} (the tool call runs with these arguments merged in)."""
    if not isinstance(value, dict) or value.get("action") not in ACTIONS:
        raise ConfigError(f"a decision is one of {', '.join(ACTIONS)}, got {value!r}")
    if value["action"] == "edit" and not isinstance(value.get("args"), dict):
        raise ConfigError("an edit decision needs args: a mapping of the tool call's arguments to change")
    if value["action"] == "reject" and not isinstance(value.get("reason", ""), str):
        raise ConfigError("a rejection's reason must be text")
    return value


def add_spent(spent: Spent, request: Request) -> Spent:
    if request.cost is None:
        return spent
    return {
        "device_hours": spent["device_hours"] + request.cost.device_hours,
        "launches": spent["launches"] + request.cost.runs,
    }
