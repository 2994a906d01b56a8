"""The agent's tools: thin wrappers over trainer/, agent.jobs, agent.sweep, evalsuite and agent.report.

Each returns JSON whose "source" names the file its figures come from (relative to the experiment repository),
so that a reply can say where each number it states was read. Launches are idempotent: the run directory is
derived from the tool call's id, which the checkpointer keeps, so a graph resumed after a crash that re-executes
a launch finds its run (agent.jobs never relaunches a run that started) instead of starting a second one.

Modules that other parts of meshpilot provide are imported inside the tool that needs them: a missing one makes
that tool fail with a one-line error the model can read, not the whole agent.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import platform
from pathlib import Path
from typing import Annotated, Any

from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

from agent.approvals import resolve_in_repo
from agent.private import read_text
from agent.records import SUMMARY, SUMMARY_FILE
from agent.repo.providers.local import LocalProvider
from trainer.config import ConfigError, load_experiment
from trainer.hardware import detect_intra_node_link
from trainer.layout import layout_family, layout_name
from trainer.results.contracts import write_json
from trainer.results.rundir import RunDir

Repo = Annotated[str, InjectedState("repo")]
CallId = Annotated[str, InjectedToolCallId]
GiB = 1024**3
STATE_DIR = ".meshpilot"  # the agent's own files inside the experiment repository
# The figures of metrics.json that tool results carry.
METRICS = ("status", "error", "layout", "world_size", "device_type", "device_name", "steps", "micro_batch",
           "grad_accum", "seq_len", "tokens_per_s", "tokens_per_s_per_device", "mfu", "peak_mem_bytes",
           "final_loss", "precision", "packing", "gns", "recommended_global_batch_tokens", "gns_note")  # fmt: skip
READ_LIMIT = 20_000  # characters of a file returned at once: enough to read, small enough for a prompt


class ToolError(ConfigError):
    """A tool could not do what it was asked, in one line the model and the user can read."""


@tool
def inspect_hardware(repo: Repo) -> str:
    """Detect this machine's accelerators: device type, how many, their names and memory, the link between them.

    Call this before planning when the user does not say which hardware to plan for.
    """
    # torch (seconds to import) only when this tool is called
    import torch

    from trainer.host.environment import device_name  # imported here, as torch is: it loads torch

    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    count = torch.cuda.device_count() if device_type == "cuda" else 1
    memory = torch.cuda.get_device_properties(0).total_memory if device_type == "cuda" else None
    found = {
        "device_type": device_type,
        "devices": count,
        "device_name": device_name(device_type),
        "device_mem_bytes": memory,
        "intra_node_link": detect_intra_node_link(device_type),
        "cpu_cores": os.cpu_count(),
        "host": platform.node(),
    }
    path = Path(repo) / STATE_DIR / "hardware.json"
    write_json(path, found)
    return _result(repo, path, found)


@tool(parse_docstring=True)
def plan_layouts(
    repo: Repo,
    devices: int,
    nodes: int = 1,
    device_type: str = "cuda",
    device_mem: str | None = None,
    device_name: str | None = None,
    experiment: str = "meshpilot.yaml",
    top: int = 5,
    model: str | None = None,
    gpu: str | None = None,
    seq_len: int | None = None,
) -> str:
    """Rank every parallelism layout (DDP, FSDP, HSDP, tensor/pipeline/context parallel) for the experiment's
    model by predicted tokens/s, dropping those predicted not to fit in device memory. Runs on the meta device:
    nothing is trained. A train.micro_batch or train.activation_checkpointing the experiment file sets is the only
    one planned; otherwise every micro-batch that divides a rank's rows, with and without checkpointing.

    Args:
        devices: devices per node to plan for, e.g. 8
        nodes: number of nodes
        device_type: cuda or cpu
        device_mem: memory per device such as 80GiB (default: the GPU preset's, the experiment's
            hardware.device_mem, else an H100 80GB's as torch reports it, 79.18 GiB)
        device_name: device model, for its peak FLOP/s (default: the GPU preset's, else an H100; on cpu this
            machine's)
        experiment: experiment file, relative to the repository
        top: how many of the fastest candidates to return
        model: a model preset (e.g. llama-3.1-8b) planned with sequence length 4096 and 4 rows per device
            instead of the experiment
        gpu: a GPU preset (e.g. h100, a100-40gb, rtx-4090) giving the device name and memory
        seq_len: sequence length (default: the experiment's data.seq_len)
    """
    from trainer.costs.plan_request import PlanRequest, plan_request  # imported here: it loads torch, transformers

    if devices < 1 or nodes < 1 or top < 1:
        raise ToolError(f"devices, nodes and top must be at least 1 (got {devices}, {nodes}, {top})")
    if device_type not in ("cuda", "cpu"):
        raise ToolError(f"device_type is cuda or cpu, not {device_type!r}")
    path = resolve_in_repo(Path(repo), experiment)
    request = PlanRequest(
        devices=devices, experiment=None if model else path, model=model, nodes=nodes, device_type=device_type,
        gpu=gpu, device_name=device_name, device_mem=device_mem, seq_len=seq_len, probe=False,
    )  # fmt: skip
    planned = plan_request(request)
    hardware, memory, seq_len = planned.hardware, planned.device_mem, planned.seq_len
    candidates = [c.as_dict() for c in planned.candidates]
    if not candidates:
        raise ToolError(f"no layout divides {devices * nodes} devices for this model and batch")
    stem = f"{model}-seq{seq_len}" if model else path.stem
    out = Path(repo) / STATE_DIR / "plans" / f"{stem}-{devices}x{nodes}-{device_type}-{_size_name(memory)}.json"
    write_json(out, {"experiment": str(path), "hardware": hardware.__dict__, "candidates": candidates})
    feasible = [_candidate(c) for c in candidates if c["dropped"] is None]
    dropped: dict[str, int] = {}
    for c in candidates:
        if c["dropped"] is not None:
            reason = c["dropped_group"]
            dropped[reason] = dropped.get(reason, 0) + 1
    best_by_family: dict[str, dict] = {}
    for c in feasible:
        best_by_family.setdefault(c["family"], c)
    summary = {
        "devices": devices,
        "nodes": nodes,
        "device_type": device_type,
        "device_name": hardware.device_name,
        "model": model or "the experiment's",
        "seq_len": seq_len,
        "device_mem_gib": _gib(memory),
        "feasible": len(feasible),
        "dropped": dropped,
        "top": feasible[:top],
        "best_by_family": best_by_family,
        "dropped_by_family": _dropped_by_family(candidates, best_by_family),
    }
    return _result(repo, out, summary)


@tool(parse_docstring=True)
def launch_run(
    repo: Repo,
    tool_call_id: CallId,
    experiment: str = "meshpilot.yaml",
    nproc: int | None = None,
    layout: str | None = None,
    steps: int | None = None,
    overrides: list[str] | None = None,
) -> str:
    """Start a training run with the built-in trainer in the background; returns its run directory at once.

    Expensive launches wait for the user's approval first. Follow with wait_run (or wait_for_job) or run_status.

    Args:
        experiment: experiment file, relative to the repository
        nproc: processes (devices) per node; default the experiment's hardware.devices, every GPU, or 1 on CPU
        layout: mesh degrees such as dp_shard=2,tp=2 (default data parallel over all processes)
        steps: optimizer steps (overrides train.steps)
        overrides: experiment keys to change, such as ["train.lr=1e-3"]
    """
    start_run = _provided("agent.jobs", "start_run")
    path = resolve_in_repo(Path(repo), experiment)
    out = Path(repo) / "runs" / f"{path.stem}-{_short(tool_call_id)}"
    run_id = start_run(path, out, nproc=nproc, layout=layout, steps=steps, overrides=list(overrides or ()))
    run = _relative(repo, out)
    return _result(repo, out, {"run_id": run_id, "job_id": run, "run": run, "nproc": nproc, "steps": steps})


@tool(parse_docstring=True)
def resume_job(repo: Repo, job_id: str) -> str:
    """Continue a preempted run or sweep in its own directory, in the background; returns at once. A run continues
    from its newest checkpoint with its own experiment and options (`meshpilot train --resume`), a sweep with its
    trials (`meshpilot sweep --resume`). Only a preempted job resumes: one still running, ended ok or failed, or
    a run preempted before its first checkpoint, is refused. Waits for the user's approval as a launch does.
    Follow with wait_for_job.

    Args:
        job_id: the run or sweep directory, relative to the repository (as launch_run or run_sweep returned it)
    """
    out = _run_dir(repo, job_id, "job")
    _provided("agent.jobs", "resume_job")(out)
    kind = _provided("agent.jobs", "read_job")(out).get("kind", "run")
    return _result(repo, out / "job.json", {"job_id": job_id, kind: job_id, "resumed": True})


@tool(parse_docstring=True)
def run_status(repo: Repo, run: str) -> str:
    """The state of a run (queued, running, ok, failed, oom, timeout, nan, cancelled, or preempted: stopped by a
    scheduler's SIGTERM after saving a checkpoint, which resume_job continues), its step and metrics.

    Args:
        run: the run directory, relative to the repository (as launch_run returned it)
    """
    status = _provided("agent.jobs", "run_status")(_run_dir(repo, run))
    return _run_result(repo, run, status)


@tool(parse_docstring=True)
def wait_run(repo: Repo, run: str, timeout_s: float | None = None) -> str:
    """Wait until a run ends (or timeout_s passes) and return its final state and metrics.

    Args:
        run: the run directory, relative to the repository
        timeout_s: seconds to wait at most; the run goes on in the background after that
    """
    status = _provided("agent.jobs", "wait_run")(_run_dir(repo, run), timeout_s=timeout_s)
    return _run_result(repo, run, status)


@tool(parse_docstring=True)
def cancel_run(repo: Repo, run: str) -> str:
    """Stop a running or queued run; its logs and partial results stay on disk.

    Args:
        run: the run directory, relative to the repository
    """
    out = _run_dir(repo, run)
    cancelled = _provided("agent.jobs", "cancel_run")(out)
    return _result(repo, out, {"run": run, "cancelled": bool(cancelled)})


@tool(parse_docstring=True)
def read_results(repo: Repo, run: str) -> str:
    """Read a finished run's result files: metrics.json (status, tokens/s, MFU, loss, layout, gradient noise scale
    and the batch it recommends), memory.json (predicted and measured memory of rank 0 by category: parameters,
    gradients, optimizer state, activations, peak) and the per-step losses of steps.jsonl.

    Args:
        run: the run directory, relative to the repository
    """
    directory = RunDir(_run_dir(repo, run))
    metrics = directory.read_metrics()
    if metrics is None:
        raise ToolError(f"{run} has no metrics.json yet: the run has not ended (see run_status)")
    found: dict[str, Any] = {"run": run, **_key_metrics(metrics)}
    memory = directory.read_memory()
    if memory is not None:
        found["memory"] = {
            "source": _relative(repo, directory.memory),
            "rank0_predicted": memory["predicted"][0],
            "rank0_measured": memory["measured"][0],
            "peak_source": memory["peak_source"],
        }
    steps = directory.read_steps()
    if steps:
        losses = [{"step": s["step"], "loss": s["loss"]} for s in steps]
        found["steps_file"] = {"source": _relative(repo, directory.steps), "losses": losses[-10:]}
    return _result(repo, directory.metrics, found)


@tool
def list_runs(repo: Repo) -> str:
    """List the run directories under runs/ with the status their metrics.json records (none: not ended)."""
    runs = [{"run": _relative(repo, d), "status": _status_of(d)} for d in sorted((Path(repo) / "runs").glob("*/"))]
    return _result(repo, Path(repo) / "runs", {"runs": runs})


@tool
def list_results(repo: Repo) -> str:
    """What the repository holds, newest first: runs (with status), sweeps (with winner and job state; a preempted
    run or sweep is resumable with resume_job), and the reports and pull requests meshpilot wrote (report files on
    meshpilot/* branches). Use it to find "the last run" or "the winner"."""
    root = Path(repo)
    runs = [{"run": _relative(repo, d), "status": _status_of(d)} for d in _newest(root / "runs")]
    sweeps = []
    for directory in _newest(root / "sweeps"):
        summary = SUMMARY.read(directory / SUMMARY_FILE)
        winner = summary["winner"] if summary is not None else None
        job = _provided("agent.jobs", "read_job")(directory) or {}  # its state: "preempted" is resumable
        finished = summary is not None
        sweeps.append(
            {"sweep": _relative(repo, directory), "winner": winner, "finished": finished, "state": job.get("state")}
        )
    found = {"runs": runs, "sweeps": sweeps, **_reports(root)}
    return _result(repo, root, found)


@tool(parse_docstring=True)
def read_sweep(repo: Repo, sweep: str) -> str:
    """Read a sweep's summary.json: every trial's layout, status, measured and predicted tokens/s, peak memory and
    loss, the winner, and how the planner's top pick did.

    Args:
        sweep: the sweep directory, relative to the repository
    """
    directory = resolve_in_repo(Path(repo), sweep)
    summary = SUMMARY.read(directory / SUMMARY_FILE)
    if summary is None:
        raise ToolError(f"{sweep} has no summary.json: no sweep finished there")
    return _result(repo, directory / SUMMARY_FILE, {"sweep": _relative(repo, directory), **summary})


@tool(parse_docstring=True)
def run_sweep(repo: Repo, tool_call_id: CallId, experiment: str = "meshpilot.yaml", trials: int | None = None) -> str:
    """Start a tuning sweep over layouts and settings, as the experiment's search section says, in the background;
    returns its job id and sweep directory at once. Follow with wait_for_job (its summary once it ended).

    A sweep launches many runs: it waits for the user's approval first.

    Args:
        experiment: experiment file, relative to the repository
        trials: number of runs (default search.trials)
    """
    start_sweep = _provided("agent.jobs", "start_sweep")
    path = resolve_in_repo(Path(repo), experiment)
    out = Path(repo) / "sweeps" / f"{path.stem}-{_short(tool_call_id)}"
    # The directory is this call's own: a graph resumed after a crash that runs the call again adopts the job.
    start_sweep(path, out, trials=trials)
    sweep = _relative(repo, out)
    return _result(repo, out / "job.json", {"job_id": sweep, "sweep": sweep, "trials": trials})


@tool(parse_docstring=True)
def wait_for_job(repo: Repo, job_id: str, timeout_s: float | None = None) -> str:
    """Wait until a background job (a run or a sweep) ends, or timeout_s passes, and return its state: once it
    ended, a run's metrics or a sweep's summary (every trial, the winner). timeout_s=0 only looks.

    Args:
        job_id: the job_id launch_run or run_sweep returned (the job's directory, relative to the repository)
        timeout_s: seconds to wait at most; the job goes on in the background after that
    """
    out = _run_dir(repo, job_id, "job")
    status = _provided("agent.jobs", "wait_run")(out, timeout_s=timeout_s)
    if status["kind"] != "sweep":
        return _run_result(repo, job_id, status)
    summary = status["summary"] or {}
    job = {k: status[k] for k in ("kind", "state", "cause", "trials_ended")}
    found = {"job_id": job_id, "sweep": _relative(repo, out), **job, **summary}
    return _result(repo, out / ("summary.json" if summary else "job.json"), found)


@tool(parse_docstring=True)
def run_benchmark(repo: Repo, tool_call_id: CallId, model: str, suite: str = "builtin") -> str:
    """Evaluate a model on a benchmark suite; returns aggregate scores only (test labels stay private).

    Args:
        model: a run directory (its latest checkpoint), a checkpoint or a model directory, relative to the repository
        suite: builtin, or a task file or directory of task files relative to the repository
    """
    run_bench = _provided("evalsuite.api", "run_bench")
    out = Path(repo) / STATE_DIR / "bench" / f"{Path(suite).stem}-{_short(tool_call_id)}"
    saved = out / "result.json"
    # Written by this very call before a crash cut it short: read it rather than evaluate (and submit) again.
    if not saved.is_file():
        tasks = suite if suite == "builtin" else str(resolve_in_repo(Path(repo), suite))
        run_bench(tasks, resolve_in_repo(Path(repo), model), out)
    result = _provided("evalsuite.result", "BENCH_RESULT").read(saved)  # evalsuite's contract: checked as it is read
    tasks = [{k: t[k] for k in ("task", "split", "private", "metrics", "n_examples")} for t in result["tasks"]]
    found = {"bench": _relative(repo, out), "suite": result["suite"], "model": model, "tasks": tasks}
    return _result(repo, saved, {**found, "leaderboard_id": result.get("leaderboard_id")})


@tool(parse_docstring=True)
def write_report(repo: Repo, sweep: str, bench: list[str] | None = None, slug: str | None = None) -> str:
    """Write a report of a sweep (and benchmark results) into the repository's docs and commit it on a new
    local branch. Nothing is pushed.

    Args:
        sweep: the sweep directory, relative to the repository
        bench: benchmark directories (as run_benchmark returned them) to include
        slug: short name for the report file
    """
    return _report(repo, sweep, bench, slug, pr=False)


@tool(parse_docstring=True)
def open_pull_request(repo: Repo, sweep: str, bench: list[str] | None = None, slug: str | None = None) -> str:
    """Write the report of a sweep, push its branch and open a pull request with the experiment file's
    report.pr settings. Always waits for the user's approval first.

    Args:
        sweep: the sweep directory, relative to the repository
        bench: benchmark directories (as run_benchmark returned them) to include
        slug: short name for the report file
    """
    return _report(repo, sweep, bench, slug, pr=True)


@tool(parse_docstring=True)
def update_docs(repo: Repo, sweep: str | None = None, slug: str | None = None) -> str:
    """Bring the repository's docs up to date with a sweep's results: docs/training.md (the chosen layout and why,
    the commands, every layout's memory and throughput measured and predicted, links to every report) and
    README's managed section, with the report they cite. Proposed as a commit on a branch and a pull request:
    always waits for the user's approval first.

    Args:
        sweep: the sweep directory, relative to the repository (default: the newest finished sweep)
        slug: short name for the report file
    """
    if sweep is None:
        finished = [d for d in _newest(Path(repo) / "sweeps") if (d / "summary.json").is_file()]
        if not finished:
            raise ToolError("no finished sweep under sweeps/ to document: run a sweep first")
        sweep = _relative(repo, finished[0])
    found = json.loads(_report(repo, sweep, None, slug, pr=True))
    docs = [path for path in found.get("files", []) if path in ("docs/training.md", "README.md")]
    return json.dumps({**found, "sweep": sweep, "docs": docs})


@tool(parse_docstring=True)
def read_file(repo: Repo, path: str, offset: int = 0) -> str:
    """Read a text file of the experiment repository (or list a directory).

    Args:
        path: relative to the repository
        offset: character to start from, for long files
    """
    target = resolve_in_repo(Path(repo), path)
    if target.is_dir():
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return _result(repo, target, {"entries": entries})
    if not target.is_file():
        raise ToolError(f"no file {path} in the repository")
    try:
        text = read_text(target)  # checked again on the file opened (agent.private)
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not a text file") from None
    chunk = text[offset : offset + READ_LIMIT]
    more = offset + len(chunk) < len(text)
    return _result(repo, target, {"text": chunk, "next_offset": offset + len(chunk) if more else None})


TOOLS = [
    inspect_hardware,
    plan_layouts,
    launch_run,
    run_status,
    wait_run,
    cancel_run,
    read_results,
    list_runs,
    list_results,
    read_sweep,
    run_sweep,
    resume_job,
    wait_for_job,
    run_benchmark,
    write_report,
    open_pull_request,
    update_docs,
    read_file,
]


def _report(repo: str, sweep: str, bench: list[str] | None, slug: str | None, pr: bool) -> str:
    write = _provided("agent.report", "write_report")
    experiment = Path(repo) / "meshpilot.yaml"
    provider = load_experiment(experiment).report.pr.provider if experiment.is_file() else "local"
    bench_results = [_bench_result(repo, b) for b in bench or ()]
    written = write(
        resolve_in_repo(Path(repo), sweep), Path(repo), bench_results=bench_results, slug=slug, pr=pr, provider=provider
    )
    return _result(repo, Path(repo) / written["report_path"], {k: v for k, v in written.items() if k != "diff"})


def _newest(directory: Path) -> list[Path]:
    """The directories under `directory`, most recently changed first."""
    found = list(directory.glob("*/")) if directory.is_dir() else []
    return sorted(found, key=lambda d: (-max(p.stat().st_mtime for p in [d, *d.iterdir()]), d.name))


def _status_of(run: Path) -> str | None:
    """The status a run directory's metrics.json records; None before it ended."""
    metrics = RunDir(run).read_metrics()
    return metrics["status"] if metrics is not None else None


def _reports(root: Path) -> dict[str, list[dict]]:
    """The report files on meshpilot's branches, and the pull requests the local provider recorded."""
    # GitPython (a slow import) only when this tool is called
    import git

    try:
        repository = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):  # no repository: no report can have been written
        return {"reports": [], "pull_requests": []}
    reports, pulls = [], []
    for branch in repository.branches:
        if not branch.name.startswith("meshpilot/"):
            continue
        for item in branch.commit.tree.traverse():
            if item.path.endswith("/README.md") and item.path.count("/") >= 2:
                reports.append({"branch": branch.name, "path": item.path})
        description = LocalProvider(repository, "origin").description_path(branch.name)
        if description.is_file():
            pulls.append({"branch": branch.name, "description": str(description)})
    return {"reports": reports, "pull_requests": pulls}


def _bench_result(repo: str, directory: str) -> Path:
    found = resolve_in_repo(Path(repo), directory) / "result.json"
    if not found.is_file():
        raise ToolError(f"no benchmark result {directory}/result.json (run_benchmark returns the directory)")
    return found


def _run_result(repo: str, run: str, status: dict[str, Any]) -> str:
    """A run's status, citing metrics.json once the run has ended and steps.jsonl while it runs."""
    out = _run_dir(repo, run)
    source = out / "metrics.json" if (out / "metrics.json").is_file() else out / "steps.jsonl"
    metrics = _key_metrics(status["metrics"]) if status.get("metrics") else None
    return _result(repo, source, {"run": run, **status, "metrics": metrics})


def _key_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """The figures of metrics.json a reply may quote (not versions, hashes and the like)."""
    return {k: metrics.get(k) for k in METRICS}


def _run_dir(repo: str, run: str, what: str = "run") -> Path:
    out = resolve_in_repo(Path(repo), run)
    if not out.is_dir():
        raise ToolError(f"no {what} directory {run} in the repository")
    return out


def _provided(module: str, name: str):
    """A function another part of meshpilot provides; a one-line error when that part is not installed."""
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        if e.name is None or not module.startswith(e.name):
            raise
        raise ToolError(f"{module}.{name} is not available in this installation of meshpilot") from None


def _candidate(c: dict[str, Any]) -> dict[str, Any]:
    """The figures of a plan candidate a reply may quote."""
    comm = c["comm_bytes_per_step"] or {}
    return {
        "layout": layout_name(c["layout"]),
        "family": layout_family(c["layout"]),
        "micro_batch": c["micro_batch"],
        "grad_accum": c["grad_accum"],
        "activation_checkpointing": c["activation_checkpointing"],
        "zero_stage": c["zero_stage"],  # FSDP2's sharding, the planner's choice under train.zero_stage auto
        "fsdp_grad_sync": c["fsdp_grad_sync"],
        "predicted_tokens_per_s": c["predicted_tokens_per_s"],
        "predicted_step_s": c["predicted_step_s"],
        "predicted_peak_gib": _gib(c["predicted_peak_bytes"]),
        "comm_gib_per_step": _gib(sum(comm.values())),
        "runnable": c["runnable"],
        "notes": c["notes"],
    }


def _dropped_by_family(candidates: list[dict], feasible: dict[str, dict]) -> dict[str, str]:
    """For each family with no candidate that fits, why its smallest candidate was dropped (the planner's words)."""
    smallest: dict[str, dict] = {}
    # Unpredicted last: a pinned micro-batch that does not divide a rank's rows, the reason only where no other is.
    for c in sorted(candidates, key=lambda c: (c["predicted_peak_bytes"] is None, c["predicted_peak_bytes"] or 0)):
        family = layout_family(c["layout"])
        if c["dropped"] is not None and family not in feasible:
            smallest.setdefault(family, c)
    return {family: f"{layout_name(c['layout'])}: {c['dropped']}" for family, c in smallest.items()}


def _gib(size: float) -> float:
    """GiB to four significant digits: readable in a prompt, and exact enough for any figure a reply shows."""
    return float(f"{size / GiB:.4g}")


def _size_name(size: int) -> str:
    for unit, name in ((GiB, "GiB"), (1024**2, "MiB")):  # GPUs come in whole MiB (an H100 80GB: 81079 MiB)
        if size % unit == 0:
            return f"{size // unit}{name}"
    return f"{size}B"


def _short(tool_call_id: str) -> str:
    return hashlib.sha256(tool_call_id.encode()).hexdigest()[:8]


def _relative(repo: str, path: Path) -> str:
    path = Path(path).resolve()
    root = Path(repo).resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _result(repo: str, source: Path, figures: dict[str, Any]) -> str:
    return json.dumps({"source": _relative(repo, source), **figures}, default=str)
