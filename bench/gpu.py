"""Validation on a CUDA GPU, in one go: what only a GPU shows, each result written as soon as it is measured.

    python -m bench.gpu [--out FILE] [--only SECTION,...] [--budget SECONDS] [--quick]

GPU time is scarce, so every measurement is a task in a process of its own (this process never initialises
CUDA: a Trainer or a probe run in it would keep its cached memory reserved for the tasks after it) and the result
file is rewritten after each task. With `--budget SECONDS` the tasks run in the order of what is most worth a GPU
(BUDGET_ORDER: environment, probe, the 1B model eager, the same compiled, selective checkpointing, flex against
the dense mask at 32k, transformers.Trainer in bf16, the CUDA tests, the planner's predictions, then the rest);
a task is started only while the time left is at least its `minimum_s`, and its subprocess gets no more than the
time left. Without a budget, the chosen sections run in SECTIONS order.

Sections and their tasks:

- environment: device, memory as torch reports it, driver and package versions (a worker process);
- probe: `meshpilot probe` on the GPU (NCCL), stored in the calibration cache for the planner section;
- mfu: a Llama-3.2-1B-shaped model (random weights), bf16, packed rows, sequence 2048 (and 4096), one GPU:
  tokens/s and MFU from `meshpilot train`, eager and compiled, against transformers.Trainer in bf16 on the same
  GPU, data, optimizer and batch (DataCollatorWithFlattening-style packed rows, SDPA), in a process of its own;
- fp8: the small Llama 300 steps in bf16 and in fp8 (train.precision fp8, torchao float8) from one seed, their
  losses compared (the mfu section times the 1B model in fp8, tensorwise and rowwise);
- moe: a small Qwen3-MoE with its experts as one grouped GEMM against a loop of matmuls: tokens/s and memory;
- memory: the memory model's predicted peak against the measured one (reserved plus outside the allocator, as
  memory.json records it, with the source of the outside figure), with selective and full checkpointing; and the
  eager layer's rerun of its norms and SiLU against the plain layer (step time, peak, predicted saving);
- packed_attention: packed rows isolated by flex_attention's BlockMask and by the dense mask (and against padded
  rows), at sequence 32k (and 2k, 8k);
- cuda_tests: the test suite's GPU tests (`pytest -m gpu`);
- generation: continuous against static batching (bench/eval_batching.py's workload) on the GPU;
- demo: `meshpilot demo` end to end on the GPU machine;
- planner: the throughput model's predicted step time against the measured one for every run above, from the
  stated figures and from the probe's.

Every `meshpilot train` here is the real command line in its own process, as a user runs it, with its warm-up's
last step profiled (train.profile_steps: where the step's time goes, by kernel category, in the result).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.machine import describe_machine
from trainer.config import experiment_from_dict
from trainer.costs.probe import probe_path, read_probe
from trainer.costs.throughput import predict_run
from trainer.hardware import peak_bf16_flops, this_machine
from trainer.model.build import model_config
from trainer.model.parameters import count_parameters
from trainer.results.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("environment", "probe", "cuda_tests", "mfu", "fp8", "moe", "memory", "packed_attention", "generation",
            "demo", "planner")  # fmt: skip

# Llama-3.2-1B's published shape (meta-llama/Llama-3.2-1B config.json), random weights; its llama3 rotary scaling
# is left out (it changes no cost).
LLAMA_1B = {
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": True,
    "rms_norm_eps": 1e-5,
}
# A smaller model of the same family for the long-sequence attention runs (32k tokens per row).
LLAMA_SMALL = {**LLAMA_1B, "vocab_size": 32768, "hidden_size": 1024, "intermediate_size": 4096,
               "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4}  # fmt: skip

Runner = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class Task:
    """One measurement: `run` returns what the result file records under sections[section][name]."""

    name: str
    section: str
    run: Callable[[Bench], dict]
    minimum_s: float  # not started with less time left than this: it could not finish


class Bench:
    """Where results go, the runs made so far (the planner reads them), and the time left."""

    def __init__(self, out: Path, work: Path, quick: bool = False, seq_lens: tuple[int, ...] = (),
                 budget_s: float | None = None, runner: Runner = subprocess.run):  # fmt: skip
        self.out, self.work, self.quick, self.seq_lens, self.runner = out, work, quick, seq_lens, runner
        work.mkdir(parents=True, exist_ok=True)
        self.deadline = None if budget_s is None else time.monotonic() + budget_s
        self.result: dict = {"benchmark": "gpu", "machine": None, "sections": {}}
        if budget_s is not None:
            self.result["budget"] = {"budget_s": budget_s, "ran": [], "skipped": {}}
        self.runs: dict[str, dict] = {}
        self.device_name: str | None = None  # the environment task's reading: asking here would start CUDA

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def record(self, task: Task, value: dict) -> None:
        self.result["sections"].setdefault(task.section, {})[task.name] = value
        if "budget" in self.result:
            self.result["budget"]["ran"].append(task.name)
        self._write()
        print(f"[gpu bench] {task.section}/{task.name}: written to {self.out}", flush=True)

    def skip(self, task: Task, reason: str) -> None:
        self.result["budget"]["skipped"][task.name] = reason
        self._write()
        print(f"[gpu bench] {task.name}: skipped, {reason}", flush=True)

    def _write(self) -> None:
        """The whole result so far: GPU time is scarce, so nothing measured waits for the others."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.result, indent=1) + "\n")

    def process(self, args: list[str], cap_s: float, env: dict | None = None) -> subprocess.CompletedProcess:
        """A measured process, given at most `cap_s` and never more than the budget's time left."""
        left = self.time_left()
        if left is not None and left <= 0:  # a task of several processes whose budget ran out between them
            raise subprocess.TimeoutExpired(args, 0)
        timeout = cap_s if left is None else min(cap_s, left)
        return self.runner(args, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "TOKENIZERS_PARALLELISM": "false", **(env or {})})  # fmt: skip

    def train(self, name: str, model: dict, seq_len: int, micro_batch: int, rows_per_step: int, steps: int,
              **train_keys) -> dict:  # fmt: skip
        """One `meshpilot train` on one GPU; its metrics, memory and step times (or its error)."""
        packing = train_keys.pop("packing", True)
        experiment = {
            "model": {"config": model},
            "tokenizer": "builtin",
            "data": {"train": "builtin:stdlib-docs", "seq_len": seq_len, "packing": packing},
            "train": {
                "steps": steps,
                "global_batch_tokens": rows_per_step * seq_len,
                "micro_batch": micro_batch,
                "lr": 3e-4,
                "warmup_steps": 2,
                "timing_warmup_steps": 3,
                "profile_steps": 1,  # the warm-up's last step: where a step's time goes, never timed
                "save_final_checkpoint": False,
                "gns_every": 0,
                **train_keys,
            },
            "hardware": {"device_type": "cuda", "devices": 1},
        }
        directory = self.work / name
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "experiment.yaml"
        path.write_text(yaml.safe_dump(experiment))
        started = time.perf_counter()
        summary: dict = {"experiment": experiment}
        try:
            done = self.process([sys.executable, "-m", "agent.cli", "train", str(path), "--out",
                                 str(directory / "run"), "--nproc", "1"], cap_s=900)  # fmt: skip
        except subprocess.TimeoutExpired:
            summary.update(error="timed out", wall_s=round(time.perf_counter() - started, 1))
            return self._keep(name, summary)
        summary["wall_s"] = round(time.perf_counter() - started, 1)
        summary.update(read_run(directory / "run", done))
        return self._keep(name, summary)

    def _keep(self, name: str, summary: dict) -> dict:
        self.runs[name] = summary
        return summary


