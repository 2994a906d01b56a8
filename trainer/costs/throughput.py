"""Predicted step time and tokens/s of a layout: compute from FLOPs, memory traffic and the operations launched;
communication from the bytes each mesh dimension moves and the bandwidth of the link it crosses; calibrated by
measured runs on the same machine.

Compute per optimizer step and rank has three parts:
- matmul: the step's FLOPs (6 per matmul parameter per token, and attention over full rows) over the matmul rate
  in the compute dtype, a third more under full activation checkpointing (the forward runs twice), and under
  selective only the matmuls it recomputes (`selective_recompute_flops`: k, o and up, attention not at all); the
  chunked loss's second forward of the output head (trainer.model.loss) outside pipelines;
- memory: the bytes that work bound by memory bandwidth moves (`memory_traffic`), over the memory bandwidth: the
  elementwise operations of every layer (RMSNorm in fp32, rotary, SwiGLU, residuals, casts; `LAYER_BYTES`) in
  forward, backward and any recomputation (full and selective both recompute all of them; without them an eager
  layer reruns its norms and SiLU: `RECOMPUTED_BYTES`), the loss over the
  logits (chunked and eager, or whole and fused into the compiled step: `loss_bytes`), a dense attention mask read
  per head, autocast's bf16 weight copies, FSDP's gathered parameters, gradient accumulation and the AdamW update;
- launches: the fixed cost of each operation (`OPS_PER_LAYER` per layer and pass, counted on transformers' Llama).
  A CPU runs operations one after another and pays it on top; a GPU queues them, so launching costs time only where
  it outlasts the work: the step takes the longer of the two.

Dispatch (`dispatch_s`): what Python adds on top of an operation's launch where a layer's operations go through a
Python-level dispatcher. Under tensor parallelism every operation on a DTensor parameter or activation does
(`DTENSOR_OPS_PER_LAYER`, on a CPU about twenty times a plain operation's cost); under selective checkpointing
every operation of a layer passes through the checkpointing policy's dispatch modes, in the forward and again in
the recomputation (`SELECTIVE_OPS_PER_LAYER`). Each is priced at what the probe measured per operation on a tiny
layer (`dtensor_op_s`, `selective_op_s`). On a CPU it adds to compute; on a GPU it is host time like the launches,
hidden behind queued work where that is longer. It is its own calibration feature: a real layer pays more than a
tiny one (tensor parallelism's copies grow with the tokens), and calibration scales it apart from compute.

`train.compile` changes the layers' memory-bound work and launches only: eager PyTorch runs every elementwise
operation as its own kernel, each reading its inputs from memory and writing its output there, while inductor fuses
a layer's elementwise operations into a few kernels that read each input once and write what the matmuls, attention
and backward need (`LAYER_BYTES`, `COMPILED_OPS_PER_LAYER`). The matmuls and attention are the same kernels either
way. Counted per layer, as trainer.parallel.compile.compile_layers compiles under FSDP2, tensor, pipeline and
context parallelism: where the whole micro-batch step is one graph (trainer.parallel.compile.compiles_whole_step)
inductor also fuses the embedding, loss and layer boundaries, which the model leaves eager (a few percent of a small
model's step, bench/trainer_vs_hf.py); the optimizer stays eager either way.

`train.precision: fp8` (torchao's float8 linears, trainer.parallel.float8) is bf16 but for the float8 layers: their
matmuls at the float8 rate (the bf16 rate times the data sheets' float8/bf16 peak ratio, a share of it for rowwise:
`FLOAT8_MATMUL_SHARE`), their casts' memory traffic and launches (`float8_cast_bytes`, `float8_cast_operations`:
every input, weight and output gradient cast twice per micro-batch, a dozen kernels each eager, two fused ones
compiled), and no autocast copies of their weights. The rest (attention, the output head, experts) stays bf16.

Communication per optimizer step (ring collectives move 2(n-1)/n of the data for all-reduce, (n-1)/n for
all-gather and reduce-scatter), with P the fp32 bytes of one rank's tensor-parallel share of the parameters:
- dp_replicate: gradients all-reduced once per step; under HSDP the sharded gradients, P / dp_shard.
- dp_shard (FSDP2, over dp_shard x cp): parameters all-gathered in forward and again in backward for every
  micro-batch (the root unit once: FSDP2 keeps it from forward to backward, `root_regathers`; in bf16, half of P,
  under bf16: FSDP2's mixed precision), gradients reduce-scattered (fp32, or train.fsdp_reduce_dtype) after
  every micro-batch (train.fsdp_grad_sync: micro_batch), or once per step (step, and inside a pipeline schedule,
  whose stages reduce once at the end). Below ZeRO stage 3 (train.zero_stage, `fsdp_gathers`) fewer gathers: once
  per micro-batch (2), once per step (1, which also reduce-scatters once per step). What is sent once per step (a
  reduction once per step, at any stage, stage 1's gathers, the all-reduce across replicas, which accumulation
  skips until the last micro-batch) falls in one micro-batch: only its compute can hide it, not the whole step's
  (`exposed_data_parallel_s`).
- tp, with sequence parallelism (trainer.parallel.tensor_parallel): all-gathers and reduce-scatters of one
  activation each, every micro-batch (`TP_COLLECTIVES_PER_LAYER`): per layer in forward, attention's and the MLP's
  inputs all-gathered (the norms' outputs: `activation_width`) and their row-parallel outputs reduce-scattered (the
  compute dtype); in backward the reverse: the outputs' gradients all-gathered (the compute dtype) and the summed
  input gradients reduce-scattered (`activation_width`, so fp32 under autocast). Each moves (tp-1)/tp of the
  activation per rank, half an all-reduce: forward moves what the two all-reduces of plain tensor parallelism moved,
  backward two all-reduces' worth rather than five (the column-parallel projections' input gradients are summed
  before one reduction). Recomputation reruns the forward's gathers, and under full checkpointing its first
  reduce-scatter too (selective keeps the reduce-scatters' outputs); without recomputation, outside autocast,
  backward gathers attention's and the MLP's inputs again (they keep only the split input, as Megatron-LM's).
  Outside the layers, per micro-batch, the vocabulary-parallel embedding's all-reduce, the head's gathered input
  and its gradient's reduce-scatter, the first layer's split gathered back (`TP_COLLECTIVES_OUTSIDE_LAYERS`).
  Priced at the all-gather's rate. These sit on the critical path, while data-parallel traffic mostly overlaps the
  backward pass.
- cp: every layer all-gathers the keys and values in forward (again when activation checkpointing, full or
  selective, recomputes the forward) and reduce-scatters their gradients in backward, every micro-batch
  (`context_parallel_bytes`).
- pp: activations sent between stages, per micro-batch.
- the gradient noise scale (train.gns_every): on a measured step the first micro-batch round's gradient is
  reduced once more over the data-parallel ranks (`noise_scale_bytes`), and the step waits for its norm: priced
  as communication on the critical path, amortised over the `gns_every` steps between measurements.
- ep (mixture of experts): every MoE layer sends each local token's top_k rows to their experts' ranks and brings
  them back (two all-to-alls, each moving (ep - 1)/ep of top_k x tokens x hidden per rank), and again for their
  gradients in backward, and once more in forward where activation checkpointing recomputes the layer; each with a
  small all-to-all of the per-expert counts first (`expert_parallel_bytes`). On the critical path, and scaled by the
  load imbalance: the rank whose experts receive the most rows sets the pace.
cp's keys and values, pp's activations, tp's backward gradients and ep's rows move in `activation_width`: fp32
under autocast (the residual stream and rotary's keys stay fp32), bf16 where the parameters are.

Mixture-of-experts models: FLOPs per token count the active parameters (the routed experts at top_k / E,
trainer.model.parameters); a rank holds, gathers, updates and reduces the dense parameters and its E/ep experts.
The experts stay whole on every tp rank, which all compute them on the whole sequence (their FLOPs, bytes and
traffic are not divided by tp), and FSDP2 chunks them over `Layout.expert_shard_degree` (dp_shard x cp / ep), not
over the dense parameters' shard degree (`fsdp_shares`).
Uneven routing (`StepShape.expert_imbalance`, the most loaded ep rank's rows over the mean: a stated 1.2 by default,
`EXPERT_IMBALANCE`; trainer.parallel.expert_parallel.expert_load measures it per step) lengthens the experts' matmuls
and the all-to-alls by that factor.

Links: a mesh dimension stays inside a node when it and the dimensions inside it (the mesh is ordered
[pp, dp_replicate, dp_shard, cp, tp], tp innermost) fit in one node's devices; otherwise it crosses the network.
Inside a node the link is NVLink or PCIe: from `nvidia-smi topo -m` on this machine's GPUs, or what a GPU preset has
(trainer.hardware.DEVICES), in the device's own generation; between nodes InfiniBand, NDR unless told HDR.

Rates (`hardware_figures`): the compute rate, and each link's per-collective latency and bandwidth, are the
machine's probe (`meshpilot probe`, trainer.costs.probe) where it has one, and otherwise the stated assumptions and data
sheets below (`INTERCONNECTS` for the links).
Calibration fits on top of them, by non-negative least squares on the runs measured on this machine (stored per
machine), seconds per predicted second of compute, of communication and of dispatch, and the fixed seconds per
collective and per micro-batch that the formulas leave out.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PretrainedConfig

from trainer.config import (
    Checkpointing,
    Experiment,
    TrainSpec,
    checkpointing_mode,
    half_precision,
    reduces_once_per_step,
    resolve_precision,
    resolve_zero_stage,
)
from trainer.costs.calibration import Calibration
from trainer.costs.flops import step_flops
from trainer.costs.memory_model import logit_columns
from trainer.costs.probe import figures_source, read_probe
from trainer.hardware import INTERCONNECTS, NETWORKS, Hardware, float8_speedup, interconnect_within
from trainer.layout import LAYOUT_DIMS, MESH_DIMS, Layout
from trainer.model.attention import takes_dense_mask
from trainer.model.loss import chunk_tokens
from trainer.model.parameters import MoeDims, count_parameters, head_dim, moe_dims
from trainer.parallel.compile import compiles_whole_step
from trainer.parallel.tensor_parallel import saves_split_inputs

OP_OVERHEAD_S = {"cuda": 10e-6, "cpu": 5e-6}
# Operations per decoder layer in one forward pass of transformers' Llama (views left out), backward twice as many
# (counted: 32 forward, 65 backward per layer; 19 and 20 for the embedding, final norm, head and loss).
OPS_PER_LAYER = 32
OPS_OUTSIDE_LAYERS = 40
# An eager layer outside activation checkpointing reruns its norms and SiLU in backward (trainer.model.recompute): 15
# more operations in bf16 (11 in fp32, whose upcasts are no-ops), counted on the real layer.
RECOMPUTED_OPS_PER_LAYER = 15
# Operations on DTensors in one tensor-parallel decoder layer (transformers' Llama under its base_model_tp_plan, with
# sequence parallelism: trainer.parallel.tensor_parallel): 42 in forward (the norms, the redistributions, the
# projections' transposes, views and matmuls), 102 in backward (their gradients and the parameters' gradient
# accumulation); outside the layers 7 and 20 (the embedding's sum over its vocabulary split, the first layer's split,
# the final norm, the head's gather and its handover to the chunked loss). Each pays
# DTensor's dispatch on top of its launch. Operations of one layer that
# pass through selective checkpointing's dispatch modes, views included: 70 in the forward and 100 in the
# recomputation (which runs with gradients on). Both counted by tests/test_dispatch_cost.py.
DTENSOR_OPS_PER_LAYER, DTENSOR_OPS_OUTSIDE_LAYERS = (42, 102), (7, 20)
# The same where an eager layer reruns its norms and SiLU in backward (trainer.model.recompute; the final norm too):
# the reruns dispatch on DTensors again, and two forward views go.
RERUN_DTENSOR_OPS_PER_LAYER, RERUN_DTENSOR_OPS_OUTSIDE_LAYERS = (40, 134), (6, 36)
SELECTIVE_OPS_PER_LAYER = 170
# Stated dispatch costs per operation where no probe measured them: what the probe measured on this project's
# 2-core CPU machine (49-64 us and 11-16 us over five probes, against 2.5 us for a plain operation).
DTENSOR_OP_S, SELECTIVE_OP_S = 55e-6, 12e-6
# Compiled, a layer's forward launches its 7 matmuls, attention and 6 fused kernels (input norm; rotary of q; of k;
# residual add with the second norm; SiLU times up; residual add), its backward 14 matmuls, attention's and 7 fused
# kernels (counted on the kernels inductor generated for transformers' layer).
COMPILED_OPS_PER_LAYER, COMPILED_BACKWARD_OPS_PER_LAYER = 14, 22
# Selective checkpointing recomputes every operation of a layer's forward but the five whose outputs it keeps (the
# q, v, gate and down matmuls and attention: trainer.parallel.activation_checkpointing.selective_checkpoint_context).
SELECTIVE_KEPT_OPS = 5
# Bytes one decoder layer's memory-bound kernels read and write per token, forward and backward, as coefficients of
# the widths they run over: (hidden h, query q, key-value kv, intermediate i, head_dim d, 1), q, kv and i on this
# rank's tensor-parallel share; d is rotary's cos and sin, 1 the norms' per-token variance. By how the layer computes
# (`layer_regime`): fp32; bf16 under FSDP2's mixed precision (parameters and activations bf16, RMSNorm upcasting to
# fp32 inside); autocast (fp32 parameters and residual stream, every matmul casting its input to bf16 and writing
# bf16, rotary promoted back to fp32 by the fp32 cos and sin and cast again for attention).
# Eager: counted kernel by kernel (each aten operation reads its inputs and writes its output; views, matmuls and
# attention left out) on transformers 5.23's LlamaDecoderLayer with SDPA; tests/test_compile_cost.py counts again.
# In bf16, per element of h: an RMSNorm forward moves 36 bytes (upcast 6, square 8, mean 4, scale 8, downcast 6,
# weight 4) and its backward 92 (13 operations, 9 in fp32); each residual add 6, each gradient sum where a tensor
# fed several matmuls or the residual 6 (5 in backward); per element of q and kv, rotary 20 forward (mul, neg, cat,
# mul, add) and 32 backward (its 7 operations and the copy of the transposed gradient); SwiGLU 10 forward (SiLU, mul)
# and 18 backward, per element of i. Autocast adds the casts: 5 of the norms' outputs to bf16 (one per projection),
# q and k to bf16 for attention, and the gradients back.
# Compiled: inductor's fused kernels (`COMPILED_OPS_PER_LAYER`), each reading its inputs once and writing its
# outputs once: inductor's own count of the buffers every kernel it generated for the same layer reads and writes
# (torch 2.13, concatenation fused as inductor does on a GPU; the test compiles the bf16 layer again). In bf16,
# forward per element of h: the input norm reads x and writes its output (4), the first residual add fused with the
# second norm reads x and attention's projection and writes the norm's output (6), and the last residual add
# recomputes the first and adds the MLP's (8); rotary reads q or k and writes it once (4, cos and sin read once a
# token), SiLU times up reads gate and up and writes the product (6 per element of i). Backward, 38.5 per element of
# h in four kernels (the two norms' gradients, each fused with the sum of the gradients reaching it: 12 and 14; 12
# and 0.5 more), rotary 4, SwiGLU 10 (reads the product's gradient, gate and up, writes their gradients).
LAYER_BYTES = {
    ("fp32", False): ((80, 40, 40, 20, 16, 48), (244, 64, 64, 36, 16, 80)),
    ("bf16", False): ((84, 20, 20, 10, 8, 48), (214, 32, 32, 18, 8, 80)),
    ("autocast", False): ((106, 36, 36, 10, 16, 48), (286, 58, 58, 18, 16, 80)),
    ("fp32", True): ((36, 8, 8, 12, 16, 8), (76.5, 8, 8, 20, 16, 16)),
    ("bf16", True): ((18, 4, 4, 6, 8, 8), (38.5, 4, 4, 10, 8, 16)),
    ("autocast", True): ((26, 4, 4, 6, 16, 8), (64.5, 4, 4, 10, 16, 16)),
}
# What an eager layer's rerun of its norms and SiLU in backward (trainer.model.recompute, outside activation
# checkpointing) moves per token, as LAYER_BYTES' coefficients, by regime: each RMSNorm's forward up to its
# normalised value (the weight's product is never needed again: torch's checkpoint stops there), 32 bytes per element
# of h in bf16 (upcast 6, square 8, mean 4, scale 8, downcast 6) and 20 from fp32 inputs, 24 per token; SiLU, 4 per
# element of i in bf16 and 8 in fp32 (the gate product is the down projection's saved input: not rerun either).
# Counted on the real layer by tests/test_compile_cost.py.
RECOMPUTED_BYTES = {
    "fp32": (40, 0, 0, 8, 0, 48),
    "bf16": (64, 0, 0, 4, 0, 48),
    "autocast": (40, 0, 0, 4, 0, 48),
}
# Bytes the loss moves per logit element (the head's matmuls are compute), by how it runs (`loss_path`) and whether
# the compute dtype is half: counted per aten operation on trainer.model.loss's chunked loss (forward: the upcast and
# log-sum-exp; backward: the recomputed logits' upcast, the in-place softmax minus one-hot, the scaling, the cast back,
# the gradient's read by the head-gradient matmul) and on the plain F.cross_entropy over fp32 logits (eager whole),
# and by inductor's own count of its fused kernels where the whole loss is inside the compiled step (read the
# logits forward; read them and write their gradient backward). tests/test_loss_cost.py counts them again.
# The chunked loss also reads and writes the head's gradient once per chunk (its addmm_ into the gradient, in the
# compute dtype): `loss_bytes`.
LOSS_BYTES = {
    ("chunked", True): 60, ("chunked", False): 44,
    ("whole", True): 44, ("whole", False): 32,
    ("whole_compiled", True): 8, ("whole_compiled", False): 16,
}  # fmt: skip
# AdamW reads parameter, gradient and both moments and writes three of them (28 in fp32); accumulating a
# micro-batch's gradient reads two and writes one (12).
ADAMW_BYTES, ACCUMULATE_BYTES = 28, 12
# train.precision fp8 (torchao's Float8Linear, trainer.parallel.float8): each float8 linear layer casts its input
# and weight to float8 in forward, and in backward its output's gradient twice (for the input's gradient and the
# weight's) and its saved bf16 input and weight again (torchao saves the high-precision tensors, not their float8
# copies): every operand twice per micro-batch. Eager, a cast is a dozen kernels (abs, amax, the scale, multiply,
# clamp, convert) moving 33 bytes per bf16 element, tensorwise and rowwise alike, and launching 11 (tensorwise) or 14
# (rowwise: the scale rounded to a power of two) operations: counted on torchao 0.18's Float8Linear by
# tests/test_float8.py. Compiled, inductor fuses a cast into an amax reduction and a scale-and-convert kernel that
# read the bf16 tensor twice and write float8 once: 5 bytes per element (stated), 2 kernels.
FLOAT8_CAST_BYTES = {False: 33, True: 5}
FLOAT8_CAST_OPS = {("tensorwise", False): 11, ("rowwise", False): 14, ("tensorwise", True): 2, ("rowwise", True): 2}
FLOAT8_CASTS_PER_OPERAND = 2
# Float8 matmul speed by recipe, as a share of the tensorwise rate (the data sheets' float8 peak at bf16's share of
# its peak: Figures.compute_flops). Rowwise scaling runs a CUTLASS kernel where tensorwise runs cuBLAS: "most shapes
# are within 90-100% of tensor-wise efficiency, but there's a long tail going down to 50%" (pytorch/pytorch#147971,
# H100, fast accumulation); its two backward matmuls run without fast accumulation, as cuBLAS's tensorwise kernel
# plus a kernel rescaling the output (torchao float8_ops.py; pytorch/ao#1325, #2184), which reads and writes each
# output once more: FLOAT8_RESCALE_BYTES per element of the input's and the weight's gradients. Stated, not fitted.
FLOAT8_MATMUL_SHARE = {"tensorwise": 1.0, "rowwise": 0.9}
# Measured: float8 matmuls gain less over bf16 ones than the data sheets' peaks say. On one H200 (2026-11-26,
# bench/results/gpu_h200_issue38_call1.json) a compiled Llama-3.2-1B-shaped step took 1.313 s in bf16 (predicted
# 1.303 s) and 1.181 s in fp8 tensorwise, which the model gives with the float8 matmuls' rate at bf16's times
# 1 + FLOAT8_GAIN x (the data sheets' ratio - 1), i.e. 1.46x on Hopper (1.04 s at the full 2x). Checked afterwards,
# not fitted, against the published 8B rows (bench/published_float8.py): errors +10.4/+15.2/+5.6% with the full
# ratio, -7.2/-3.4/-10.7% with this gain (tensorwise and rowwise from torchao's README, torchtitan's float8 row).
FLOAT8_GAIN = 0.46
FLOAT8_RESCALE_BYTES = 4
DDP_BUCKET_BYTES = 25 * 1024**2
# Collectives per tensor-parallel (sequence-parallel) decoder layer and micro-batch, each of one activation, by kind:
# (forward, backward, rerun by full recomputation, rerun by selective, gathered again in backward where nothing
# recomputes: trainer.parallel.tensor_parallel.saves_split_inputs). All-gathers: attention's and the MLP's inputs in
# forward (and again in backward, as Megatron-LM does, where they keep only the split input), the gradients of their
# row-parallel outputs in backward. Reduce-scatters: those outputs in forward, the summed gradients of their inputs in
# backward. Counted, with their dtypes, on transformers' Llama by tests/test_communication_dtypes.py.
TP_COLLECTIVES_PER_LAYER = {"all_gather": (2, 2, 2, 2, 2), "reduce_scatter": (2, 2, 1, 0, 0)}
# Collectives outside the decoder layers per micro-batch, each of one activation in `activation_width`, by kind:
# (forward, backward). The vocabulary-parallel embedding's all-reduce; the first layer's split gathered back in
# backward; the output head's input gathered in forward, its gradient (a partial sum over the ranks' vocabulary rows)
# reduce-scattered in backward (trainer.parallel.tensor_parallel). The chunked loss's all-reduces of a few floats per
# token are left out. Counted by tests/test_communication_dtypes.py.
TP_COLLECTIVES_OUTSIDE_LAYERS = {"all_reduce": (1, 0), "all_gather": (1, 1), "reduce_scatter": (0, 1)}
# The collective that carries most of each dimension's traffic, whose probed latency and bandwidth it is priced at.
COLLECTIVE_OF = {
    "dp_replicate": "all_reduce", "dp_shard": "all_gather", "cp": "all_gather", "tp": "all_gather", "pp": "send_recv",
    "ep": "all_to_all",
}  # fmt: skip
# What communicates: the mesh dimensions and expert parallelism, which borrows dp_shard x cp's ranks.
COMM_DIMS = LAYOUT_DIMS
# The most loaded ep rank's (token, expert) rows over the mean, where a run has not measured it: a stated assumption
# for routing trained with a load-balancing loss (published MoE benchmarks force-balance the router: 1.0).
EXPERT_IMBALANCE = 1.2
FP32 = 4


@dataclass(frozen=True)
class Figures:
    """The rates predictions start from: the machine's probe where it has one, else the stated assumptions."""

    source: str  # STATED, or which probe: runs calibrated under other figures do not apply to these
    flops: dict[str, float]  # achieved matmul FLOP/s per precision (fp32, bf16, fp16)
    links: dict[str, dict[str, tuple[float, float]]]  # intra_node | network -> collective -> (latency s, bytes/s)
    bandwidth: float | None = None  # memory bytes/s; None: stated
    op_overhead_s: float | None = None  # seconds per tiny operation; None: stated
    dtensor_op_s: float | None = None  # seconds DTensor's dispatch adds to an operation; None: stated
    selective_op_s: float | None = None  # seconds selective checkpointing's policy adds to an operation; None: stated

    def compute_flops(self, hardware: Hardware, precision: str) -> float:
        """Achieved matmul FLOP/s in `precision`; fp8's are the bf16 rate times the share FLOAT8_GAIN of the GPU's
        float8 speedup (its data sheets' ratio, trainer.hardware.float8_speedup) measured on an H200: no probe
        measures float8 matmuls."""
        if precision == "fp8":
            gain = 1 + FLOAT8_GAIN * (float8_speedup(hardware.device_name) - 1)
            return self.compute_flops(hardware, "bf16") * gain
        return self.flops.get(precision) or hardware.peak_flops

    def memory_bandwidth(self, hardware: Hardware) -> float:
        return self.bandwidth or hardware.memory_bandwidth

    def op_overhead(self, hardware: Hardware) -> float:
        return self.op_overhead_s or OP_OVERHEAD_S[hardware.device_type]

    def dispatch_overheads(self) -> tuple[float, float]:
        """Seconds per operation that DTensor's dispatch and selective checkpointing's policy add (a probe may
        measure nothing added: 0 is a figure, not a missing one)."""
        dtensor, selective = self.dtensor_op_s, self.selective_op_s
        return DTENSOR_OP_S if dtensor is None else dtensor, SELECTIVE_OP_S if selective is None else selective

    def transfer_s(self, link: str, collective: str, sent_bytes: float, count: int) -> float:
        """Seconds for `count` collectives sending `sent_bytes` per rank in all over `link`."""
        measured = self.links.get("network" if link in NETWORKS else "intra_node", {}).get(collective)
        latency, bandwidth = measured or (INTERCONNECTS[link].latency_s, INTERCONNECTS[link].bandwidth)
        return sent_bytes / bandwidth + count * latency


