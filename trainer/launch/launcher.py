"""`meshpilot train`: check everything, prepare data and tokenizer once, then start the ranks with torchrun.

Every check that can fail on bad input runs here, in the launching process, before any rank starts; the
workers only ever see a resolved, valid config.yaml.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import psutil
import torch
import yaml
from transformers import PretrainedConfig

from trainer.config import (
    ConfigError,
    Experiment,
    TrainSpec,
    check_galore,
    check_train_values,
    check_zero_stage,
    load_experiment,
    resolve_precision,
)
from trainer.data.prepare import prepare_data
from trainer.data.rows import (
    RowSource,
    TokenizedCorpus,
    plan_batches,
)
from trainer.host import preemption
from trainer.host.environment import git_state, process_env, resolve_device_type
from trainer.host.lifeline import tied_env
from trainer.launch import torchrun
from trainer.launch.progress import follow
from trainer.layout import Layout, LayoutError, check_layout_for_model
from trainer.model.attention import AttentionError, choose_attention
from trainer.model.build import check_positions, checkpoint_dir, model_config
from trainer.model.moe import check_moe, is_moe
from trainer.model.parameters import head_dim
from trainer.parallel.compile import resolve_loss
from trainer.parallel.context_parallel import check_context_parallel
from trainer.parallel.expert_parallel import ExpertParallelError, expert_kernel_for_run
from trainer.parallel.float8 import float8_refusal
from trainer.parallel.pipeline import check_pipeline
from trainer.parallel.tensor_parallel import check_sequence_parallel, check_vocabulary_split
from trainer.rank.checkpoint import checkpoint_step, latest, newest_verified
from trainer.rank.trackers import check_trackers
from trainer.results.contracts import write_text
from trainer.results.rundir import RunDir, RunInUse, RunLock
from trainer.results.schemas import LAUNCH, METRICS, PREEMPTED

# The memory check's override, besides --ignore-memory-check: for callers that pass an environment, not arguments
# (agent.jobs, sweeps).
IGNORE_MEMORY_ENV = "MESHPILOT_IGNORE_MEMORY_CHECK"
# Errors a rank sees when a peer died first: not the cause of a failure, its echo.
_PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset|Read error|Broken pipe|NCCL communicator was aborted|"
    r"ProcessGroupNCCL.*(?:abort|timeout)|Socket Timeout|Timed out waiting|connection refused",
    re.IGNORECASE,
)


@dataclass
class TrainRequest:
    experiment: Path
    nproc: int | None = None
    layout: str | None = None
    steps: int | None = None
    out: Path | None = None
    overrides: list[str] = field(default_factory=list)
    resume: bool = False
    nnodes: int | None = None  # default: hardware.nodes
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    ignore_memory_check: bool = False  # --ignore-memory-check: launch even where the memory model predicts no room


@dataclass
class PreparedRun:
    run: RunDir
    experiment: Experiment
    nproc: int  # processes per node
    nnodes: int
    request: TrainRequest
    lock: RunLock  # held from `prepare` to the end of `launch` (or of this process, however it ends)


def prepare(request: TrainRequest) -> PreparedRun:
    """Validate the request and write the run directory's config.yaml and launch.json; raises ConfigError.

    Cheap checks come first, so a typo is reported in a second, before a tokenizer is trained.
    """
    if request.nnodes is not None:
        _check_node_rank(request.node_rank, request.nnodes)  # before anything else: it decides which lock is taken
    overrides = list(request.overrides)
    if request.steps is not None:
        overrides.append(f"train.steps={request.steps}")
    experiment = load_experiment(request.experiment, overrides)
    _check_node_rank(request.node_rank, _first_given(request.nnodes, experiment.hardware.nodes))
    check_train_values(experiment)
    check_trackers(experiment.train.trackers)
    base_dir = Path(experiment.base_dir)
    nproc, nnodes = _resolve_hardware(request, experiment)
    if experiment.train.precision == "fp8":
        _check_float8(experiment, nproc)
    if experiment.train.optimizer == "galore_adamw":
        check_galore(experiment)
    check_zero_stage(experiment)
    config = model_config(experiment.model, base_dir)
    check_positions(config, experiment.data.seq_len)
    _choose_attention(experiment, config)
    _choose_experts(experiment, config)
    try:
        check_layout_for_model(experiment.layout, config)
        check_moe(config, experiment.layout, experiment.train)
        check_context_parallel(experiment.layout, config, experiment.data.seq_len)
        check_sequence_parallel(experiment.layout.tp, experiment.layout.cp, experiment.data.seq_len)
        check_vocabulary_split(experiment.layout.tp, config)
        train = experiment.train
        grad_accum = plan_batches(
            train.global_batch_tokens, experiment.data.seq_len, train.micro_batch, experiment.layout.dp_degree
        ).grad_accum
        check_pipeline(experiment.layout.pp, config, train.pp_schedule, train.pp_stages_per_rank, grad_accum)
    except LayoutError as e:
        raise ConfigError(str(e)) from None
    checked = not (request.ignore_memory_check or os.environ.get(IGNORE_MEMORY_ENV) == "1")
    available = _memory_available(experiment.hardware.device_type, nproc) if checked else None
    _choose_loss(experiment, config, grad_accum, available)
    if available is not None:
        _check_memory_fits(experiment, config, grad_accum, available)
    run = RunDir(request.out or Path("runs") / f"{request.experiment.stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        lock = RunLock(run, request.node_rank, whole_run=nnodes == 1)
    except RunInUse as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"--out {run.path}: cannot make the run directory there: {_os_reason(e)}") from None
    try:
        resume_from = _check_run_dir(run, request.resume, experiment)
        _write_run_files(run, request, experiment, config, resume_from)
    except OSError as e:  # a full or read-only file system: said in one line, the directory left as it was
        lock.release(discard=True)
        raise ConfigError(f"{run.path}: cannot write the run's files: {_os_reason(e)}") from None
    except BaseException:
        lock.release(discard=True)
        raise
    return PreparedRun(run, experiment, nproc, nnodes, request, lock)


def _os_reason(error: OSError) -> str:
    return error.strerror or str(error).splitlines()[0]


def _check_node_rank(node_rank: int, nnodes: int | None) -> None:
    if nnodes is not None and nnodes >= 1 and not 0 <= node_rank < nnodes:
        raise ConfigError(f"--node-rank {node_rank} is not a node of this {nnodes}-node run (0 to {nnodes - 1})")


def _memory_available(device_type: str, nproc: int) -> tuple[int, str]:
    """What each process has on this machine (`memory_per_process`): its device's memory, or its share of the host's."""
    if device_type == "cuda":
        devices = [torch.cuda.get_device_properties(i).total_memory for i in range(nproc)]
        return memory_per_process(device_type, nproc, device_memory=devices)
    return memory_per_process(device_type, nproc, host_available=psutil.virtual_memory().available)


def _check_memory_fits(
    experiment: Experiment, config: PretrainedConfig, grad_accum: int, available: tuple[int, str]
) -> None:
    """Refuse a run whose predicted peak per process (trainer.costs.memory_model) exceeds what each process has on
    this machine (`available`: _memory_available)."""
    refusal = memory_refusal(predicted_peak(experiment, config, grad_accum), *available)
    if refusal is not None:
        raise ConfigError(refusal)


def _choose_loss(
    experiment: Experiment, config: PretrainedConfig, grad_accum: int, available: tuple[int, str] | None
) -> None:
    """train.loss auto resolved before launch and recorded (resolve_loss): the whole loss only where the memory
    check says its run fits (`available`; a run whose check is skipped keeps the chunked loss's memory)."""

    def fits(train: TrainSpec) -> bool:
        if available is None:
            return False
        return memory_refusal(predicted_peak(replace(experiment, train=train), config, grad_accum), *available) is None

    experiment.train.loss = resolve_loss(experiment.train, experiment.layout, experiment.hardware.device_type, fits)


def predicted_peak(experiment: Experiment, config: PretrainedConfig, grad_accum: int) -> int:
    """The memory model's peak bytes of the busiest process, for the experiment as the launcher resolved it (its
    layout, precision and device type): a device needs no GPU to be priced."""
    from trainer.costs.memory_model import MemoryPlan, predict_memory  # imported here: only the launcher needs it

    train, data = experiment.train, experiment.data
    plan = MemoryPlan(
        train.micro_batch, data.seq_len, train.precision, train.activation_checkpointing, train, grad_accum,
        data.packing, experiment.hardware.device_type,
    )  # fmt: skip
    return max(rank["peak"] for rank in predict_memory(config, experiment.layout, plan))


def memory_per_process(
    device_type: str, nproc: int, device_memory: list[int] | None = None, host_available: int | None = None
) -> tuple[int, str]:
    """(bytes, what they are) each of `nproc` processes has: on CUDA the smallest of their devices' memory
    (`device_memory`, total_memory as torch reports it, or trainer.hardware.GPUS' memory_bytes); on the CPU the
    machine's available memory (`host_available`) shared by them."""
    if device_type == "cuda":
        return min(device_memory[:nproc]), "device memory per process"
    return host_available // nproc, f"available host memory per process ({nproc} sharing this machine)"


def memory_refusal(peak: int, available: int, where: str) -> str | None:
    """The one line refusing a run predicted to need `peak` bytes per process where each has `available` (`where`
    says of what), or None when it fits."""
    if peak <= available:
        return None
    return (
        f"the memory model predicts a peak of {_gib(peak)} per process, more than the {_gib(available)} of {where}; "
        "lower train.micro_batch, use more processes or another layout, or pass --ignore-memory-check"
    )


def _gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB"


def _write_run_files(
    run: RunDir, request: TrainRequest, experiment: Experiment, config: PretrainedConfig, resume_from: Path | None
) -> None:
    """Prepare data and tokenizer (the expensive part), then write config.yaml and launch.json for the ranks."""
    base_dir = Path(experiment.base_dir)
    data = prepare_data(experiment, config)
    tokenizer, data_dir = data.tokenizer, data.data_dir
    RowSource(TokenizedCorpus.load(data_dir), experiment.data.seq_len, experiment.data.packing, 0)  # big enough?

    weights = checkpoint_dir(experiment.model, base_dir)
    write_text(run.config, yaml.safe_dump(experiment.to_dict(), sort_keys=False))
    launch = {
        "experiment_file": str(request.experiment.resolve()),
        "base_dir": str(base_dir),
        "data_dir": str(data_dir),
        "weights_dir": str(weights) if weights else None,
        "resume": request.resume,
        "resume_from": resume_from.name if resume_from else None,
        "vocab_size": len(tokenizer),
        **git_state(base_dir),
    }
    LAUNCH.write(run.launch, launch)


def _resolve_hardware(request: TrainRequest, experiment: Experiment) -> tuple[int, int]:
    """Fill device type, process and node counts, layout and precision into the experiment, checking each."""
    device_type = resolve_device_type(experiment.hardware.device_type, "hardware.device_type")
    nproc = _first_given(request.nproc, experiment.hardware.devices)
    if nproc is None:
        nproc = torch.cuda.device_count() if device_type == "cuda" else 1
    nnodes = _first_given(request.nnodes, experiment.hardware.nodes)
    if nproc < 1 or nnodes < 1:
        raise ConfigError(f"the process count and node count must be at least 1 (got {nproc} and {nnodes})")
    if device_type == "cuda" and nproc > torch.cuda.device_count():
        raise ConfigError(f"--nproc {nproc} asks for more processes than the {torch.cuda.device_count()} CUDA devices")
    if nnodes > 1 and not request.rdzv_endpoint:
        raise ConfigError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT, the same on every node")
    try:
        layout = Layout.parse(request.layout) if request.layout else experiment.layout
        layout = layout.resolve(nproc * nnodes)
        layout.check_supported()
    except LayoutError as e:
        raise ConfigError(str(e)) from None
    train = experiment.train
    plan_batches(train.global_batch_tokens, experiment.data.seq_len, train.micro_batch, layout.dp_degree)
    train.precision = resolve_precision(train.precision, device_type)
    experiment.layout = layout
    experiment.hardware.device_type = device_type
    experiment.hardware.devices = nproc
    experiment.hardware.nodes = nnodes
    return nproc, nnodes


def launch(prepared: PreparedRun) -> dict:
    """Run the ranks to completion and return metrics.json; a failure is recorded there, not raised."""
    try:
        return _launch(prepared)
    except OSError as e:  # the run's results could not be written (a full disk): one line, not a traceback
        raise ConfigError(f"{prepared.run.path}: cannot write the run's results: {_os_reason(e)}") from None
    finally:
        prepared.lock.release()


def _launch(prepared: PreparedRun) -> dict:
    run, request = prepared.run, prepared.request
    for stale in (run.metrics, *run.path.glob("failure.rank*.json")):
        stale.unlink(missing_ok=True)
    # torchrun's agent, which forks the ranks (trainer.launch.torchrun): it and its ranks die with this launcher.
    command = [f"--nproc-per-node={prepared.nproc}"]
    if prepared.nnodes == 1 and request.rdzv_endpoint is None:
        command.append("--standalone")
    else:
        command += [f"--nnodes={prepared.nnodes}", f"--node-rank={request.node_rank}", "--rdzv-backend=c10d"]
        command += [f"--rdzv-endpoint={request.rdzv_endpoint or '127.0.0.1:29500'}"]
    command += ["--max-restarts=0", "--monitor-interval=0.1", str(run.path)]
    with run.torchrun_log.open("w") as output, _passing_on_preemption() as signals:
        process = torchrun.start(command, tied_env(_worker_env(prepared)), output, closed=prepared.lock.filenos())
        signals.agent = process.pid
        try:
            returncode = follow(process, run, prepared.experiment.train.steps, on_poll=signals.poll)
        except _GraceOver:
            _stop(process)
            metrics = _overdue_preemption(prepared, signals.received)
            METRICS.write(run.metrics, metrics)
            return metrics
        except BaseException as error:  # never leave the ranks running without their launcher
            _stop(process)
            reason = "interrupted by the user" if isinstance(error, KeyboardInterrupt) else f"launcher failed: {error}"
            METRICS.write(run.metrics, {**_failure_metrics(prepared, -2), "error": reason})
            raise
    metrics = run.read_metrics()
    if metrics is None and returncode == 0 and prepared.nnodes > 1:
        # The rendezvous, not --node-rank, decides which node hosts rank 0 and so writes the results.
        return {"status": "ok", "error": None, "node_rank": request.node_rank, "results_on": "the node of rank 0"}
    if metrics is None or returncode != 0:
        metrics = _failure_metrics(prepared, returncode)
        METRICS.write(run.metrics, metrics)
    if metrics["status"] == "ok" and prepared.experiment.train.save_hf:
        # Imported here: trainer.export.hf imports the modeling code (trainer.rank.loop), a second per launch.
        from trainer.export.hf import save_hf_after_run

        metrics = save_hf_after_run(run)
    return metrics


def _stop(process: torchrun.Agent) -> None:
    """SIGKILL torchrun's agent (it ignores SIGTERM, which preempts: trainer.host.preemption); the ranks die with it
    (trainer.host.lifeline)."""
    process.kill()
    process.wait()


class _Preemption:
    """The launcher's part of a preemption (trainer.host.preemption): note SIGTERM or SIGUSR1 and pass it on to the
    ranks, again at every poll until the run ends, since a rank that was still starting did not listen yet; once
    the grace period is over with the ranks still running (a step longer than it, or a hung rank), stop them and
    record the preemption itself, before the scheduler's SIGKILL leaves no status at all."""

    def __init__(self):
        self.received, self.at = 0, 0.0
        self.agent: int | None = None

    def note(self, signum: int, _frame: object) -> None:
        if not self.received:
            self.received, self.at = signum, time.monotonic()
        self.pass_on()

    def poll(self) -> None:
        self.pass_on()
        if self.received and time.monotonic() - self.at > preemption.grace_s():
            raise _GraceOver

    def pass_on(self) -> None:
        if not self.received or self.agent is None:
            return
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.agent).children():
                with contextlib.suppress(psutil.Error):
                    if child.name().startswith("meshpilot:r"):  # a rank (named once it listens), not a helper
                        child.send_signal(self.received)


