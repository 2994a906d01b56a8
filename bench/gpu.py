"""Validation on a CUDA GPU, in one go: what only a GPU shows, each result written as soon as it is measured.

    python -m bench.gpu [--out FILE] [--only SECTION,...] [--quick]

Sections, in order (each one's failure is recorded and the next one still runs):

- environment: device, memory as torch reports it, driver and package versions;
- probe: `meshpilot probe` on the GPU (NCCL), stored in the calibration cache for the planner section;
- cuda_tests: the test suite's GPU tests (`pytest -m gpu`);
- mfu: a Llama-3.2-1B-shaped model (random weights), bf16, packed rows, sequence 2048 and 4096, one GPU:
  tokens/s and MFU from `meshpilot train`, eager and compiled, against transformers.Trainer on the same
  GPU, data, optimizer and batch (DataCollatorWithFlattening-style packed rows, SDPA);
- memory: the memory model's predicted peak against torch.cuda.max_memory_allocated (the prediction and the
  measurement `meshpilot train` writes to memory.json), with and without activation checkpointing, at two
  sequence lengths;
- packed_attention: packed rows isolated by flex_attention's BlockMask and by the dense mask, against padded rows,
  at sequence 2k, 8k and 32k (tokens/s, peak memory);
- generation: continuous against static batching (bench/eval_batching.py's workload) on the GPU;
- demo: `meshpilot demo` end to end on the GPU machine;
- planner: the throughput model's predicted step time against the measured one for every run above, from the
  stated figures and from the probe's.

Every `meshpilot train` here is the real command line in its own process, as a user runs it. The result file
(default bench/results/gpu.json) holds the machine description and every section finished so far.
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
from pathlib import Path

import torch
import yaml

from bench.machine import describe_machine
from trainer.model import count_parameters
from trainer.rundir import RunDir

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("environment", "probe", "cuda_tests", "mfu", "memory", "packed_attention", "generation", "demo", "planner")

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


class Bench:
    """Where results go, and the runs made so far (the planner section reads them)."""

    def __init__(self, out: Path, work: Path, quick: bool, seq_lens: tuple[int, ...] = ()):
        self.out, self.work, self.quick, self.seq_lens = out, work, quick, seq_lens
        self.result: dict = {"benchmark": "gpu", "machine": describe_machine(), "sections": {}}
        self.runs: dict[str, dict] = {}

    def record(self, section: str, value: dict) -> None:
        self.result["sections"][section] = value
        self._write()
        print(f"[gpu bench] {section}: written to {self.out}", flush=True)

    def _write(self) -> None:
        """The whole result so far: GPU time is scarce, so nothing measured waits for its section to end."""
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.result, indent=1) + "\n")

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
        done = subprocess.run(
            [sys.executable, "-m", "agent.cli", "train", str(path), "--out", str(directory / "run"), "--nproc", "1"],
            cwd=REPO, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        summary = {"experiment": experiment, "wall_s": round(time.perf_counter() - started, 1)}
        run = RunDir(directory / "run")
        if done.returncode != 0 or not run.metrics.exists():
            summary["error"] = (done.stderr or done.stdout)[-3000:]
            return self._keep(name, summary)
        metrics, memory, steps = run.read_metrics(), run.read_memory(), run.read_steps()
        timed = [s["step_s"] for s in steps[-metrics["timed_steps"] :]]
        summary.update(
            status=metrics["status"],
            tokens_per_s=metrics["tokens_per_s"],
            mfu=metrics["mfu"],
            median_step_s=statistics.median(timed) if timed else None,
            step_s=[round(s["step_s"], 4) for s in steps],
            losses=[round(s["loss"], 4) for s in steps],
            peak_mem_bytes=metrics["peak_mem_bytes"][0],
            memory_predicted=memory["predicted"][0],
            memory_measured=memory["measured"][0],
        )
        return self._keep(name, summary)

    def _keep(self, name: str, summary: dict) -> dict:
        self.runs[name] = summary
        self.result.setdefault("runs", {})[name] = _brief({name: summary})[name]
        self._write()
        return summary


# --- sections ----------------------------------------------------------------------------------------------------


def environment(bench: Bench) -> dict:
    free, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True)  # fmt: skip
    return {
        "device_name": torch.cuda.get_device_name(),
        "total_memory_bytes": total,
        "free_memory_bytes_at_start": free,
        "multiprocessors": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        "nvidia_smi": smi.stdout.strip(),
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    }


def probe(bench: Bench) -> dict:
    """`meshpilot probe` as a user runs it: what it measured, and where predictions now read it."""
    done = subprocess.run([sys.executable, "-m", "agent.cli", "probe", "--device-type", "cuda"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-3000:]}
    from trainer.probe import probe_path
    from trainer.throughput import this_machine

    found = json.loads(probe_path(this_machine("cuda", 1)).read_text())
    return {"table": done.stdout[-4000:], **{k: found[k] for k in ("seconds", "compute", "links", "figures")}}


def cuda_tests(bench: Bench) -> dict:
    """The suite's GPU tests, collected from the files that hold them (the others need packages a GPU machine may
    lack, such as the TUI's snapshot plugin)."""
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").glob("test_*.py") if "mark.gpu" in p.read_text())
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rs", "--tb=short",
         "-n", "4", "--timeout", "300", *files],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    return {"returncode": done.returncode, "summary": lines[-1] if lines else "", "output_tail": done.stdout[-12000:]}