def read_run(directory: Path, done: subprocess.CompletedProcess) -> dict:
    """What a finished `meshpilot train` wrote: metrics, memory and step times, or its error."""

    run = RunDir(directory)
    if done.returncode != 0 or not run.metrics.exists():
        return {"error": (done.stderr or done.stdout)[-3000:]}
    metrics, memory, steps, profile = run.read_metrics(), run.read_memory(), run.read_steps(), run.read_profile()
    timed = [s["step_s"] for s in steps[-metrics["timed_steps"] :]] if metrics.get("timed_steps") else []
    return {
        "status": metrics["status"],
        "tokens_per_s": metrics["tokens_per_s"],
        "mfu": metrics["mfu"],
        "attention": metrics.get("attention"),
        "median_step_s": statistics.median(timed) if timed else None,
        "step_s": [round(s["step_s"], 4) for s in steps],
        "losses": [round(s["loss"], 4) for s in steps],
        "peak_mem_bytes": metrics["peak_mem_bytes"][0],
        "memory_predicted": memory["predicted"][0],
        "memory_measured": memory["measured"][0],
        "memory_source": memory["measured"][0].get("outside_source"),
        "profile": profile and {**profile, "top": profile["top"][:10]},
    }


# --- what each task measures ---------------------------------------------------------------------------------------