class _GraceOver(Exception):
    """The ranks still ran when the preemption's grace period ended."""


def _overdue_preemption(prepared: PreparedRun, signum: int) -> dict:
    """metrics.json of a run whose ranks the launcher stopped after the grace period: preempted, resumable from
    the newest complete checkpoint, as the ranks would have recorded it had they reached a step boundary."""
    run, name = prepared.run, preemption.name(signum)
    newest = latest(run.checkpoints)
    steps = run.read_steps()
    then = f"--resume continues from {newest.name}" if newest else "no checkpoint yet: train it again"
    error = (f"preempted by {name}; the ranks did not stop within the {preemption.grace_s():g} s grace period and "
             f"were stopped without saving; {then}")  # fmt: skip
    return {**_ended_metrics(prepared, PREEMPTED, error), "signal": name,
            "steps_completed": steps[-1]["step"] if steps else 0,
            "resume_from": newest.name if newest else None}  # fmt: skip


@contextlib.contextmanager
def _passing_on_preemption():
    signals = _Preemption()
    previous = {signum: signal.signal(signum, signals.note) for signum in preemption.SIGNALS}
    try:
        yield signals
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _failure_metrics(prepared: PreparedRun, returncode: int) -> dict:
    return _ended_metrics(prepared, *_failure_cause(prepared, returncode))


