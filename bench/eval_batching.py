"""Generation throughput: transformers' continuous batching against static batching, on outputs of varying length.

Evaluation prompts ask for answers of very different lengths. A static batch runs until its longest member is done,
so short answers wait, padded; continuous batching frees a finished sequence's slot for the next request at once.
This measures useful tokens/s (each request's own output length, nothing counted for padding) of both, with a small
random-weight Llama, greedy decoding, and per-request output lengths drawn from a long-tailed distribution.

    python -m bench.eval_batching [--device cpu|cuda] [--requests 64] [--repeats 5] [--threads 1]

Writes bench/results/eval_batching.json (or --out) with the machine's description.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig
from transformers.generation.configuration_utils import ContinuousBatchingConfig

from bench.machine import describe_machine
from evalsuite.scoring import plan_batches
from trainer.host.environment import device_name

MODEL = {
    "vocab_size": 4096,
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 1024,
}
NO_EOS = -1  # no token ends a sequence: each request stops at its own length


def workload(requests: int, seed: int = 0) -> list[tuple[list[int], int]]:
    """(prompt, output length) pairs: prompts of 16-128 tokens; most answers short, a few long (8 to 256 tokens)."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(requests):
        prompt = torch.randint(1, MODEL["vocab_size"], (int(torch.randint(16, 129, (1,), generator=g)),), generator=g)
        output = int(8 * 2 ** (5 * torch.rand(1, generator=g).item()))  # log-uniform in [8, 256)
        pairs.append((prompt.tolist(), output))
    return pairs


@torch.no_grad()
def run_static(model, device, pairs, batch_rows: int) -> int:
    """Batches of prompts of similar length, each generating as long as its longest requested output."""
    useful = 0
    batches = plan_batches([len(p) for p, _ in pairs], 1 << 30, batch_rows)
    for batch in batches:
        prompts = [pairs[i][0] for i in batch]
        width = max(map(len, prompts))
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :], mask[row, width - len(prompt) :] = torch.tensor(prompt), 1
        longest = max(pairs[i][1] for i in batch)
        config = GenerationConfig(max_new_tokens=longest, do_sample=False, eos_token_id=NO_EOS, pad_token_id=0)
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=config)
        assert out.shape[1] == width + longest
        useful += sum(pairs[i][1] for i in batch)
    return useful


@torch.no_grad()
def run_continuous(model, pairs, batch_rows: int) -> int:
    page = 32
    batching = ContinuousBatchingConfig(
        page_size=page,
        num_blocks=sum(math.ceil((len(p) + n) / page) for p, n in pairs) + 1,
        max_batch_tokens=2048,
        max_requests_per_batch=batch_rows,  # as many sequences in flight as a static batch holds
    )
    config = GenerationConfig(do_sample=False, eos_token_id=NO_EOS, pad_token_id=0, max_new_tokens=256)
    useful = 0
    with model.continuous_batching_context_manager(
        generation_config=config, continuous_batching_config=batching, warmup=False
    ) as manager:
        for i, (prompt, length) in enumerate(pairs):
            manager.add_request(prompt, request_id=f"r{i}", max_new_tokens=length)
        finished = 0
        while finished < len(pairs):
            result = manager.get_result(timeout=60)
            if result is None:
                raise RuntimeError("continuous batching stalled")
            if result.is_finished():
                assert result.error is None, result.error
                useful += len(result.generated_tokens)
                finished += 1
    return useful


def measure(fn, repeats: int) -> dict:
    fn()  # warm-up: allocator, kernels, lazy imports
    times, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = fn()
        times.append(time.perf_counter() - start)
    # The best run is the one least disturbed by other work on the machine; the median shows the typical one.
    best, median = min(times), statistics.median(times)
    return {
        "useful_tokens": tokens,
        "tokens_per_s": tokens / best,
        "tokens_per_s_median": tokens / median,
        "seconds": times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--batch-rows", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    # One thread by default: on a shared CPU, a second thread that waits for a busy core slows every op down
    # (static generation measured 15x slower at 2 threads under load, continuous batching 1.4x), which is noise.
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "eval_batching.json")
    args = parser.parse_args()

    transformers.logging.set_verbosity_error()  # both warn that no token ends a sequence, which is intended
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = AutoModelForCausalLM.from_config(LlamaConfig(**MODEL), attn_implementation="sdpa").to(device).eval()
    pairs = workload(args.requests)
    static = measure(lambda: run_static(model, device, pairs, args.batch_rows), args.repeats)
    continuous = measure(lambda: run_continuous(model, pairs, args.batch_rows), args.repeats)
    lengths = sorted(n for _, n in pairs)
    result = {
        "benchmark": "eval_batching",
        "what": "greedy generation, useful tokens/s, outputs of varying length",
        "machine": {**describe_machine(), "device": device_name(device.type), "torch_threads": torch.get_num_threads()},
        "model": MODEL,
        "workload": {
            "requests": args.requests,
            "sequences_in_flight": args.batch_rows,
            "prompt_tokens": [min(len(p) for p, _ in pairs), max(len(p) for p, _ in pairs)],
            "output_tokens_min_median_max": [lengths[0], lengths[len(lengths) // 2], lengths[-1]],
        },
        "static": static,
        "continuous": continuous,
        "speedup": continuous["tokens_per_s"] / static["tokens_per_s"],
        "speedup_median": continuous["tokens_per_s_median"] / static["tokens_per_s_median"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{result['machine']['device']}: static {static['tokens_per_s']:,.0f} tokens/s, "
        f"continuous {continuous['tokens_per_s']:,.0f} tokens/s ({result['speedup']:.2f}x; medians "
        f"{result['speedup_median']:.2f}x); wrote {args.out}"
    )


if __name__ == "__main__":
    main()