def hardware_figures(hardware: Hardware) -> Figures:
    """The one place that decides between probed and stated figures: this machine's probe (stored under the
    same key as its calibration) where there is one; a rate it lacks (a link it could not measure) is stated."""
    probe = read_probe(hardware)
    if probe is None:
        return Figures(figures_source(hardware), {}, {})
    found = probe["figures"]
    links = {
        link: {name: (c["latency_s"], c["bandwidth"]) for name, c in collectives.items()}
        for link, collectives in found["links"].items()
    }
    # Probes stored before the memory figures were taken into predictions keep them in their compute section.
    compute = probe.get("compute", {})
    bandwidth = found.get("memory_bandwidth", compute.get("memory_bandwidth"))
    overhead = found.get("op_overhead_s", compute.get("op_overhead_s"))
    dispatch = found.get("dtensor_op_s"), found.get("selective_op_s")  # None in probes older than their measurement
    return Figures(figures_source(hardware), found["flops"], links, bandwidth, overhead, *dispatch)


@dataclass(frozen=True)
class StepEstimate:
    """Uncalibrated seconds (what the formulas say) and the calibrated step time they give on this machine."""

    compute_s: float  # matmul, memory traffic and launches (see the module docstring)
    comm_s: float  # communication left on the critical path (tp, cp, pp, and dp beyond what backward hides)
    comm_bytes: dict[str, float]  # per mesh dimension, per step, per rank
    collectives: int  # per step and rank, each with a fixed cost: tp, cp and FSDP's (not DDP's buckets or PP's sends)
    micro_batches: int  # forward-backward passes per step, each with a fixed cost of launching its operations
    dispatch_s: float  # Python dispatch on top of launches (DTensor, selective checkpointing); 0 on a GPU: in compute
    step_s: float
    tokens_per_s: float
    matmul_s: float = 0.0  # the parts of compute_s
    memory_s: float = 0.0
    launch_s: float = 0.0