def _ended_metrics(prepared: PreparedRun, status: str, error: str) -> dict:
    """metrics.json of a run the launcher ends for its ranks (no step figures)."""
    launch_info = prepared.run.read_launch() or {"git_commit": None, "git_dirty": None}
    experiment = prepared.experiment
    world_size = prepared.nproc * prepared.nnodes
    from trainer.rank.loop import base_metrics  # imported here: the modeling code it imports takes a second per launch

    metrics = base_metrics(experiment, launch_info, world_size, experiment.hardware.device_type)
    return {**metrics, "status": status, "error": error, "tokens_per_s": None, "mfu": None, "final_loss": None}


def _failure_cause(prepared: PreparedRun, returncode: int) -> tuple[str, str]:
    """The root cause among what the ranks recorded.

    When one rank dies, the others fail in their next collective with a lost-connection error: those are
    echoes. A rank killed outright (signal, segfault, os._exit) records nothing, so when only echoes were
    recorded, the cause is a local rank that recorded nothing.
    """
    failures = prepared.run.failures()
    causes = [f for f in failures if not _PEER_LOST.search(f["error"])]
    if causes:
        return causes[0]["status"], f"rank {causes[0]['rank']}: {causes[0]['error']}"
    silent = sorted(set(range(prepared.nproc)) - {f["rank"] for f in failures}) if prepared.nnodes == 1 else []
    if silent:
        codes = rank_exit_codes(prepared.run.torchrun_log)
        # torchrun stops the other ranks with SIGTERM once one died: the one that died first is the cause.
        first = min(silent, key=lambda rank: codes.get(rank) == -signal.SIGTERM)
        how = _how_it_exited(codes, first)
        return "failed", f"rank {first} {how} without a Python error (torchrun exit code {returncode})"
    if failures:
        return failures[0]["status"], f"rank {failures[0]['rank']}: {failures[0]['error']}"
    return (
        "failed",
        f"a rank exited without a Python error (killed or crashed, maybe on another node; code {returncode})",
    )