def environment(bench: Bench) -> dict:
    """The device and versions, read in a worker process (this one never initialises CUDA)."""
    out = bench.work / "environment.json"
    done = bench.process([sys.executable, "-m", "bench.gpu", "--worker", "environment", "--out", str(out)], 120)
    if done.returncode != 0 or not out.exists():
        return {"error": (done.stderr or done.stdout)[-3000:]}
    found = json.loads(out.read_text())
    bench.result["machine"] = found.pop("machine")
    bench.device_name = found["device_name"]
    return found


def environment_worker(out: Path) -> None:
    # torch only in the worker process, which this benchmark starts
    import torch

    free, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True)  # fmt: skip
    try:
        import pynvml  # noqa: F401

        nvml = True
    except ImportError:
        nvml = False
    out.write_text(json.dumps({
        "machine": describe_machine(),
        "device_name": torch.cuda.get_device_name(),
        "total_memory_bytes": total,
        "free_memory_bytes_at_start": free,
        "multiprocessors": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        "nvidia_smi": smi.stdout.strip(),
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "nvidia_ml_py": nvml,
    }))  # fmt: skip


def probe(bench: Bench) -> dict:
    """`meshpilot probe` as a user runs it: what it measured, and where predictions now read it."""
    done = bench.process([sys.executable, "-m", "agent.cli", "probe", "--device-type", "cuda"], 300)
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-3000:]}
    path = probe_path(this_machine("cuda", 1, name=bench.device_name))
    found = json.loads(path.read_text()) if path.exists() else {}
    return {"table": done.stdout[-4000:], **{k: found.get(k) for k in ("seconds", "compute", "links", "figures")}}


def cuda_tests(bench: Bench) -> dict:
    """The suite's GPU tests, collected from the files that hold them (the others need packages a GPU machine may
    lack, such as the TUI's snapshot plugin); every test runs (one failure must not hide the others' outcomes),
    each named with its outcome as it ends (-v) and each failure's text written as it comes (tests/conftest.py's
    MESHPILOT_TEST_FAILURES), so that a budget's timeout before pytest's summary still leaves both; none given more
    than 240 s."""
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py") if "mark.gpu" in p.read_text())
    failures = bench.work / "cuda_test_failures.txt"
    failures.unlink(missing_ok=True)
    try:
        done = bench.process([sys.executable, "-m", "pytest", "-m", "gpu", "-v", "-p", "no:cacheprovider", "-rfEs",
                              "--tb=short", "-n", "4", "--timeout", "240", *files], cap_s=600,
                             env={"MESHPILOT_TEST_FAILURES": str(failures)})  # fmt: skip
    except subprocess.TimeoutExpired as timed_out:  # its output comes as bytes, whatever text= said
        output = timed_out.stdout or b""
        output = output.decode(errors="replace") if isinstance(output, bytes) else output
        return {"error": "timed out", "output_tail": output[-12000:], "failures": _read_text(failures)[-12000:]}
    lines = done.stdout.strip().splitlines()
    return {"returncode": done.returncode, "summary": lines[-1] if lines else "", "output_tail": done.stdout[-12000:],
            "failures": _read_text(failures)[-12000:]}  # fmt: skip


def _read_text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def mfu_run(seq_len: int, compiled: bool, tag: str = "", **keys) -> Callable[[Bench], dict]:
    """The 1B model at `seq_len`, 8192 tokens per micro-batch (activations and logits take about half an 80 GB
    GPU), eager or compiled; `keys` are further train keys (train.precision=fp8, say), `tag` names them."""

    def run(bench: Bench) -> dict:
        step_tokens, steps = (16384, 6) if bench.quick else (65536, 10)
        name = f"mfu_s{seq_len}_{'compiled' if compiled else 'eager'}{tag}"
        found = bench.train(name, LLAMA_1B, seq_len, 8192 // seq_len, step_tokens // seq_len, steps,
                            compile=compiled, **keys)  # fmt: skip
        return brief(found)

    return run