def dimension_links(layout: Layout, hardware: Hardware) -> dict[str, str]:
    """The link (an INTERCONNECTS key) each mesh dimension's collectives cross."""
    links, inner, within = {}, 1, interconnect_within(hardware)
    for name in reversed(MESH_DIMS):
        inner *= getattr(layout, name)
        links[name] = within if inner <= hardware.devices_per_node else hardware.network
    # ep's ranks are neighbours in dp_shard x cp (innermost there), tp's ranks between them.
    links["ep"] = within if layout.ep * layout.tp <= hardware.devices_per_node else hardware.network
    return links


def context_parallel_bytes(
    config: PretrainedConfig, layout: Layout, micro_batch: int, seq_len: int, precision: str = "fp32"
) -> float:
    """Bytes each rank sends in one context-parallel collective: the all-gather of one layer's keys and values for
    one micro-batch, or the reduce-scatter of their gradients. Either moves (cp - 1) times the rank's own share:
    its tokens' keys and values over its tensor-parallel share of the key-value heads (`activation_width`)."""
    tokens = micro_batch * seq_len // layout.cp
    width = activation_width(precision, layout)
    local = 2 * tokens * config.hidden_size * _kv_ratio(config) * width / layout.tp
    return (layout.cp - 1) * local


def communication_bytes(
    config: PretrainedConfig,
    layout: Layout,
    parameter_bytes: int,
    micro_batch: int,
    seq_len: int,
    grad_accum: int,
    checkpointing: Checkpointing = "none",
    precision: str = "fp32",
    fsdp_grad_sync: str = "micro_batch",
    expert_imbalance: float = EXPERT_IMBALANCE,
    expert_bytes: int = 0,
    zero_stage: int = 3,
    fsdp_reduce_dtype: str = "fp32",
) -> dict[str, tuple[float, int]]:
    """(bytes each rank sends, number of collectives) per optimizer step, per mesh dimension and ep.

    `parameter_bytes` is the whole model's (fp32), or of an MoE model what an ep rank holds (its E/ep experts, whose
    bytes `expert_bytes` are): a pipeline stage holds its 1/pp share of it.
    """
    ring = lambda n: (n - 1) / n  # noqa: E731 - the share of the data a ring collective moves per rank
    tokens = micro_batch * seq_len // layout.cp
    layers = -(-config.num_hidden_layers // layout.pp)
    dense, experts = fsdp_shares(layout, parameter_bytes, expert_bytes)
    sent = dict.fromkeys(COMM_DIMS, (0.0, 0))
    shards = layout.shard_degree  # FSDP2 shards over dp_shard x cp; counted under dp_shard, whose link it crosses
    reduced = reduced_share(precision, fsdp_reduce_dtype)
    if shards > 1:
        reductions = fsdp_reduce_scatters(layout, grad_accum, fsdp_grad_sync, zero_stage)
        gathers = fsdp_gathers(layout, grad_accum, zero_stage)
        collectives = sum(fsdp_collectives(layout, grad_accum, zero_stage, fsdp_grad_sync, layers))
        gathered = 0.5 if half_precision(precision) else 1.0  # bf16 gathers of fp32 parameters
        moved = ring(shards) * dense + ring(layout.expert_shard_degree) * experts
        # the root's gathers that FSDP2 does not make (it keeps the root from forward to backward), its share
        # counted as `fsdp_shares` counts every parameter: split by tp and pp
        root_share = root_parameter_bytes(config) / layout.tp / layout.pp
        root = root_regathers(layout, grad_accum, zero_stage) * ring(shards) * root_share
        sent["dp_shard"] = ((gathers * gathered + reductions * reduced) * moved - root * gathered, collectives)
    if layout.dp_replicate > 1:  # HSDP's all-reduce of the reduce-scattered shard in FSDP2's reduce dtype too
        volume = dense / shards + experts / layout.expert_shard_degree
        volume *= reduced if layout.fsdp else 1.0
        sent["dp_replicate"] = (2 * ring(layout.dp_replicate) * volume, max(1, -(-int(volume) // DDP_BUCKET_BYTES)))
    if layout.tp > 1:
        sent["tp"] = tensor_parallel_sent(config, layout, tokens, grad_accum, checkpointing, precision)
    if layout.cp > 1:  # per layer: all-gather (twice with recomputation, full or selective) and reduce-scatter
        collectives = grad_accum * layers * (2 if checkpointing == "none" else 3)
        per_collective = context_parallel_bytes(config, layout, micro_batch, seq_len, precision)
        sent["cp"] = (collectives * per_collective, collectives)
    if layout.pp > 1:
        stage_output = tokens * config.hidden_size * activation_width(precision, layout) / layout.tp
        sent["pp"] = (grad_accum * 2 * stage_output, grad_accum * 2)  # forward, and its gradient back
    sent["ep"] = expert_parallel_bytes(
        config, layout, micro_batch, seq_len, grad_accum, checkpointing, precision, expert_imbalance
    )
    return sent


def fsdp_shares(layout: Layout, parameter_bytes: float, expert_bytes: float = 0) -> tuple[float, float]:
    """This rank's pipeline-stage share of its parameters before FSDP2 chunks them, as (dense, experts): tensor
    parallelism splits the dense part; the experts (`expert_bytes` of `parameter_bytes`) stay whole on every tp rank
    (trainer.parallel.parallelize.apply_experts) and FSDP2 chunks them over `Layout.expert_shard_degree`."""
    return (parameter_bytes - expert_bytes) / layout.pp / layout.tp, expert_bytes / layout.pp


def tensor_parallel_sent(
    config: PretrainedConfig,
    layout: Layout,
    tokens: int,
    grad_accum: int,
    checkpointing: Checkpointing = "none",
    precision: str = "fp32",
) -> tuple[float, int]:
    """(bytes each rank sends, collectives) per step for sequence-parallel tensor parallelism: per layer and
    micro-batch of `tokens` local tokens, `TP_COLLECTIVES_PER_LAYER`, each moving (tp-1)/tp of one activation; the
    norms' outputs and the input gradients in `activation_width`, the row-parallel outputs and their gradients in the
    compute dtype (see the module docstring); outside the layers `TP_COLLECTIVES_OUTSIDE_LAYERS` (an all-reduce moving
    twice a gather's bytes)."""
    layers = -(-config.num_hidden_layers // layout.pp)
    mode = checkpointing_mode(checkpointing)
    residual, computed = activation_width(precision, layout), 2 if half_precision(precision) else FP32
    gathers, scatters = TP_COLLECTIVES_PER_LAYER["all_gather"], TP_COLLECTIVES_PER_LAYER["reduce_scatter"]
    rerun = {"none": None, "full": 2, "selective": 3}[mode]  # the recomputation's column in the counts
    if saves_split_inputs(mode) and layer_regime(precision, layout) != "autocast":
        rerun = 4  # backward gathers the split inputs again (an MoE block's is kept whole: attention's only)
    gathers_again = 0 if rerun is None else gathers[rerun] - (rerun == 4 and moe_dims(config) is not None)
    scatters_again = 0 if rerun is None else scatters[rerun]
    widths = (gathers[0] + gathers_again) * residual + gathers[1] * computed
    widths += (scatters[0] + scatters_again) * computed + scatters[1] * residual
    activation = (layout.tp - 1) / layout.tp * tokens * config.hidden_size
    count = gathers[0] + gathers[1] + gathers_again + scatters[0] + scatters[1] + scatters_again
    outside = {kind: sum(counts) for kind, counts in TP_COLLECTIVES_OUTSIDE_LAYERS.items()}
    outside_bytes = (
        activation * residual * (2 * outside["all_reduce"] + outside["all_gather"] + outside["reduce_scatter"])
    )
    sent = grad_accum * (layers * activation * widths + outside_bytes)
    return sent, grad_accum * (layers * count + sum(outside.values()))


def expert_parallel_bytes(
    config: PretrainedConfig,
    layout: Layout,
    micro_batch: int,
    seq_len: int,
    grad_accum: int,
    checkpointing: Checkpointing = "none",
    precision: str = "fp32",
    expert_imbalance: float = EXPERT_IMBALANCE,
) -> tuple[float, int]:
    """(bytes the busiest rank moves, collectives) per optimizer step for expert parallelism's all-to-alls: per
    MoE layer on this pipeline stage and micro-batch, dispatch and combine in forward, their gradients in backward,
    and the forward's again where checkpointing recomputes the layer, each (ep - 1)/ep of the rank's top_k x tokens
    rows of hidden size (times the imbalance), after an all-to-all of the per-expert counts (latency only)."""
    moe = moe_dims(config)
    if moe is None or layout.ep == 1:
        return 0.0, 0
    tokens = micro_batch * seq_len // layout.cp
    layers = -(-moe.moe_layers // layout.pp)
    recomputed = checkpointing != "none"
    passes = 4 + (2 if recomputed else 0)
    counts = 1 + (1 if recomputed else 0)
    rows = moe.top_k * tokens * config.hidden_size * activation_width(precision, layout)
    per_all_to_all = (layout.ep - 1) / layout.ep * rows * expert_imbalance
    return grad_accum * layers * passes * per_all_to_all, grad_accum * layers * (passes + counts)


def reduced_share(precision: str, fsdp_reduce_dtype: str) -> float:
    """FSDP2's gradient reductions' bytes as a share of fp32's: under bf16 it reduces in train.fsdp_reduce_dtype
    (half in bf16; measured on the trainer's reduce-scatters, tests/test_zero_stages.py), fp32 otherwise."""
    return 0.5 if half_precision(precision) and fsdp_reduce_dtype == "bf16" else 1.0


def noise_scale_bytes(
    config: PretrainedConfig,
    layout: Layout,
    parameter_bytes: int,
    grad_accum: int,
    gns_every: int,
    expert_bytes: int = 0,
    reduced: float = 1.0,
) -> dict[str, tuple[float, int]]:
    """(bytes each rank sends, collectives) per mesh dimension for the gradient noise scale's extra reduction of
    one measured step (trainer.rank.step: the first micro-batch round's gradient, reduced as the step's last one is);
    empty where nothing is measured (gns_every 0, one micro-batch, a pipeline) or nothing needs reducing. `reduced`:
    FSDP2's reductions' share of fp32's bytes (`reduced_share`)."""
    if gns_every <= 0 or grad_accum < 2 or layout.pp > 1:
        return {}
    ring = lambda n: (n - 1) / n  # noqa: E731
    (dense, experts), shards, extra = fsdp_shares(layout, parameter_bytes, expert_bytes), layout.shard_degree, {}
    if shards > 1:  # one reduce-scatter per layer and the root
        moved = ring(shards) * dense + ring(layout.expert_shard_degree) * experts
        extra["dp_shard"] = (moved * reduced, config.num_hidden_layers + 1)
    if layout.dp_replicate > 1:
        volume = dense / shards + experts / layout.expert_shard_degree
        volume *= reduced if layout.fsdp else 1.0
        extra["dp_replicate"] = (2 * ring(layout.dp_replicate) * volume, max(1, -(-int(volume) // DDP_BUCKET_BYTES)))
    return extra


def expert_flops(config: PretrainedConfig, expert_bytes: int, tokens: int) -> float:
    """The routed experts' share of a step's matmul FLOPs (6 per active expert parameter per token: top_k of the
    E experts' `expert_bytes`); nothing for a dense model."""
    moe = moe_dims(config)
    if moe is None or not expert_bytes:
        return 0.0
    return 6.0 * expert_bytes / FP32 * moe.routed_fraction * tokens


def imbalance_flops(
    config: PretrainedConfig, layout: Layout, expert_bytes: int, tokens: int, expert_imbalance: float
) -> float:
    """The experts' FLOPs the busiest ep rank computes beyond an even share: (imbalance - 1) times the routed
    experts' active share of a step (6 per active expert parameter per token); nothing without ep (every rank then
    runs every expert on its own tokens)."""
    moe = moe_dims(config)
    if moe is None or layout.ep == 1:
        return 0.0
    return (expert_imbalance - 1.0) * expert_flops(config, expert_bytes, tokens)


def loss_recompute_flops(config: PretrainedConfig, tokens: int) -> float:
    """The chunked loss's second forward of the output head (trainer.model.loss recomputes each chunk's logits in
    backward): 2 FLOPs per head weight and token."""
    return 2 * tokens * config.hidden_size * config.vocab_size


def fsdp_reduce_scatters(layout: Layout, grad_accum: int, fsdp_grad_sync: str, zero_stage: int = 3) -> int:
    """How often FSDP2 reduce-scatters the gradients in a step: every micro-batch (train.fsdp_grad_sync:
    micro_batch) or once (step, or ZeRO stage 1; a pipeline schedule always reduces once, at the end)."""
    return 1 if reduces_once_per_step(fsdp_grad_sync, zero_stage) or layout.pp > 1 else grad_accum


def fsdp_gathers(layout: Layout, grad_accum: int, zero_stage: int = 3) -> int:
    """How often FSDP2 all-gathers a unit's parameters in a step (train.zero_stage): in forward and again in
    backward of every micro-batch (3), once per micro-batch, kept from forward to backward (2), once per step (1;
    and 2 inside a pipeline schedule, whose stages keep them through every backward). At stage 3 inside a pipeline,
    a forward reshards what the backward before it kept: every backward that follows a forward gathers, and so
    does every forward that does not follow a backward, grad_accum + 1 in all under 1F1B and GPipe (counted on the
    trainer: tests/test_zero_stages.py; so under interleaved 1F1B too, counted once on pp=2 x 2 stages per rank)."""
    if zero_stage == 1 or (zero_stage == 2 and layout.pp > 1):
        return 1
    if zero_stage == 3 and layout.pp > 1:
        return grad_accum + 1
    return grad_accum if zero_stage == 2 else 2 * grad_accum


def fsdp_collectives(
    layout: Layout, grad_accum: int, zero_stage: int, fsdp_grad_sync: str, layers: int
) -> tuple[int, int]:
    """(all-gathers, reduce-scatters) of FSDP2 in a step over `layers` decoder layers and the root, each a unit."""
    units = layers + 1
    gathers = fsdp_gathers(layout, grad_accum, zero_stage) * units - root_regathers(layout, grad_accum, zero_stage)
    return gathers, units * fsdp_reduce_scatters(layout, grad_accum, fsdp_grad_sync, zero_stage)


def root_regathers(layout: Layout, grad_accum: int, zero_stage: int) -> int:
    """The gathers of the root unit (embedding, final norm, head; in a pipeline each stage's own) that
    `fsdp_gathers` counts at ZeRO stage 3 and FSDP2 does not make: it keeps the root gathered from its forward to its
    backward (it would gather it again at once), so the root gathers once per micro-batch, and inside a pipeline,
    whose stages never reshard after backward, once per step."""
    return grad_accum if zero_stage == 3 and layout.shard_degree > 1 else 0


def root_parameter_bytes(config: PretrainedConfig) -> int:
    """fp32 bytes of FSDP2's root unit: the embedding, the final norm and an untied head."""
    tied = getattr(config, "tie_word_embeddings", False)
    return FP32 * (config.vocab_size * config.hidden_size * (1 if tied else 2) + config.hidden_size)


def predict_run(
    experiment: Experiment, config: PretrainedConfig, hardware: Hardware, grad_accum: int, calibration=None
) -> StepEstimate:
    """The step of a resolved experiment (its layout, micro-batch, precision): what approvals price and what a
    finished run's calibration record holds, the same figures the planner ranks the candidate by."""

    train, counts, layout = experiment.train, count_parameters(config), experiment.layout
    packing = experiment.data.packing
    dense_mask = takes_dense_mask(train.attention, hardware.device_type, layout, head_dim(config), packing)
    precision = resolve_precision(train.precision, hardware.device_type)
    shape = StepShape.of(train, train.micro_batch, experiment.data.seq_len, grad_accum,
                         train.activation_checkpointing, precision, dense_mask)  # fmt: skip
    return estimate_step(config, layout, hardware, shape, **parameter_figures(counts), calibration=calibration)


def parameter_figures(counts: dict[str, int]) -> dict[str, int | Float8Weights]:
    """estimate_step's parameter arguments from trainer.model.parameters' counts: FLOPs from the active matmul
    parameters, memory and communication from all of them, the routed experts' bytes apart (ep splits them)."""
    return {
        "matmul_params": counts.get("active_matmul", counts["matmul"]),
        "parameter_bytes": model_bytes(counts),
        "expert_bytes": FP32 * counts.get("routed_experts", 0),
        "cast_params": counts["matmul"],
        "float8": Float8Weights.of(counts),
    }


@dataclass(frozen=True)
class Float8Weights:
    """The weights train.precision fp8 computes in float8 (trainer.model.parameters.float8_eligible), the whole
    model's: their elements, how many layers hold them, and the sums of their input and output widths."""

    elements: int = 0
    linears: int = 0
    inputs: int = 0
    outputs: int = 0

    @classmethod
    def of(cls, counts: dict[str, int]) -> Float8Weights:
        keys = ("float8_linear", "float8_linears", "float8_inputs", "float8_outputs")
        return cls(*(counts.get(key, 0) for key in keys))


def model_bytes(counts: dict[str, int]) -> int:
    """The whole model's parameters in fp32 (master weights), tied ones once; `counts` from
    trainer.model.parameters.count_parameters (a meta-device build, done once by the caller)."""
    return FP32 * counts["total"]


def ep_rank_bytes(layout: Layout, parameter_bytes: int, expert_bytes: int) -> tuple[int, int]:
    """What one rank holds before FSDP2 chunks it, as (its parameters' bytes, its experts' share of them): the dense
    parameters and its E/ep of the routed experts (`expert_bytes` of the model's `parameter_bytes`)."""
    local_experts = expert_bytes // layout.ep
    return parameter_bytes - (expert_bytes - local_experts), local_experts


@dataclass(frozen=True)
class StepShape:
    """One rank's optimizer step as the cost models take it: the batch's split and the experiment's settings,
    resolved once at the door (activation checkpointing as its mode, precision without "auto", the attention's
    mask) rather than by every model that reads them."""

    micro_batch: int
    seq_len: int
    grad_accum: int
    checkpointing: Checkpointing = "none"  # given as train.activation_checkpointing stores it (False, True) too
    precision: str = "fp32"  # fp32 | bf16 | fp8 (resolve_precision's)
    dense_mask: bool = False  # attention reads a dense [seq, seq] mask (trainer.model.attention.takes_dense_mask)
    compiled: bool = False  # each decoder layer compiled (train.compile)
    gns_every: int = 0  # steps between gradient noise scale measurements (train.gns_every; 0: none)
    fsdp_grad_sync: str = "micro_batch"  # when FSDP2 reduce-scatters (train.fsdp_grad_sync)
    expert_imbalance: float = EXPERT_IMBALANCE  # the busiest ep rank's expert rows over the mean (MoE, ep > 1)
    pp_stages_per_rank: int = 1  # pipeline stages per rank (train.pp_stages_per_rank; > 1: interleaved 1F1B)
    zero_stage: int = 3  # what FSDP2 keeps sharded between uses (train.zero_stage)
    float8_recipe: str = "tensorwise"  # under precision fp8: train.float8_recipe
    fsdp_reduce_dtype: str = "fp32"  # what FSDP2 reduces gradients in under bf16 (train.fsdp_reduce_dtype)
    chunked_loss: bool = True  # outside pipelines, the loss chunk by chunk (train.loss chunked, auto unresolved)

    def __post_init__(self) -> None:
        object.__setattr__(self, "checkpointing", checkpointing_mode(self.checkpointing))

    @classmethod
    def of(
        cls, train: TrainSpec, micro_batch: int, seq_len: int, grad_accum: int, checkpointing: Checkpointing,
        precision: str, dense_mask: bool,
    ) -> StepShape:  # fmt: skip
        """The step of a batch split and a train spec's settings (its zero stage resolved): the one place the
        cost models read a TrainSpec's settings into a step, for a run (predict_run) and a candidate alike."""
        return cls(
            micro_batch, seq_len, grad_accum, checkpointing, precision, dense_mask, train.compile, train.gns_every,
            train.fsdp_grad_sync, pp_stages_per_rank=train.pp_stages_per_rank,
            zero_stage=resolve_zero_stage(train.zero_stage), float8_recipe=train.float8_recipe,
            fsdp_reduce_dtype=train.fsdp_reduce_dtype, chunked_loss=train.loss != "whole",
        )  # fmt: skip


def estimate_step(
    config: PretrainedConfig,
    layout: Layout,
    hardware: Hardware,
    shape: StepShape,
    *,
    matmul_params: int,
    parameter_bytes: int,
    calibration: Calibration | None = None,
    figures: Figures | None = None,
    expert_bytes: int = 0,
    cast_params: int | None = None,
    float8: Float8Weights = Float8Weights(),
) -> StepEstimate:
    """One optimizer step of one rank (see the module docstring). `figures`: hardware_figures(hardware), where the
    caller already has them (a plan prices thousands of candidates on the same hardware). `matmul_params`: those a
    token runs through (an MoE model's active ones); `expert_bytes`: the routed experts' share of `parameter_bytes`,
    which ep splits; `cast_params`: the matmul weights autocast copies (all of them; default `matmul_params`);
    `float8`: the weights that compute in float8 under precision fp8 (ignored otherwise)."""
    micro_batch, seq_len, grad_accum = shape.micro_batch, shape.seq_len, shape.grad_accum
    held, local_experts = ep_rank_bytes(layout, parameter_bytes, expert_bytes)
    cast_params = (matmul_params if cast_params is None else cast_params) - (parameter_bytes - held) // FP32
    parameter_bytes = held
    mode, precision, dense_mask, compiled = shape.checkpointing, shape.precision, shape.dense_mask, shape.compiled
    gns_every, fsdp_grad_sync = shape.gns_every, shape.fsdp_grad_sync
    tokens_per_rank_step = micro_batch * grad_accum * seq_len  # before cp splits the sequence
    width = config.num_attention_heads * head_dim(config)
    pairs = micro_batch * grad_accum * seq_len * (seq_len + 1) // 2  # full rows; packing only lowers this
    flops = step_flops(matmul_params, width, config.num_hidden_layers, tokens_per_rank_step, pairs)
    figures = figures or hardware_figures(hardware)
    if layout.pp == 1 and shape.chunked_loss:
        flops += loss_recompute_flops(config, tokens_per_rank_step)
    # Every tp rank runs its experts whole on the whole sequence (trainer.parallel.parallelize.apply_experts): their
    # FLOPs, selective checkpointing's rerun of them and the busiest ep rank's extra ones split over cp and pp only.
    experts = expert_flops(config, expert_bytes, tokens_per_rank_step)
    rerun = 0.0
    if mode == "selective":  # only the matmuls whose outputs it does not keep
        rerun, experts_rerun = selective_recompute_flops(config, tokens_per_rank_step)
        flops, experts = flops + rerun + experts_rerun, experts + experts_rerun
    whole = experts + imbalance_flops(config, layout, expert_bytes, tokens_per_rank_step, shape.expert_imbalance)
    flops = (flops - experts) / layout.tp + whole
    # Under fp8 the float8 layers' matmuls (selective's reruns are among them) run at the float8 rate, the rest
    # (attention, the output head, experts) at bf16's.
    fast = float8_flops(float8, tokens_per_rank_step, rerun) / layout.tp if precision == "fp8" else 0.0
    rate = figures.compute_flops(hardware, "bf16" if precision == "fp8" else precision)
    fast_rate = figures.compute_flops(hardware, "fp8") * FLOAT8_MATMUL_SHARE[shape.float8_recipe]
    matmul = ((flops - fast) / rate + (fast / fast_rate if fast else 0.0)) / (layout.cp * layout.pp)
    if mode == "full":  # the forward pass runs twice: 4 passes' worth instead of 3
        matmul *= 4 / 3
    converted = float8 if precision == "fp8" else Float8Weights()
    if not layout.fsdp:  # autocast's bf16 copies are not made of float8 weights: torchao casts fp32 to float8
        cast_params -= converted.elements
    traffic = memory_traffic(
        config, layout, cast_params, parameter_bytes, micro_batch, seq_len, grad_accum, mode, precision,
        dense_mask, compiled, fsdp_grad_sync, local_experts, shape.zero_stage, shape.chunked_loss,
    )  # fmt: skip
    local_tokens = micro_batch * seq_len // layout.cp
    traffic += grad_accum * float8_cast_bytes(converted, layout, local_tokens, compiled, shape.float8_recipe)
    memory = traffic / figures.memory_bandwidth(hardware)
    launches = grad_accum * operations_per_micro_batch(config, layout, mode, compiled)
    launches += grad_accum * float8_cast_operations(converted, layout, shape.float8_recipe, compiled)
    launch = launches * figures.op_overhead(hardware)
    dispatch = grad_accum * dispatch_per_micro_batch(config, layout, mode, figures, compiled)
    if hardware.device_type == "cpu":
        compute = matmul + memory + launch
    else:  # host time behind queued kernels, dispatch included
        compute, dispatch = max(matmul + memory, launch + dispatch), 0.0
    if layout.pp > 1:  # the pipeline bubble: (pp - 1) idle slots of one stage's micro-batch
        # 1F1B's slots are a whole micro-batch on a rank's layers; interleaved 1F1B's are one of its v stages, so its
        # bubble is v times smaller, (pp - 1) / (v x micro-batches) (Narayanan et al. 2021, "Efficient
        # Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section 2.2.2).
        bubble = 1 + (layout.pp - 1) / (grad_accum * shape.pp_stages_per_rank)
        compute, dispatch = compute * bubble, dispatch * bubble
    sent = communication_bytes(
        config, layout, parameter_bytes, micro_batch, seq_len, grad_accum, mode, precision, fsdp_grad_sync,
        shape.expert_imbalance, local_experts, shape.zero_stage, shape.fsdp_reduce_dtype,
    )  # fmt: skip
    links = dimension_links(layout, hardware)
    seconds = {d: figures.transfer_s(links[d], COLLECTIVE_OF[d], *sent[d]) for d in COMM_DIMS}
    # On a GPU data-parallel traffic overlaps the backward pass (about two thirds of compute) and the rest shows;
    # on a CPU the collectives run on the cores that compute, so nothing overlaps.
    hidden = 2 / 3 * compute if hardware.device_type == "cuda" else 0.0
    # What is sent once per step (a reduction after the last micro-batch, stage 1's gathers before the first, the
    # all-reduce across replicas) can hide only behind that one micro-batch's compute
    bytes_share, count_share = fsdp_once_per_step_shares(layout, shape)
    once = seconds["dp_replicate"] + figures.transfer_s(
        links["dp_shard"],
        COLLECTIVE_OF["dp_shard"],
        sent["dp_shard"][0] * bytes_share,
        sent["dp_shard"][1] * count_share,
    )
    every = seconds["dp_shard"] + seconds["dp_replicate"] - once
    data_parallel = exposed_data_parallel_s(every, once, hidden, grad_accum)
    comm = seconds["tp"] + seconds["cp"] + seconds["pp"] + seconds["ep"] + data_parallel
    # The noise scale's extra reduction: waited for (its norm is read at once), one step in gns_every.
    reduced = reduced_share(precision, shape.fsdp_reduce_dtype)
    noise = noise_scale_bytes(config, layout, parameter_bytes, grad_accum, gns_every, local_experts, reduced)
    for d, (noise_bytes, noise_collectives) in noise.items():
        comm += figures.transfer_s(links[d], COLLECTIVE_OF[d], noise_bytes, noise_collectives) / gns_every
        sent[d] = (sent[d][0] + noise_bytes / gns_every, sent[d][1])
    collectives = sum(sent[d][1] for d in ("dp_shard", "tp", "cp", "ep"))
    calibration = calibration or Calibration()
    step = calibration.predict(compute, comm, collectives, grad_accum, dispatch)
    global_tokens = tokens_per_rank_step * layout.dp_degree
    sent_bytes = {d: v[0] for d, v in sent.items()}
    return StepEstimate(compute, comm, sent_bytes, collectives, grad_accum, dispatch, step, global_tokens / step,
                        matmul, memory, launch)  # fmt: skip


def fsdp_once_per_step_shares(layout: Layout, shape: StepShape) -> tuple[float, float]:
    """The shares of FSDP2's traffic in a step (of its bytes, of its collectives) sent once per step rather than
    every micro-batch: its reductions where it reduces once per step (`fsdp_reduce_scatters`), its gathers where it
    gathers once (`fsdp_gathers`). By the bytes of each kind per unit (bf16 gathers under bf16, reductions in the
    reduce dtype); the root's regathers left out, a few collectives at stage 3."""
    if layout.shard_degree == 1:
        return 0.0, 0.0
    gathers = fsdp_gathers(layout, shape.grad_accum, shape.zero_stage)
    reductions = fsdp_reduce_scatters(layout, shape.grad_accum, shape.fsdp_grad_sync, shape.zero_stage)
    half = half_precision(shape.precision)
    gathered, reduced = (0.5 if half else 1.0), reduced_share(shape.precision, shape.fsdp_reduce_dtype)
    once_bytes = gathered * (gathers == 1) + reduced * (reductions == 1)
    once_count = (gathers == 1) + (reductions == 1)
    return once_bytes / (gathers * gathered + reductions * reduced), once_count / (gathers + reductions)


def exposed_data_parallel_s(every_s: float, once_s: float, hidden_s: float, grad_accum: int) -> float:
    """Seconds of data-parallel traffic the step waits for: each micro-batch hides its share of what is sent every
    micro-batch (`every_s` in all) behind its share of `hidden_s`; the last one also what is sent once (`once_s`)."""
    per_micro_batch, hidden = every_s / grad_accum, hidden_s / grad_accum
    earlier = (grad_accum - 1) * max(0.0, per_micro_batch - hidden)
    return earlier + max(0.0, per_micro_batch + once_s - hidden)


def memory_traffic(
    config: PretrainedConfig,
    layout: Layout,
    matmul_params: int,
    parameter_bytes: int,
    micro_batch: int,
    seq_len: int,
    grad_accum: int,
    checkpointing: Checkpointing,
    precision: str,
    dense_mask: bool,
    compiled: bool = False,
    fsdp_grad_sync: str = "micro_batch",
    expert_bytes: int = 0,
    zero_stage: int = 3,
    chunked_loss: bool = True,
) -> float:
    """Bytes one rank's memory-bound work moves in one optimizer step (see the module docstring). `expert_bytes`:
    this rank's experts' share of `parameter_bytes` (and, as elements, of `matmul_params`), whole on every tp rank;
    `chunked_loss`: StepShape's."""
    heads, width = config.num_attention_heads, 2 if half_precision(precision) else FP32
    tp, layers = layout.tp, -(-config.num_hidden_layers // layout.pp)
    tokens = micro_batch * seq_len // layout.cp  # per micro-batch on this rank
    forward, backward = layer_bytes(config, layout, precision, compiled)
    # Full and selective both rerun every elementwise operation of the forward (compiled: its fused kernels); without
    # them an eager layer reruns its norms and SiLU.
    recomputed = forward if checkpointing != "none" else 0 if compiled else rerun_bytes(config, layout, precision)
    per_micro_batch = tokens * layers * (forward + backward + recomputed)
    per_micro_batch += loss_bytes(config, layout, tokens, precision, loss_path(layout, chunked_loss, compiled))
    if dense_mask:  # built as a bias in every layer, then read once per head in forward and twice in backward
        entries = tokens * seq_len  # each local query's row spans every key of its row
        attention_passes = 3 + (1 if checkpointing == "full" else 0)  # selective keeps attention's output: not rerun
        per_micro_batch += layers * entries * ((1 + width) + heads / tp * width * attention_passes)
    dense, experts = (share / FP32 for share in fsdp_shares(layout, parameter_bytes, expert_bytes))
    stage_elements = dense + experts
    local_elements = dense / layout.shard_degree + experts / layout.expert_shard_degree
    if half_precision(precision) and not layout.fsdp:  # autocast casts every matmul weight to bf16 in every micro-batch
        cast = (matmul_params - expert_bytes / FP32) / layout.pp / tp + expert_bytes / FP32 / layout.pp
        per_micro_batch += cast * (FP32 + 2)
    # FSDP writes the gathered parameters, in forward and again in backward (fewer below ZeRO stage 3)
    gathered = width * (dense * (layout.shard_degree > 1) + experts * (layout.expert_shard_degree > 1))
    gathered *= fsdp_gathers(layout, grad_accum, zero_stage)
    root_share = root_parameter_bytes(config) / FP32 / tp / layout.pp  # as fsdp_shares counts every parameter
    gathered -= width * root_regathers(layout, grad_accum, zero_stage) * root_share
    # Accumulating adds each micro-batch's gradient to the shard, or to the unsharded one FSDP2 keeps without a
    # reduce-scatter per micro-batch.
    reductions = grad_accum
    if layout.shard_degree > 1:
        reductions = fsdp_reduce_scatters(layout, grad_accum, fsdp_grad_sync, zero_stage)
    accumulated = local_elements if reductions == grad_accum else stage_elements
    optimizer = local_elements * ADAMW_BYTES + accumulated * ACCUMULATE_BYTES * (grad_accum - 1)
    return grad_accum * per_micro_batch + gathered + optimizer


def loss_path(layout: Layout, chunked_loss: bool, compiled: bool) -> str:
    """How the loss runs (a LOSS_BYTES key): chunked (train.loss chunked, outside pipelines, whose schedule takes
    the whole logits), always eager (trainer.model.loss keeps it out of any graph); whole, fused into the compiled
    step where train.compile makes each micro-batch one graph, else eager."""
    if chunked_loss and layout.pp == 1:
        return "chunked"
    return "whole_compiled" if compiled and compiles_whole_step(layout) else "whole"


def loss_bytes(config: PretrainedConfig, layout: Layout, tokens: int, precision: str, path: str) -> float:
    """Bytes the loss of one micro-batch of `tokens` moves on this rank: LOSS_BYTES per element of its logits (the
    rank's vocabulary share under tp); chunked, the head's gradient read and written once per chunk as well."""
    columns, half = logit_columns(config, layout), half_precision(precision)
    moved = tokens * columns * LOSS_BYTES[path, half]
    if path == "chunked":
        chunks = -(-tokens // chunk_tokens(columns))
        moved += chunks * 2 * columns * config.hidden_size * (2 if half else FP32)
    return moved


def float8_flops(float8: Float8Weights, tokens: int, selective_rerun: float = 0.0) -> float:
    """The matmul FLOPs of a step of `tokens` tokens that run in float8 under fp8: 6 per float8 weight and token,
    and selective checkpointing's reruns of the k, o and up projections (`selective_rerun`, float8 layers
    wherever the model has any)."""
    if not float8.elements:
        return 0.0
    return 6.0 * float8.elements * tokens + selective_rerun


def float8_cast_bytes(
    float8: Float8Weights, layout: Layout, tokens: int, compiled: bool, recipe: str = "tensorwise"
) -> float:
    """Bytes the float8 casts of one micro-batch of `tokens` local tokens move on one rank: every input, weight
    and output gradient of a float8 layer cast twice (`FLOAT8_CAST_BYTES` per element; 0 without float8 layers);
    under rowwise also the rescaling of the backward matmuls' outputs (`FLOAT8_RESCALE_BYTES`)."""
    elements = tokens * (float8.inputs + float8.outputs) + float8.elements
    moved = FLOAT8_CASTS_PER_OPERAND * elements * FLOAT8_CAST_BYTES[compiled]
    if recipe == "rowwise":
        moved += (tokens * float8.inputs + float8.elements) * FLOAT8_RESCALE_BYTES
    return moved / (layout.tp * layout.pp)


def float8_cast_operations(float8: Float8Weights, layout: Layout, recipe: str, compiled: bool) -> int:
    """Operations the float8 casts of one micro-batch launch on one rank: 3 operands cast twice per float8 layer."""
    casts = 3 * FLOAT8_CASTS_PER_OPERAND * -(-float8.linears // layout.pp)
    return casts * FLOAT8_CAST_OPS[recipe, compiled]


def layer_regime(precision: str, layout: Layout) -> str:
    """How a decoder layer computes (`LAYER_BYTES`): bf16 is FSDP2's mixed precision where FSDP2 reduces the
    gradients and autocast elsewhere (trainer.parallel.data_parallel.fsdp_mixed_precision)."""
    if not half_precision(precision):
        return "fp32"
    return "bf16" if layout.fsdp else "autocast"


def activation_width(precision: str, layout: Layout) -> int:
    """Bytes per element of the activations between layers and of their gradients: bf16 only where the parameters
    are (FSDP2's mixed precision); under autocast the residual stream, rotary's keys and every input gradient stay
    fp32. What pipeline stages send, context parallelism gathers and tensor parallelism reduces in backward
    (tests/test_communication_dtypes.py)."""
    return 2 if layer_regime(precision, layout) == "bf16" else FP32


def layer_bytes(config: PretrainedConfig, layout: Layout, precision: str, compiled: bool) -> tuple[float, float]:
    """Bytes one decoder layer's memory-bound kernels move per token on one rank: (forward, backward)."""
    forward, backward = LAYER_BYTES[layer_regime(precision, layout), compiled]
    widths = _layer_widths(config, layout)
    return _dot(forward, widths), _dot(backward, widths)


def _layer_widths(config: PretrainedConfig, layout: Layout) -> tuple[float, ...]:
    """The widths LAYER_BYTES' coefficients multiply, on one rank: h, q, kv, i, head_dim, 1."""
    d = head_dim(config)
    q = config.num_attention_heads * d
    return (config.hidden_size, q / layout.tp, q * _kv_ratio(config) / layout.tp,
            mlp_width(config, layout.tp), d, 1)  # fmt: skip


def rerun_bytes(config: PretrainedConfig, layout: Layout, precision: str) -> float:
    """Bytes per token that an eager layer's rerun of its norms and SiLU moves in backward (RECOMPUTED_BYTES)."""
    return _dot(RECOMPUTED_BYTES[layer_regime(precision, layout)], _layer_widths(config, layout))


def mlp_width(config: PretrainedConfig, tp: int) -> float:
    """The intermediate width one token's MLP runs over on a rank, per layer: the dense MLP's over tp; in an MoE
    layer its top_k experts' and any shared expert's (experts are not split by tp), averaged over the layers."""
    moe = moe_dims(config)
    if moe is None:
        return config.intermediate_size / tp
    return _mean_mlp(moe, config, moe.top_k * moe.expert_intermediate + moe.shared_intermediate, tp)


def _mean_mlp(moe: MoeDims, config: PretrainedConfig, sparse: float, tp: int) -> float:
    layers = config.num_hidden_layers
    return (moe.moe_layers * sparse + (layers - moe.moe_layers) * moe.dense_intermediate / tp) / layers


def operations_per_micro_batch(
    config: PretrainedConfig, layout: Layout, checkpointing: Checkpointing, compiled: bool = False
) -> int:
    """Operations one forward and backward pass launches on one rank (`OPS_PER_LAYER`, or
    `COMPILED_OPS_PER_LAYER` where each layer is compiled)."""
    layers = -(-config.num_hidden_layers // layout.pp)
    if compiled:
        forward, backward = COMPILED_OPS_PER_LAYER, COMPILED_BACKWARD_OPS_PER_LAYER
    else:
        forward, backward = OPS_PER_LAYER, 2 * OPS_PER_LAYER
    recomputed = {"none": 0 if compiled else RECOMPUTED_OPS_PER_LAYER, "selective": forward - SELECTIVE_KEPT_OPS,
                  "full": forward}  # fmt: skip
    return layers * (forward + backward + recomputed[checkpointing]) + OPS_OUTSIDE_LAYERS


def dispatch_per_micro_batch(
    config: PretrainedConfig, layout: Layout, checkpointing: Checkpointing, figures: Figures, compiled: bool = False
) -> float:
    """Seconds one forward and backward pass spends in Python dispatch on one rank (see the module docstring)."""
    layers = -(-config.num_hidden_layers // layout.pp)
    dtensor_op_s, selective_op_s = figures.dispatch_overheads()
    seconds = 0.0
    if layout.tp > 1:
        rerun = checkpointing == "none" and not compiled  # as in operations_per_micro_batch
        forward, backward = RERUN_DTENSOR_OPS_PER_LAYER if rerun else DTENSOR_OPS_PER_LAYER
        outside = RERUN_DTENSOR_OPS_OUTSIDE_LAYERS if rerun else DTENSOR_OPS_OUTSIDE_LAYERS
        forward_passes = 1 if checkpointing == "none" else 2  # recomputation dispatches the forward's operations again
        seconds += (layers * (forward * forward_passes + backward) + sum(outside)) * dtensor_op_s
    if checkpointing == "selective":
        seconds += layers * SELECTIVE_OPS_PER_LAYER * selective_op_s
    return seconds


def selective_recompute_flops(config: PretrainedConfig, tokens: int) -> tuple[float, float]:
    """FLOPs selective checkpointing adds to a step of `tokens` tokens: the k, o and up projections it recomputes
    (2 per weight per token); attention and the other matmuls keep their outputs. Returned as (the rest, the routed
    experts' up projections): tp splits the first, not the second (experts stay whole on every tp rank)."""
    h, i = config.hidden_size, getattr(config, "intermediate_size", None) or 4 * config.hidden_size
    moe, routed = moe_dims(config), 0.0
    if moe is not None:  # up: each token's top_k experts' (one matmul each in the loop) and any shared expert's
        i = _mean_mlp(moe, config, moe.shared_intermediate, 1)
        routed = 2.0 * tokens * moe.moe_layers * h * moe.top_k * moe.expert_intermediate
    q = config.num_attention_heads * head_dim(config)
    kv = q * _kv_ratio(config)
    return 2.0 * tokens * config.num_hidden_layers * (h * kv + q * h + h * i), routed


def _dot(coefficients: tuple, widths: tuple) -> float:
    return sum(c * w for c, w in zip(coefficients, widths, strict=True))


def _kv_ratio(config: PretrainedConfig) -> float:
    kv = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return kv / config.num_attention_heads