def rank_exit_codes(torchrun_log: Path) -> dict[int, int]:
    """Each failed rank's exit code (minus a signal's number) from the failure table torchrun prints last."""
    text = torchrun_log.read_text(errors="replace") if torchrun_log.is_file() else ""
    found = re.findall(r"rank\s*:\s*(\d+) \(local_rank.*\n\s*exitcode\s*:\s*(-?\d+)", text)
    return {int(rank): int(code) for rank, code in found}


def _how_it_exited(codes: dict[int, int], rank: int) -> str:
    code = codes.get(rank)
    if code is None:
        return "exited"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
        # SIGKILL that nobody sent on purpose is most often the kernel's OOM killer.
        return f"was killed by {name}" + (" (out of host memory?)" if name == "SIGKILL" else "")
    return f"exited with code {code}"


def _worker_env(prepared: PreparedRun) -> dict[str, str]:
    env = process_env(prepared.experiment.hardware.device_type, prepared.nproc)
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"})
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def _check_float8(experiment: Experiment, nproc: int) -> None:
    """Refuse train.precision fp8 where it cannot run (trainer.parallel.float8.float8_refusal): on the CPU, on GPUs
    without float8 tensor cores (the run's least capable), without torchao, with layouts it does not support."""
    device_type, name, capability = experiment.hardware.device_type, "CPU", None
    if device_type == "cuda":
        capability = min(torch.cuda.get_device_capability(i) for i in range(nproc))
        name = torch.cuda.get_device_name(0)
    refusal = float8_refusal(device_type, capability, name, experiment.layout)
    if refusal is not None:
        raise ConfigError(refusal)