def fp8_losses(recipe: str) -> Callable[[Bench], dict]:
    """The small Llama for 300 steps (eager: the numerics, not the speed) in bf16 and in fp8 with `recipe`, from
    the same seed and data: fp8's losses against bf16's, per step and over the last 100 steps."""

    def run(bench: Bench) -> dict:
        steps = 60 if bench.quick else 300
        runs = {}
        for precision, extra in (("bf16", {}), ("fp8", {"float8_recipe": recipe})):
            name = "loss_small_bf16" if precision == "bf16" else f"loss_small_fp8_{recipe}"
            runs[precision] = bench.runs.get(name) or bench.train(
                name, LLAMA_SMALL, 2048, 4, 4, steps, timing_warmup_steps=3, precision=precision, **extra
            )
        if any("error" in r for r in runs.values()):
            return {p: brief(r) for p, r in runs.items()}
        bf16, fp8 = runs["bf16"]["losses"], runs["fp8"]["losses"]
        tail = slice(-min(100, len(bf16)), None)
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        return {
            "steps": steps,
            "max_abs_difference": max(abs(a - b) for a, b in zip(bf16, fp8, strict=True)),
            "last100_mean_bf16": mean(bf16[tail]),
            "last100_mean_fp8": mean(fp8[tail]),
            "last100_relative_difference": mean(fp8[tail]) / mean(bf16[tail]) - 1,
            "bf16": brief(runs["bf16"]),
            "fp8": brief(runs["fp8"]),
        }

    return run


# A small Qwen3-MoE (random weights) for the experts' kernels: 32 experts, 4 per token, on one GPU.
QWEN3_MOE_SMALL = {
    "model_type": "qwen3_moe", "vocab_size": 32768, "hidden_size": 1024, "intermediate_size": 2816,
    "moe_intermediate_size": 512, "num_experts": 32, "num_experts_per_tok": 4, "num_hidden_layers": 8,
    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64, "max_position_embeddings": 8192,
    "decoder_sparse_step": 1, "norm_topk_prob": True, "tie_word_embeddings": False, "rms_norm_eps": 1e-6,
}  # fmt: skip


def moe_run(kernel: str) -> Callable[[Bench], dict]:
    """The small MoE model in bf16 with its experts as one grouped GEMM (torch._grouped_mm) or a loop of one matmul
    per expert: tokens/s, predicted and measured peak memory."""

    def run(bench: Bench) -> dict:
        steps = 6 if bench.quick else 10
        found = bench.train(f"moe_{kernel}", QWEN3_MOE_SMALL, 2048, 4, 8, steps, experts=kernel)
        if "error" in found:
            return brief(found)
        return {**brief(found), "predicted_peak": found["memory_predicted"]["peak"],
                "measured_peak": found["memory_measured"]["peak"]}  # fmt: skip

    return run


