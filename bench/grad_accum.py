"""Gradient accumulation: meshpilot's token-normalised loss against the usual mean of micro-batch means.

A batch of rows is split into micro-batches of several sizes. Each way of accumulating their gradients is
compared with the gradient of one forward and backward pass over the whole batch (the mean cross-entropy over
all of its target tokens), for the same model weights:

- meshpilot: trainer.rank.step.forward_backward, every micro-batch backpropagating sum / the step's target count;
- naive: each micro-batch's mean loss divided by the number of micro-batches, as most training loops do.

Rows come from the built-in corpus (real documents, from one line to several pages) with packing on (rows
full of tokens, a few lost at document boundaries) and off (one document per row, padded: target counts differ
a lot between rows, which is where the naive mean goes wrong). Reported per micro-batch size: the largest
absolute gradient difference, the relative L2 difference ||g - g_full|| / ||g_full|| over all parameters, and
the difference of the step's loss. fp32 throughout, so even exact accumulation differs from one pass by
rounding (about 1e-7 relative); a micro-batch as large as the batch is the one pass itself.

    python -m bench.grad_accum [--quick] [--out FILE]

Run from the repository root. Writes bench/results/grad_accum.json (or --out).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
import yaml

from bench.trainer_vs_hf import CORPUS, RESULTS, prepare, write_json
from trainer.config import ConfigError
from trainer.data.packing import IGNORE_INDEX, model_inputs
from trainer.data.rows import RowSource
from trainer.model.build import build_model
from trainer.rank.step import forward_backward


@dataclass(frozen=True)
class Setup:
    model: dict
    seq_len: int
    batch_rows: int
    micro_batches: tuple[int, ...]  # rows per micro-batch; each must divide batch_rows
    seed: int = 0


MODEL = {
    "model_type": "llama",
    "vocab_size": 4096,  # the builtin tokenizer bench.trainer_vs_hf trains on (one cache entry for both)
    "hidden_size": 64,
    "intermediate_size": 172,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
}
FULL = Setup(MODEL, seq_len=256, batch_rows=16, micro_batches=(1, 2, 4, 8, 16))
QUICK = Setup({**MODEL, "vocab_size": 512, "hidden_size": 32, "intermediate_size": 64}, 64, 4, (1, 2, 4))

Gradients = dict[str, torch.Tensor]


def full_batch(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[float, Gradients]:
    """The reference: one forward over every row, mean cross-entropy over all target tokens."""
    model.zero_grad(set_to_none=True)
    logits = model(**model_inputs(batch)).logits
    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
    loss.backward()
    return loss.item(), _grads(model)


def token_normalised(model: torch.nn.Module, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[float, Gradients]:
    """meshpilot's step, as the trainer runs it on one process."""
    model.zero_grad(set_to_none=True)
    result = forward_backward(model, micro_batches, dp_group=None)
    return result.loss, _grads(model)


def mean_of_means(model: torch.nn.Module, micro_batches: list[dict[str, torch.Tensor]]) -> tuple[float, Gradients]:
    """The common loop: each micro-batch's mean loss / accumulation steps; the step's loss is the mean of means."""
    model.zero_grad(set_to_none=True)
    losses = []
    for batch in micro_batches:
        logits = model(**model_inputs(batch)).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE_INDEX)
        (loss / len(micro_batches)).backward()
        losses.append(loss.item())
    return sum(losses) / len(losses), _grads(model)


def _grads(model: torch.nn.Module) -> Gradients:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def difference(loss: float, grads: Gradients, ref_loss: float, ref_grads: Gradients) -> dict[str, float]:
    squared = sum(float((grads[n] - g).double().pow(2).sum()) for n, g in ref_grads.items())
    norm = sum(float(g.double().pow(2).sum()) for g in ref_grads.values())
    return {
        "grad_max_abs_diff": max(float((grads[n] - g).abs().max()) for n, g in ref_grads.items()),
        "grad_rel_l2_diff": math.sqrt(squared / norm),
        "loss_diff": loss - ref_loss,
    }


def compare(model: torch.nn.Module, rows: RowSource, setup: Setup) -> dict:
    """Both accumulation methods at every micro-batch size, against the full batch of the first batch_rows rows."""
    batch = rows.batch(list(range(setup.batch_rows)))
    targets = (batch["labels"] != IGNORE_INDEX).sum(dim=1)
    ref_loss, ref_grads = full_batch(model, batch)
    results = []
    for size in setup.micro_batches:
        micro = [rows.batch(list(range(i, i + size))) for i in range(0, setup.batch_rows, size)]
        results.append(
            {
                "micro_batch": size,
                "grad_accum": len(micro),
                "meshpilot": difference(*token_normalised(model, micro), ref_loss, ref_grads),
                "naive": difference(*mean_of_means(model, micro), ref_loss, ref_grads),
            }
        )
    return {
        "full_batch_loss": ref_loss,
        "target_tokens_per_row": {"min": int(targets.min()), "max": int(targets.max()), "total": int(targets.sum())},
        "by_micro_batch": results,
    }


def check_setup(setup: Setup) -> None:
    bad = [m for m in setup.micro_batches if m < 1 or setup.batch_rows % m]
    if bad:
        raise ConfigError(f"micro-batch sizes {bad} do not divide the batch of {setup.batch_rows} rows")


def run_benchmark(setup: Setup, work: Path) -> dict:
    check_setup(setup)
    experiment = {
        "model": {"config": dict(setup.model)},
        "tokenizer": "builtin",
        "data": {"train": f"builtin:{CORPUS}", "seq_len": setup.seq_len},
    }
    experiment_file = work / "meshpilot.yaml"
    experiment_file.write_text(yaml.safe_dump(experiment, sort_keys=False))
    prepared = prepare(experiment_file)
    model = build_model(prepared.config, None, setup.seed)
    model.train()
    by_packing = {}
    for packing in (True, False):
        rows = RowSource(prepared.corpus, setup.seq_len, packing, setup.seed)
        by_packing["packed" if packing else "padded"] = compare(model, rows, setup)
    return {
        "what": "gradient of one step accumulated over micro-batches vs one full-batch pass: token-normalised vs naive",
        "setup": {**asdict(setup), "corpus": f"builtin:{CORPUS}", "dtype": "float32"},
        "results": by_packing,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model and batch: seconds")
    parser.add_argument("--out", type=Path, default=RESULTS / "grad_accum.json")
    args = parser.parse_args(argv)
    transformers.logging.set_verbosity_error()
    try:
        with tempfile.TemporaryDirectory(prefix="grad-accum-") as work:
            result = run_benchmark(QUICK if args.quick else FULL, Path(work))
    except ConfigError as error:
        print(f"grad_accum: error: {error}", file=sys.stderr)
        return 2
    path = write_json(args.out, result)
    for packing, found in result["results"].items():
        for row in found["by_micro_batch"]:
            print(
                f"{packing:6s} micro_batch {row['micro_batch']:2d}: rel. L2 gradient difference "
                f"meshpilot {row['meshpilot']['grad_rel_l2_diff']:.1e}, naive {row['naive']['grad_rel_l2_diff']:.1e}"
            )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