def _first_given(*values: int | None) -> int | None:
    return next((v for v in values if v is not None), None)


def _choose_attention(experiment: Experiment, config: PretrainedConfig) -> None:
    """Resolve train.attention (auto) for this device, layout and model, or refuse it."""
    train, device_type = experiment.train, experiment.hardware.device_type
    try:
        train.attention = choose_attention(
            train.attention, device_type, experiment.layout, head_dim(config), experiment.data.packing
        )
    except AttentionError as e:
        raise ConfigError(str(e)) from None


def _choose_experts(experiment: Experiment, config: PretrainedConfig) -> None:
    """Resolve train.experts (auto) for an MoE model on this device and precision, or refuse it; dense models
    keep what was written (nothing reads it)."""
    train = experiment.train
    if not is_moe(config):
        return
    try:
        train.experts = expert_kernel_for_run(train.experts, config, experiment.hardware.device_type, train.precision)
    except ExpertParallelError as e:
        raise ConfigError(str(e)) from None


# What a resume may change: how the same experiment is spread over processes (the checkpoint is resharded), and
# whether the finished run is exported for Hugging Face, sent to trackers or its warm-up profiled, which leaves the
# training alone.
RESHARDABLE = ("layout.", "hardware.devices", "hardware.nodes", "train.pp_schedule", "train.pp_stages_per_rank")
RESUME_MAY_CHANGE = (*RESHARDABLE, "train.save_hf", "train.trackers", "train.profile_steps")