def hf_trainer(seq_len: int, compiled: bool = False) -> Callable[[Bench], dict]:
    """transformers.Trainer in bf16 on the same tokens, model init, optimizer and schedule as mfu_run, in a worker
    process of its own; `compiled` with the Trainer's own torch_compile."""

    def run(bench: Bench) -> dict:
        step_tokens, steps = (16384, 6) if bench.quick else (65536, 10)
        directory = bench.work / f"hf_s{seq_len}{'_compiled' if compiled else ''}"
        directory.mkdir(parents=True, exist_ok=True)
        experiment = hf_experiment(seq_len, 8192 // seq_len, step_tokens // seq_len, steps)
        path = directory / "experiment.yaml"
        path.write_text(yaml.safe_dump(experiment))
        out = directory / "result.json"
        worker = [sys.executable, "-m", "bench.gpu", "--worker", "hf_trainer", "--experiment", str(path)]
        worker += ["--compiled"] if compiled else []
        try:
            done = bench.process([*worker, "--out", str(out)], cap_s=900)
        except subprocess.TimeoutExpired:
            return {"error": "timed out"}
        if done.returncode != 0 or not out.exists():
            return {"error": (done.stderr or done.stdout)[-3000:]}
        return json.loads(out.read_text())

    return run


def hf_experiment(seq_len: int, micro_batch: int, rows_per_step: int, steps: int) -> dict:
    from bench import trainer_vs_hf as hf  # imported here: it loads datasets and pandas, which only this task needs

    setup = hf.Setup(LLAMA_1B, seq_len, rows_per_step, micro_batch, steps, lr=3e-4, warmup_steps=2,
                     timing_warmup_steps=3, precision="bf16")  # fmt: skip
    return {**hf.experiment_dict(setup), "hardware": {"device_type": "cuda", "devices": 1}}


def hf_trainer_worker(experiment: Path, out: Path, compiled: bool = False) -> None:
    # torch only in the worker process, which this benchmark starts
    import torch

    from bench import trainer_vs_hf as hf  # imported here: it loads datasets and pandas, which only this task needs

    prepared = hf.prepare(experiment)
    spec = prepared.experiment.train
    examples = hf.packed_examples(prepared.corpus, prepared.experiment.data.seq_len, spec.seed)
    run = hf.run_hf(prepared, examples, hf.RowFlattening(), out.parent / "trainer", None, device="cuda",
                    compiled=compiled)  # fmt: skip
    # The Trainer does not report the documents' attention pairs that meshpilot's MFU counts: 6N per token only,
    # a lower bound on the work done, so a lower bound on its MFU.
    peak = peak_bf16_flops(torch.cuda.get_device_name())
    matmul = count_parameters(prepared.config)["matmul"]
    out.write_text(json.dumps({
        "precision": run["precision"],
        "compiled": compiled,
        "tokens_per_s": run["tokens_per_s"],
        "mfu_6n_only": 6 * matmul * run["timed_tokens"] / run["timed_seconds"] / peak if peak else None,
        "median_step_s": statistics.median(run["step_seconds"][spec.timing_warmup_steps :]),
        "losses": [round(x, 4) for x in run["losses"]],
        "peak_mem_bytes": torch.cuda.max_memory_reserved(),
    }))  # fmt: skip


def memory_run(seq_len: int, micro_batch: int, checkpointing: bool | str, compiled: bool = False):
    """Predicted against measured peak for the 1B model, with the given activation checkpointing."""

    def run(bench: Bench) -> dict:
        mode = {False: "none", True: "full"}.get(checkpointing, checkpointing)
        name = f"mem_s{seq_len}_{mode}{'_compiled' if compiled else ''}"
        found = bench.train(name, LLAMA_1B, seq_len, micro_batch, micro_batch, 4, timing_warmup_steps=1,
                            profile_steps=0, activation_checkpointing=checkpointing, compile=compiled)  # fmt: skip
        if "error" in found:
            return {"error": found["error"]}
        predicted, measured = found["memory_predicted"], found["memory_measured"]
        return {"predicted": predicted, "measured": measured, "measured_source": found.get("memory_source"),
                "predicted_peak": predicted["peak"], "measured_peak": measured["peak"],
                "ratio": predicted["peak"] / measured["peak"], **brief(found)}  # fmt: skip

    return run


def rerun_ab(bench: Bench) -> dict:
    """The eager layer's rerun of its norms and SiLU (trainer.model.recompute) against the plain layer, on the 1B
    model at 2048 tokens: step time and peak with and without, in a worker process (the trainer has no switch for
    it: the rerun is how every eager layer without checkpointing runs)."""
    out = bench.work / "rerun.json"
    done = bench.process([sys.executable, "-m", "bench.gpu", "--worker", "rerun", "--out", str(out)], 300)
    if done.returncode != 0 or not out.exists():
        return {"error": (done.stderr or done.stdout)[-3000:]}
    return json.loads(out.read_text())


def rerun_worker(out: Path, device: str = "cuda", shape: dict | None = None, seq_len: int = 2048,
                 micro_batch: int = 4, steps: int = 6) -> None:  # fmt: skip
    """One forward and backward a step under bf16 autocast (a one-GPU bf16 run's), with the trainer's chunked loss;
    the median of `steps` steps after two and the peak allocated, per kind of layer; and the memory model's
    predicted difference of the layers' saved bytes (trainer.costs.memory_model.layer_bytes_per_token)."""
    # torch and the model code only in the worker process, which this benchmark starts
    import torch
    from transformers import AutoConfig

    from trainer.config import TrainSpec  # (the same reason: the model code imports torch)
    from trainer.costs.memory_model import MemoryPlan, layer_bytes_per_token
    from trainer.layout import Layout
    from trainer.model.build import build_model
    from trainer.model.loss import head_computes_loss
    from trainer.parallel.activation_checkpointing import enable_activation_checkpointing

    config = AutoConfig.for_model(**(shape or LLAMA_1B))
    ids = torch.randint(0, config.vocab_size, (micro_batch, seq_len), device=device)
    timer = torch.cuda if device == "cuda" else None
    found: dict = {"device": device, "seq_len": seq_len, "micro_batch": micro_batch}
    for kind in ("plain", "rerun"):
        model = build_model(config, None, seed=0, device=device)
        if kind == "rerun":
            enable_activation_checkpointing(model, "none", compiled=False)
        seconds = []
        for step in range(steps + 2):
            if timer and step == 2:
                timer.reset_peak_memory_stats()
            started = time.perf_counter()
            with torch.autocast(device, dtype=torch.bfloat16), head_computes_loss(model, ids):
                loss = model(input_ids=ids, use_cache=False).logits
            loss.backward()
            model.zero_grad(set_to_none=True)
            if timer:
                timer.synchronize()
            seconds.append(time.perf_counter() - started)
        found[kind] = {"median_step_s": statistics.median(seconds[2:]),
                       "peak_allocated_bytes": timer.max_memory_allocated() if timer else None}  # fmt: skip
        del model, loss
        if timer:
            timer.empty_cache()
    # the model's plain layer is the one it prices for a compiled layer
    plan = {kind: MemoryPlan(micro_batch, seq_len, "bf16", "none", TrainSpec(compile=kind == "plain"))
            for kind in ("plain", "rerun")}  # fmt: skip
    saved = {kind: layer_bytes_per_token(config, Layout(), p) for kind, p in plan.items()}
    tokens_layers = micro_batch * seq_len * config.num_hidden_layers
    found["predicted_saved_bytes_less"] = (saved["plain"] - saved["rerun"]) * tokens_layers
    found["step_ratio"] = found["rerun"]["median_step_s"] / found["plain"]["median_step_s"]
    if timer:
        found["peak_bytes_less"] = found["plain"]["peak_allocated_bytes"] - found["rerun"]["peak_allocated_bytes"]
    out.write_text(json.dumps(found))


def attention_run(seq_len: int, variant: str) -> Callable[[Bench], dict]:
    """Packed rows kept apart by flex_attention's BlockMask or by the dense mask, or one padded document per row
    (tokens/s counts real tokens only, so padding's waste shows)."""
    keys = {"packed_flex": {"attention": "flex"}, "packed_dense": {"attention": "dense"},
            "padded": {"packing": False}}[variant]  # fmt: skip

    def run(bench: Bench) -> dict:
        name = f"attn_s{seq_len}_{variant}"
        return brief(bench.train(name, LLAMA_SMALL, seq_len, 1, 2, 6, timing_warmup_steps=2, **keys))

    return run


def generation(bench: Bench) -> dict:
    out = bench.work / "eval_batching.json"
    done = bench.process([sys.executable, "-m", "bench.eval_batching", "--device", "cuda", "--repeats", "3",
                          "--out", str(out)], cap_s=600)  # fmt: skip
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-3000:]}
    found = json.loads(out.read_text())
    found.pop("machine", None)
    return found