def mfu(bench: Bench) -> dict:
    """meshpilot eager and compiled against transformers.Trainer: 1B model, bf16, packed, one GPU."""
    step_tokens = 65536 if not bench.quick else 16384
    steps = 10 if not bench.quick else 6
    results = {}
    # 8192 tokens per micro-batch: the 1B model's activations and logits then take about half the GPU.
    for seq_len, compiled in ((2048, False), (2048, True), (4096, False)):
        name = f"mfu_s{seq_len}_{'compiled' if compiled else 'eager'}"
        results[name] = bench.train(
            name, LLAMA_1B, seq_len, 8192 // seq_len, step_tokens // seq_len, steps, compile=compiled
        )
    for seq_len in (2048, 4096):
        results[f"hf_trainer_s{seq_len}"] = _hf_trainer(bench, seq_len, 8192 // seq_len, step_tokens // seq_len, steps)
    return {"model": LLAMA_1B, "runs": _brief(results)}


def _hf_trainer(bench: Bench, seq_len: int, micro_batch: int, rows_per_step: int, steps: int) -> dict:
    """transformers.Trainer on the same tokens, model init, optimizer and schedule (bench/trainer_vs_hf.py)."""
    from bench import trainer_vs_hf as hf

    setup = hf.Setup(LLAMA_1B, seq_len, rows_per_step, micro_batch, steps, lr=3e-4, warmup_steps=2,
                     timing_warmup_steps=3)  # fmt: skip
    directory = bench.work / f"hf_s{seq_len}"
    directory.mkdir(parents=True, exist_ok=True)
    experiment = hf.experiment_dict(setup)
    experiment["hardware"] = {"device_type": "cuda", "devices": 1}
    path = directory / "experiment.yaml"
    path.write_text(yaml.safe_dump(experiment))
    prepared = hf.prepare(path)
    examples = hf.packed_examples(prepared.corpus, seq_len, setup.seed)
    torch.cuda.reset_peak_memory_stats()
    run = hf.run_hf(prepared, examples, hf.RowFlattening(), directory / "out", None, device="cuda")
    tokens, seconds = run["timed_tokens"], run["timed_seconds"]
    # The Trainer does not report the documents' attention pairs that meshpilot's MFU counts: 6N per token only,
    # a lower bound on the work done, so a lower bound on its MFU.
    peak = _peak_flops()
    matmul = count_parameters(prepared.config)["matmul"]
    return {
        "tokens_per_s": run["tokens_per_s"],
        "mfu_6n_only": 6 * matmul * tokens / seconds / peak if peak else None,
        "median_step_s": statistics.median(run["step_seconds"][setup.timing_warmup_steps :]),
        "losses": [round(x, 4) for x in run["losses"]],
        "peak_mem_bytes": torch.cuda.max_memory_allocated(),
    }


def memory(bench: Bench) -> dict:
    """Predicted peak (memory model) against torch.cuda.max_memory_allocated, by category."""
    configs = {
        "mem_s2048": dict(seq_len=2048, micro_batch=4),
        "mem_s2048_ac": dict(seq_len=2048, micro_batch=4, activation_checkpointing=True),
        "mem_s4096": dict(seq_len=4096, micro_batch=2),
        "mem_s4096_ac": dict(seq_len=4096, micro_batch=2, activation_checkpointing=True),
    }
    rows = {}
    for name, keys in configs.items():
        keys = dict(keys)
        seq_len, micro_batch = keys.pop("seq_len"), keys.pop("micro_batch")
        run = bench.train(name, LLAMA_1B, seq_len, micro_batch, micro_batch, 4, timing_warmup_steps=1, **keys)
        if "error" in run:
            rows[name] = {"error": run["error"]}
            continue
        predicted, measured = run["memory_predicted"], run["memory_measured"]
        rows[name] = {
            "predicted": predicted,
            "measured": measured,
            "predicted_peak": predicted["peak"],
            "measured_peak": measured["peak"],
            "ratio": predicted["peak"] / measured["peak"],
        }
    return {"model": "LLAMA_1B", "configs": rows}


def packed_attention(bench: Bench) -> dict:
    """Packed rows kept apart by flex_attention's BlockMask or by the dense mask, against one padded document per
    row (tokens/s counts real tokens only, so padding's waste shows)."""
    variants = {"packed_flex": {"attention": "flex"}, "packed_dense": {"attention": "dense"},
                "padded": {"packing": False}}  # fmt: skip
    rows = {}
    lengths = bench.seq_lens or ((2048, 8192, 32768) if not bench.quick else (8192, 32768))
    if bench.quick:  # the comparison only a GPU can make: the two ways of isolating documents, at long rows
        variants.pop("padded")
    for seq_len in lengths:
        for variant, keys in variants.items():
            name = f"attn_s{seq_len}_{variant}"
            run = bench.train(name, LLAMA_SMALL, seq_len, 1, 2, 6, timing_warmup_steps=2, **keys)
            rows[name] = _brief({name: run})[name]
    return {"model": LLAMA_SMALL, "runs": rows}


def generation(bench: Bench) -> dict:
    out = bench.work / "eval_batching.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.eval_batching", "--device", "cuda", "--repeats", "3", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout)[-3000:]}
    found = json.loads(out.read_text())
    found.pop("machine", None)
    return found


