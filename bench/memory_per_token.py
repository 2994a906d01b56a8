"""Peak memory per token of one micro-batch's forward and backward at a 128k vocabulary, on CPU: before and after
the chunked loss and the shared dense mask (trainer.model.loss, trainer.data.packing.mask_bias), against the memory
model.

A small Llama (hidden 256, 4 layers, vocabulary 128,256, as Llama 3's) trains on packed rows of 1,024 and 2,048
tokens (three documents each: the dense mask of CPU) in fp32. Each measurement is its own process: the model is
built, then the process's resident set is read (the parameters and the batch), then a step of two accumulated
micro-batches of one row runs through `trainer.rank.step.token_loss_sum` of the code being measured (the first one's
gradients are held through the second, as in any accumulated step); the step's peak is the process's peak
resident set less that baseline (freed tensors of this size go back to the system, so the peak is what the step
held): the gradients, the activations and the temporaries. The model's counterpart is its prediction of those
three. Bytes per token are per token of one micro-batch.
"Before" runs the same script against the trainer package at `--before` (a git revision, extracted into a
temporary directory), so both sides are each revision's own trainer and memory model.

    python -m bench.memory_per_token            # writes bench/results/memory_per_token.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL = {
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
}
SEQ_LENS = (1024, 2048)
BEFORE = "0ca2e76"  # the last commit before the chunked loss and the shared mask
REPO = Path(__file__).resolve().parent.parent


def measure(seq_len: int) -> dict:
    """In this process: one forward and backward of one packed row, with the code on sys.path."""
    # torch and transformers only in the measuring process
    import torch
    from transformers import AutoConfig

    # imported here: only the child measures, with the trainer tree its PYTHONPATH names (--before's or this one)
    import trainer
    from trainer.config import TrainSpec
    from trainer.layout import Layout

    if (Path(trainer.__file__).parent / "costs").is_dir():  # trainer/ by concern
        from trainer.costs.memory_model import MemoryPlan, predict_memory
        from trainer.model.build import build_model
        from trainer.parallel.activation_checkpointing import enable_activation_checkpointing
        from trainer.rank.step import token_loss_sum
    else:  # --before's flat trainer/, which recomputed nothing without checkpointing (imported by name: this tree
        # has none of these modules)
        flat = {name: importlib.import_module(f"trainer.{name}") for name in ("memory_model", "model", "step")}
        MemoryPlan, predict_memory = flat["memory_model"].MemoryPlan, flat["memory_model"].predict_memory
        build_model, token_loss_sum = flat["model"].build_model, flat["step"].token_loss_sum
        enable_activation_checkpointing = None

    torch.manual_seed(0)
    config = AutoConfig.for_model(**MODEL)
    model = build_model(config, None, seed=0)
    model.train()
    if enable_activation_checkpointing is not None:
        enable_activation_checkpointing(model, False)  # none: the norms and SiLU recomputed (trainer.model.recompute)
    ids = torch.randint(0, config.vocab_size, (1, seq_len))
    thirds = torch.arange(seq_len).div(-(-seq_len // 3), rounding_mode="floor")[None]
    starts = torch.cat([torch.zeros(1, dtype=torch.long), (thirds[0, 1:] != thirds[0, :-1]).nonzero()[:, 0] + 1])
    positions = torch.arange(seq_len) - starts[thirds[0]]
    batch = {"input_ids": ids, "labels": ids, "position_ids": positions[None], "segment_ids": thirds.contiguous()}
    baseline = _resident_bytes()
    for _ in range(2):  # an accumulated step: the first micro-batch's gradients are held through the second
        token_loss_sum(model, batch).backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - baseline
    plan = MemoryPlan(1, seq_len, "fp32", False, TrainSpec(), packing=True)
    predicted = predict_memory(config, Layout(dp_replicate=1), plan)[0]
    step_predicted = predicted["gradients"] + predicted["activations_saved"] + predicted["temporaries"]
    return {
        "seq_len": seq_len,
        "tokens": seq_len,
        "measured_step_peak_bytes": peak,
        "predicted_step_peak_bytes": step_predicted,
        "predicted": {k: predicted[k] for k in ("gradients", "activations_saved", "temporaries")},
        "measured_bytes_per_token": peak / seq_len,
        "predicted_error": step_predicted / peak - 1,
    }


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_child(code: Path, seq_len: int) -> dict:
    """`measure` in a fresh process whose `trainer` is the one under `code`."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(seq_len)]
    done = subprocess.run(command, env=env, cwd=code, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default=BEFORE, help="git revision measured as 'before'")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    from bench.machine import write_result  # imported here: the child runs with no bench package on its path

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.before, "trainer"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive.stdout, check=True)
        for seq_len in SEQ_LENS:
            row = {"seq_len": seq_len, "before": run_child(before, seq_len), "after": run_child(REPO, seq_len)}
            row["ratio"] = row["before"]["measured_step_peak_bytes"] / row["after"]["measured_step_peak_bytes"]
            rows.append(row)
            print(table_row(row), flush=True)
    write_result("memory_per_token", {"model": MODEL, "precision": "fp32", "before": args.before, "rows": rows})


def table_row(row: dict) -> str:
    b, a = row["before"], row["after"]
    before, after = b["measured_bytes_per_token"] / 1024, a["measured_bytes_per_token"] / 1024
    return (
        f"| {row['seq_len']} | {before:,.0f} | {after:,.0f} "
        f"| {row['ratio']:.2f}x | {b['predicted_error']:+.1%} | {a['predicted_error']:+.1%} |"
    )


if __name__ == "__main__":
    main()