def demo(bench: Bench) -> dict:
    started = time.perf_counter()
    done = bench.process([sys.executable, "-m", "agent.cli", "demo", "--dir", str(bench.work / "demo")], 900)
    return {"returncode": done.returncode, "wall_s": round(time.perf_counter() - started, 1),
            "stdout_tail": done.stdout[-3000:], "stderr_tail": done.stderr[-3000:]}  # fmt: skip


def planner(bench: Bench) -> dict:
    """The throughput model's step time for each run above (the one prediction path, `predict_run`), from the
    stated figures and from this machine's probe, against the measured median step. CPU work only: the device's
    name is the environment task's reading."""
    if bench.device_name is None:
        return {"error": "the environment task did not run: no device name to predict for"}
    hardware = this_machine("cuda", 1, name=bench.device_name)
    probed = read_probe(hardware) is not None
    rows = {}
    for name, run in bench.runs.items():
        if "error" in run or not run.get("median_step_s"):
            continue
        experiment = experiment_from_dict(run["experiment"])
        config = model_config(experiment.model, REPO)
        spec, seq_len = experiment.train, experiment.data.seq_len
        grad_accum = spec.global_batch_tokens // seq_len // spec.micro_batch
        with _stated_figures():
            stated = predict_run(experiment, config, hardware, grad_accum)
        row = {"measured_step_s": run["median_step_s"], "stated_step_s": stated.step_s,
               "stated_ratio": stated.step_s / run["median_step_s"]}  # fmt: skip
        if probed:
            estimate = predict_run(experiment, config, hardware, grad_accum)
            row.update(probe_step_s=estimate.step_s, probe_ratio=estimate.step_s / run["median_step_s"],
                       matmul_s=estimate.matmul_s, memory_s=estimate.memory_s, launch_s=estimate.launch_s,
                       comm_s=estimate.comm_s)  # fmt: skip
        rows[name] = row
    return {"note": "uncalibrated: stated figures, and this machine's probe where the probe task ran",
            "probed": probed, "runs": rows}  # fmt: skip