def demo(bench: Bench) -> dict:
    directory = bench.work / "demo"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", "demo", "--dir", str(directory)],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    return {
        "returncode": done.returncode,
        "wall_s": round(time.perf_counter() - started, 1),
        "stdout_tail": done.stdout[-3000:],
        "stderr_tail": done.stderr[-3000:],
    }


def planner(bench: Bench) -> dict:
    """The throughput model's step time for each run above (the one prediction path, `predict_run`), from the
    stated figures and from this machine's probe, against the measured median step."""
    from trainer.config import experiment_from_dict
    from trainer.model import model_config
    from trainer.probe import read_probe
    from trainer.throughput import predict_run, this_machine

    hardware = this_machine("cuda", 1)
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
    return {"note": "uncalibrated: stated figures, and this machine's probe where the probe section ran",
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


def _brief(runs: dict[str, dict]) -> dict[str, dict]:
    keep = ("status", "error", "tokens_per_s", "mfu", "mfu_6n_only", "median_step_s", "peak_mem_bytes", "losses",
            "step_s", "wall_s")  # fmt: skip
    return {name: {k: v for k, v in run.items() if k in keep} for name, run in runs.items()}


def _peak_flops() -> float | None:
    from trainer.flops import peak_bf16_flops

    return peak_bf16_flops(torch.cuda.get_device_name())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "gpu.json")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections, in the order given")
    parser.add_argument("--quick", action="store_true", help="fewer steps, sequence lengths and variants")
    parser.add_argument("--seq-lens", default="", help="packed_attention's sequence lengths, comma-separated")
    parser.add_argument("--work", type=Path, default=None, help="where run directories go (default: a temp dir)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.gpu: no CUDA device", file=sys.stderr)
        return 2
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        print(f"bench.gpu: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="meshpilot-gpu-"))
    bench = Bench(args.out, work, args.quick, tuple(int(n) for n in args.seq_lens.split(",") if n))
    functions: dict[str, Callable[[Bench], dict]] = {name: globals()[name] for name in SECTIONS}
    for section in chosen:
        started = time.perf_counter()
        print(f"[gpu bench] {section} ...", flush=True)
        try:
            value = functions[section](bench)
        except Exception as e:  # one broken section must not cost the others' GPU time
            value = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        value["section_wall_s"] = round(time.perf_counter() - started, 1)
        bench.record(section, value)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    raise SystemExit(main())