def _check_run_dir(run: RunDir, resume: bool, experiment: Experiment) -> Path | None:
    """Never overwrite results; resume only the same experiment (on any layout), and only if steps remain.
    Returns the checkpoint a resume continues from: the newest verified one (each newer one skipped is said on
    stderr, with why).

    The launcher's own files (config.yaml, launch.json) may already be there: another node of the same run
    writes them too.
    """
    if not resume:
        results = [p for p in (run.steps, run.metrics, run.checkpoints) if p.exists()]
        if results:
            raise ConfigError(
                f"run directory {run.path} holds results ({results[0].name}); pass --resume to continue it "
                "or choose another --out"
            )
        return None
    found, skipped = newest_verified(run.checkpoints)
    for line in skipped:
        print(f"meshpilot: {line}", file=sys.stderr)
    if found is None:  # the ones skipped, and why, were said just above
        raise ConfigError(f"--resume: no complete checkpoint in {run.checkpoints}")
    old = run.read_config()
    if old is not None:
        changed = [d for d in _differences(old, experiment.to_dict()) if not d.startswith(RESUME_MAY_CHANGE)]
        if changed:
            raise ConfigError(
                "--resume continues the same experiment (only the layout and process count may change), "
                f"but it changed: {'; '.join(changed[:3])}"
            )
    steps = experiment.train.steps
    if checkpoint_step(found) >= steps:
        metrics = run.read_metrics()
        if metrics is not None and metrics.get("status") == "ok":
            raise ConfigError(f"--resume: {run.path} already finished its {steps} steps")
        raise ConfigError(
            f"--resume: the latest checkpoint of {run.path} ({found.name}) is its final step; nothing is left to train"
        )
    return found


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key} {a!r} -> {b!r}")
    return found


def describe(metrics: dict, run: RunDir) -> str:
    """One line for the terminal."""
    if metrics["status"] != "ok":
        return f"run {metrics['status']}: {metrics['error']} (logs: {run.log}, {run.torchrun_log})"
    if metrics.get("results_on"):
        return f"node {metrics['node_rank']} done; the results are written on {metrics['results_on']}"
    loss, tps = metrics.get("final_loss"), metrics.get("tokens_per_s")
    if loss is None or tps is None:  # nothing was left to train after the checkpoint it resumed from
        return f"run ok: no step was left to train, results in {run.path}"
    return f"run ok: loss {loss:.4f}, {tps:,.0f} tokens/s, results in {run.path}"