@contextlib.contextmanager
def _stated_figures():
    """Predictions as on a machine never probed: an empty calibration cache for the duration."""
    saved = os.environ.get("MESHPILOT_CACHE")
    with tempfile.TemporaryDirectory() as empty:
        os.environ["MESHPILOT_CACHE"] = empty
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("MESHPILOT_CACHE")
            else:
                os.environ["MESHPILOT_CACHE"] = saved


def brief(run: dict) -> dict:
    keep = ("status", "error", "tokens_per_s", "mfu", "attention", "median_step_s", "peak_mem_bytes",
            "memory_source", "losses", "step_s", "wall_s", "profile")  # fmt: skip
    return {k: v for k, v in run.items() if k in keep}


# --- the plan ------------------------------------------------------------------------------------------------------


def tasks(quick: bool, seq_lens: tuple[int, ...] = ()) -> list[Task]:
    """Every task, in SECTIONS order. minimum_s: what a task needs on an H100 (start-up, model build, compile,
    steps) with some room, so that a budget never starts what it cannot finish."""
    lengths = seq_lens or ((8192, 32768) if quick else (2048, 8192, 32768))
    variants = ("packed_flex", "packed_dense") if quick else ("packed_flex", "packed_dense", "padded")
    found = [
        Task("environment", "environment", environment, 20),
        Task("probe", "probe", probe, 60),
        Task("cuda_tests", "cuda_tests", cuda_tests, 120),
        Task("mfu_s2048_eager", "mfu", mfu_run(2048, False), 60),
        Task("mfu_s2048_compiled", "mfu", mfu_run(2048, True), 120),
        Task("mfu_s2048_compiled_chunked_loss", "mfu", mfu_run(2048, True, "_chunked_loss", loss="chunked"), 120),
        Task("mfu_s2048_compiled_fp8", "mfu", mfu_run(2048, True, "_fp8", precision="fp8"), 150),
        Task(
            "mfu_s2048_compiled_fp8_rowwise",
            "mfu",
            mfu_run(2048, True, "_fp8_rowwise", precision="fp8", float8_recipe="rowwise"),
            150,
        ),
        Task("hf_trainer_s2048", "mfu", hf_trainer(2048), 60),
        Task("hf_trainer_s2048_compiled", "mfu", hf_trainer(2048, compiled=True), 120),
        Task("fp8_losses_tensorwise", "fp8", fp8_losses("tensorwise"), 200),
        Task("moe_grouped_mm", "moe", moe_run("grouped_mm"), 90),
        Task("moe_loop", "moe", moe_run("loop"), 90),
        Task("mfu_s4096_eager", "mfu", mfu_run(4096, False), 60),
        Task("hf_trainer_s4096", "mfu", hf_trainer(4096), 60),
        Task("mem_s2048_none", "memory", memory_run(2048, 4, False), 45),
        Task("mem_s2048_selective_compiled", "memory", memory_run(2048, 4, "selective", compiled=True), 90),
        Task("mem_s2048_selective", "memory", memory_run(2048, 4, "selective"), 45),
        Task("mem_s2048_full", "memory", memory_run(2048, 4, True), 45),
        Task("mem_s4096_none", "memory", memory_run(4096, 2, False), 45),
        Task("mem_s4096_full", "memory", memory_run(4096, 2, True), 45),
        Task("mem_s2048_rerun_ab", "memory", rerun_ab, 60),
    ]
    found += [Task(f"attn_s{n}_{v}", "packed_attention", attention_run(n, v), 45) for n in lengths for v in variants]
    found += [Task("generation", "generation", generation, 120), Task("demo", "demo", demo, 180),
              Task("planner", "planner", planner, 0)]  # fmt: skip
    return found


