"""The loss's memory traffic in the throughput model (trainer.costs.throughput.LOSS_BYTES, `loss_bytes`), counted
again on the real loss functions: per aten operation for the eager ones (trainer.model.loss's chunked loss, the plain
cross-entropy over fp32 logits), by inductor's own count of its kernels where the whole loss is compiled; and the
chunked loss's pass over the head's gradient once per chunk."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_compile_cost import KernelBytes, _inductor_metrics
from transformers import LlamaConfig

from trainer.costs.throughput import LOSS_BYTES, loss_bytes, loss_path
from trainer.layout import Layout
from trainer.model.loss import chunked_cross_entropy_sum

DTYPES = {True: torch.bfloat16, False: torch.float32}  # half precision or not, as LOSS_BYTES is keyed
VOCAB, CHUNK = 4096, 16


def _loss(
    path: str, hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, chunk: int = CHUNK
) -> torch.Tensor:
    if path == "chunked":
        return chunked_cross_entropy_sum(hidden, weight, labels, chunk=chunk)
    return F.cross_entropy((hidden @ weight.T).float(), labels, reduction="sum")


def _eager_bytes(path: str, half: bool, tokens: int, width: int, chunk: int = CHUNK) -> int:
    """Bytes the loss's memory-bound operations move, forward and backward, for `tokens` at VOCAB and `width`."""
    torch.manual_seed(0)
    hidden = torch.randn(tokens, width, dtype=DTYPES[half], requires_grad=True)
    weight = torch.randn(VOCAB, width, dtype=DTYPES[half], requires_grad=True)
    labels = torch.randint(0, VOCAB, (tokens,))
    counted = KernelBytes()
    with counted:
        _loss(path, hidden, weight, labels, chunk).backward()
    return counted.bytes


@pytest.mark.parametrize("half", [True, False])
@pytest.mark.parametrize("path", ["chunked", "whole"])
def test_eager_loss_bytes_per_logit_are_a_count_of_the_real_loss(path, half):
    """Per logit element (the difference between two token counts, at a width small beside the vocabulary), within
    1%; the chunked loss's pass over the head's gradient per chunk counted apart (the next test)."""
    width = 64
    short, long = _eager_bytes(path, half, 32, width), _eager_bytes(path, half, 64, width)
    per_logit = (long - short) / (32 * VOCAB)
    if path == "chunked":  # 2 more chunks of 16 tokens, each reading and writing the head's gradient
        per_logit -= 2 * 2 * VOCAB * width * DTYPES[half].itemsize / (32 * VOCAB)
    assert per_logit == pytest.approx(LOSS_BYTES[path, half], rel=0.01)


@pytest.mark.parametrize("half", [True, False])
def test_the_chunked_loss_reads_and_writes_the_heads_gradient_once_per_chunk(half):
    """The same tokens in twice the chunks: each further chunk reads and writes the [vocab x width] head gradient
    (its addmm_), and moves little else (a chunk's few per-token floats)."""
    width = 64
    few, many = _eager_bytes("chunked", half, 32, width, chunk=16), _eager_bytes("chunked", half, 32, width, chunk=8)
    per_chunk = (many - few) / (32 // 8 - 32 // 16)
    head = 2 * VOCAB * width * DTYPES[half].itemsize
    assert head <= per_chunk < head * 1.01


@pytest.mark.slow  # compiles twice (inductor's C++ backend here)
@pytest.mark.parametrize("half", [True, False])
def test_the_whole_loss_compiled_moves_what_inductor_counts(half):
    """The whole loss inside a compiled graph: inductor's own count of the kernels it generates (the matmuls, which
    it calls, left out), per logit element."""
    import torch._inductor.config as inductor_config  # the compiler, imported only by the test that compiles
    from torch._inductor import metrics
    from torch._inductor.scheduler import ExternKernelSchedulerNode, NopKernelSchedulerNode

    def generated_bytes(tokens: int) -> int:
        torch._dynamo.reset()
        metrics.reset()
        torch.manual_seed(0)
        hidden = torch.randn(tokens, 64, dtype=DTYPES[half], requires_grad=True)
        weight = torch.randn(1024, 64, dtype=DTYPES[half], requires_grad=True)
        labels = torch.randint(0, 1024, (tokens,))
        with inductor_config.patch(force_disable_caches=True), _inductor_metrics():
            torch.compile(lambda h, w, y: _loss("whole", h, w, y), dynamic=False)(hidden, weight, labels).backward()
            called = (ExternKernelSchedulerNode, NopKernelSchedulerNode)
            nodes = [node for node, _ in metrics.nodes_num_elem if not isinstance(node, called)]
        return sum(node.get_read_write_buffers_sizes() for node in nodes)

    # One size: the fused kernels touch no weight-sized buffer, and the per-token ones (the log-sum-exp, the labels)
    # add well under 1% at this vocabulary.
    per_logit = generated_bytes(64) / (64 * 1024)
    assert per_logit == pytest.approx(LOSS_BYTES["whole_compiled", half], rel=0.01)


def test_each_layout_s_loss_path():
    """Chunked outside pipelines (whose schedule takes the whole logits); the whole loss fused where the compiled
    micro-batch is one graph (one process, DDP), eager under FSDP2, tp, cp and pp's per-layer compilation."""
    assert loss_path(Layout(1, 2), chunked_loss=True, compiled=True) == "chunked"
    assert loss_path(Layout(pp=2), chunked_loss=True, compiled=False) == "whole"
    assert loss_path(Layout(dp_replicate=2), chunked_loss=False, compiled=True) == "whole_compiled"
    assert loss_path(Layout(dp_replicate=2), chunked_loss=False, compiled=False) == "whole"
    assert loss_path(Layout(dp_shard=2), chunked_loss=False, compiled=True) == "whole"


def test_loss_bytes_at_a_128k_vocabulary():
    """Llama 3's head at 8192 tokens in bf16: the whole loss fused moves an eighth of what the chunked one does
    per logit, and the chunked one's passes over the head's gradient add a third to its logits' traffic."""
    config = LlamaConfig(vocab_size=128256, hidden_size=2048)
    layout = Layout(dp_replicate=1)
    fused = loss_bytes(config, layout, 8192, "bf16", "whole_compiled")
    chunked = loss_bytes(config, layout, 8192, "bf16", "chunked")
    assert fused == 8192 * 128256 * 8
    chunks = 8192 // 256  # 256 tokens per chunk at this vocabulary (trainer.model.loss.chunk_tokens)
    assert chunked == 8192 * 128256 * 60 + chunks * 2 * 128256 * 2048 * 2
    # under tp each rank moves its vocabulary share
    assert loss_bytes(config, Layout(tp=2), 8192, "bf16", "whole") == 8192 * 64128 * 44