# The order a budget spends GPU time in: what only a GPU shows and what the open issues need first (issue 38: the
# compiled 1B model's MFU (train.loss auto: the whole loss inside the graph), the CUDA tests, the compiled Trainer,
# the experts' kernels, fp8's gain and losses, the chunked loss compiled).
BUDGET_ORDER = (
    "environment",
    "mfu_s2048_compiled",
    "cuda_tests",
    "hf_trainer_s2048_compiled",
    "moe_grouped_mm",
    "mfu_s2048_compiled_fp8",
    "moe_loop",
    "fp8_losses_tensorwise",
    "mfu_s2048_compiled_chunked_loss",
    "mfu_s2048_compiled_fp8_rowwise",
    "mem_s2048_selective_compiled",
    "mem_s2048_rerun_ab",
    "hf_trainer_s2048",
    "mfu_s2048_eager",
    "probe",
    "attn_s32768_packed_flex",
    "attn_s32768_packed_dense",
    "planner",
)


def ordered(found: list[Task], sections: list[str], budgeted: bool) -> list[Task]:
    """The chosen sections' tasks: in BUDGET_ORDER first (then the rest in SECTIONS order) under a budget, else in
    the order the sections were given."""
    chosen = [t for s in sections for t in found if t.section == s]
    if not budgeted:
        return chosen
    first = [t for name in BUDGET_ORDER for t in chosen if t.name == name]
    return first + [t for t in chosen if t not in first]


def run_plan(bench: Bench, plan: list[Task]) -> None:
    """Each task in turn, recorded as it ends; one that fails is recorded and the next still runs. Under a budget,
    a task is skipped when the time left is under its minimum (the planner, CPU work with no minimum, always runs)."""
    for task in plan:
        left = bench.time_left()
        if left is not None and task.minimum_s > 0 and left < task.minimum_s:
            bench.skip(task, f"{left:.0f} s left, it needs {task.minimum_s:.0f} s")
            continue
        started = time.perf_counter()
        print(f"[gpu bench] {task.name} ...", flush=True)
        try:
            value = task.run(bench)
        except Exception as e:  # one broken task must not cost the others' GPU time
            value = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        value["task_wall_s"] = round(time.perf_counter() - started, 1)
        bench.record(task, value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "gpu.json")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections, in the order given")
    parser.add_argument("--budget", type=float, help="seconds of GPU time: the tasks most worth it first")
    parser.add_argument("--tasks", default="", help="comma-separated task names instead of whole sections")
    parser.add_argument("--quick", action="store_true", help="fewer steps, sequence lengths and variants")
    parser.add_argument("--seq-lens", default="", help="packed_attention's sequence lengths, comma-separated")
    parser.add_argument("--work", type=Path, default=None, help="where run directories go (default: a temp dir)")
    # A measurement in a process of its own, as the tasks start them (not for users).
    parser.add_argument("--worker", choices=("environment", "hf_trainer", "rerun"), help=argparse.SUPPRESS)
    parser.add_argument("--experiment", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker == "environment":
        environment_worker(args.out)
        return 0
    if args.worker == "hf_trainer":
        hf_trainer_worker(args.experiment, args.out, args.compiled)
        return 0
    if args.worker == "rerun":
        rerun_worker(args.out)
        return 0
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        print(f"bench.gpu: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    if subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode != 0:  # asks no CUDA of this process
        print("bench.gpu: no CUDA device (nvidia-smi -L failed)", file=sys.stderr)
        return 2
    seq_lens = tuple(int(n) for n in args.seq_lens.split(",") if n)
    found = tasks(args.quick, seq_lens)
    names = [n.strip() for n in args.tasks.split(",") if n.strip()]
    if unknown := [n for n in names if n not in {t.name for t in found}]:
        print(f"bench.gpu: unknown task(s) {', '.join(unknown)}", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="meshpilot-gpu-"))
    bench = Bench(args.out, work, args.quick, seq_lens, args.budget)
    if names:  # in the order given
        run_plan(bench, [next(t for t in found if t.name == n) for n in names])
    else:
        run_plan(bench, ordered(found, chosen, args.budget is not None))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
