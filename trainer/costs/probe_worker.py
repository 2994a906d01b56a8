"""The processes of `meshpilot probe` (trainer.costs.probe): torchrun's agent and its ranks, which measure.

    python -m trainer.costs.probe_worker agent TORCHRUN_ARGS -m trainer.costs.probe_worker rank OUT SETTINGS_JSON

Both are tied to the process that started them (trainer.host.lifeline): the agent to `meshpilot probe`, each rank to
the agent. Every rank measures at once, as in training (on CPU they share the cores); the first rank of each node
prints one line per finished measurement (the launcher's progress bar counts them) and writes its node's results
to OUT.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from trainer.costs.probe import COLLECTIVES, PROGRESS, ProbeSettings, bytes_sent
from trainer.costs.throughput import RERUN_DTENSOR_OPS_PER_LAYER, SELECTIVE_OPS_PER_LAYER
from trainer.host.lifeline import tie_to_parent, tied_env
from trainer.results.contracts import write_json

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
SLOW_S = 2.0  # a matmul predicted to take longer is skipped (bf16 on a CPU without bf16 instructions: seconds)
COMPUTE_BUDGET_S = 0.5  # timed repeats of one compute measurement stop after this long
# Collectives are timed this many times more often than compute: figures read their fastest repeat, and on a busy
# machine a run of several repeats can all be slowed (a rank waiting out another process's time slice).
LINK_REPEATS = 3


def main(out: str, settings: ProbeSettings) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    device = _device(settings, local_rank)
    if device.type == "cuda":  # bound to its device: NCCL's barriers know which GPU to use
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    report = _reporter(local_rank == 0)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    compute = measure_compute(settings, device, sync, report)
    dist.barrier()
    links = {name: measure_link(group, settings, device, sync, report) for name, group in link_groups(settings)}
    if local_rank == 0:
        write_json(Path(out), {"compute": compute, "links": links})
    dist.barrier()  # nobody leaves while a peer still needs the connections
    dist.destroy_process_group()


def _device(settings: ProbeSettings, local_rank: int) -> torch.device:
    if settings.device_type == "cuda":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _reporter(enabled: bool) -> Callable[[str], None]:
    def report(label: str) -> None:
        if enabled:
            print(f"{PROGRESS} {label}", flush=True)

    return report


def timings(
    run: Callable[[], object], sync: Callable[[], None], repeats: int, budget_s: float = math.inf
) -> list[float]:
    """The times of `repeats` timed calls of `run` after one warm-up call (allocation, kernel choice, connection
    set-up), fewer once `budget_s` is spent (at least one)."""
    run()
    sync()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < repeats and (not times or time.perf_counter() < deadline):
        started = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - started)
    return times


def median_seconds(
    run: Callable[[], object], sync: Callable[[], None], repeats: int, budget_s: float = math.inf
) -> float:
    """The median of `timings`."""
    return statistics.median(timings(run, sync, repeats, budget_s))


def measure_compute(settings: ProbeSettings, device: torch.device, sync, report) -> dict:
    """Matmul rate per dtype and size, memory bandwidth, the fixed cost of one tiny operation and what DTensor's
    and selective checkpointing's dispatch add to it, on this rank."""
    matmul = {}
    for name in settings.dtypes:
        matmul[name] = []
        for size in settings.matmul_sizes:
            last = matmul[name][-1] if matmul[name] else None
            if last and last["seconds"] * (size / last["size"]) ** 3 > SLOW_S:  # a slow dtype's larger sizes
                report(f"matmul {name} {size} (skipped: too slow)")
                continue
            a, b = (torch.randn(size, size, device=device).to(DTYPES[name]) for _ in range(2))
            seconds = median_seconds(lambda a=a, b=b: a @ b, sync, settings.repeats, COMPUTE_BUDGET_S)
            matmul[name].append({"size": size, "seconds": seconds, "flops_per_s": 2 * size**3 / seconds})
            report(f"matmul {name} {size}")
    source = torch.empty(settings.copy_bytes // 4, device=device)
    target = torch.empty_like(source)
    copy_s = median_seconds(lambda: target.copy_(source), sync, settings.repeats, COMPUTE_BUDGET_S)
    report("memory bandwidth")
    tiny = torch.zeros(1, device=device)
    many_s = median_seconds(lambda: [tiny.add_(1) for _ in range(100)], sync, settings.repeats, COMPUTE_BUDGET_S)
    report("per-operation overhead")
    dtensor_op_s = _dtensor_op_s(device, sync, settings)
    report("DTensor dispatch")
    selective_op_s = _selective_op_s(device, sync, settings)
    report("selective checkpointing dispatch")
    return {
        "matmul": matmul,
        "memory_bandwidth": 2 * settings.copy_bytes / copy_s,  # read and written
        "op_overhead_s": many_s / 100,
        "dtensor_op_s": dtensor_op_s,
        "selective_op_s": selective_op_s,
    }


# One decoder layer of transformers' Llama so small that its work is nothing next to its operations' dispatch.
TINY_LAYER = {"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2}  # fmt: skip


def _tiny_step(model: torch.nn.Module, device: torch.device) -> Callable[[], None]:
    ids = torch.arange(16, device=device).view(2, 8)
    return lambda: model(input_ids=ids, use_cache=False).logits.sum().backward()


def _tiny_llama(device: torch.device, checkpointing: str = "none") -> torch.nn.Module:
    # Imported here: torchrun's agent runs this module too, and only the ranks build a model (seconds of imports).
    from transformers import AutoConfig

    from trainer.model.build import build_model  # (the same reason)
    from trainer.parallel.activation_checkpointing import enable_activation_checkpointing

    model = build_model(AutoConfig.for_model(**TINY_LAYER), None, seed=0, device=device.type)
    enable_activation_checkpointing(model, checkpointing)
    return model


def _dtensor_op_s(device: torch.device, sync, settings: ProbeSettings) -> float:
    """Seconds tensor parallelism adds to each of its DTensor operations (trainer.costs.throughput's
    RERUN_DTENSOR_OPS_PER_LAYER: the tiny eager layer reruns its norms): the tiny layer tensor-parallel over a mesh
    of this rank alone (so that nothing communicates), forward and backward, against the plain layer. Collective:
    every rank creates every group."""
    # a device mesh only for the DTensor measurement
    from torch.distributed.device_mesh import DeviceMesh

    # Imported here: as in _tiny_llama, the modeling code for the ranks alone.
    from trainer.parallel.tensor_parallel import apply_tensor_parallel

    alone = [dist.new_group([rank]) for rank in range(dist.get_world_size())][dist.get_rank()]
    parallel = _tiny_llama(device)
    apply_tensor_parallel(parallel, DeviceMesh.from_group(alone, device.type))
    plain_s = median_seconds(_tiny_step(_tiny_llama(device), device), sync, settings.repeats, COMPUTE_BUDGET_S)
    parallel_s = median_seconds(_tiny_step(parallel, device), sync, settings.repeats, COMPUTE_BUDGET_S)
    return max(parallel_s - plain_s, 0.0) / sum(RERUN_DTENSOR_OPS_PER_LAYER)


def _selective_op_s(device: torch.device, sync, settings: ProbeSettings) -> float:
    """Seconds selective checkpointing's policy adds to each operation that passes through its dispatch modes
    (trainer.costs.throughput's SELECTIVE_OPS_PER_LAYER): the tiny layer checkpointed selectively, forward and backward,
    against full checkpointing, which recomputes as much (and the few operations selective keeps)."""
    full_s = median_seconds(_tiny_step(_tiny_llama(device, "full"), device), sync, settings.repeats, COMPUTE_BUDGET_S)
    selective = _tiny_step(_tiny_llama(device, "selective"), device)
    selective_s = median_seconds(selective, sync, settings.repeats, COMPUTE_BUDGET_S)
    return max(selective_s - full_s, 0.0) / SELECTIVE_OPS_PER_LAYER


def link_groups(settings: ProbeSettings) -> list[tuple[str, dist.ProcessGroup | None]]:
    """The groups whose collectives cross each link: a node's processes, and one process per node across nodes
    (torchrun numbers the ranks node by node). Every rank creates every group, in the same order."""
    n, nodes = settings.nproc, settings.nnodes
    if nodes == 1:
        return [("intra_node", None)] if n > 1 else []
    node, local = dist.get_rank() // n, dist.get_rank() % n
    intra = [dist.new_group(list(range(k * n, (k + 1) * n))) for k in range(nodes)] if n > 1 else []
    across = [dist.new_group(list(range(k, n * nodes, n))) for k in range(n)]
    return ([("intra_node", intra[node])] if intra else []) + [("network", across[local])]


def measure_link(group, settings: ProbeSettings, device: torch.device, sync, report) -> dict:
    """Each collective's median and fastest time at each message size, in this rank's group (all ranks in step:
    fixed repeats, no time budget, which would let them call different numbers of collectives)."""
    size = dist.get_world_size(group)
    found = {}
    for collective in COLLECTIVES:
        found[collective] = []
        for message in settings.message_bytes:
            run = _collective(collective, group, size, message, device)
            dist.barrier(group)
            times = timings(run, sync, LINK_REPEATS * settings.repeats)
            seconds, fastest = statistics.median(times), min(times)
            sent = bytes_sent(collective, message, size)
            found[collective].append({"bytes": message, "seconds": seconds, "fastest_s": fastest,
                                      "bus_bandwidth": sent / seconds})  # fmt: skip
            report(f"{collective} {message} B")
    return found


def _collective(name: str, group, size: int, message: int, device: torch.device) -> Callable[[], object]:
    """One call of collective `name` on `message` bytes (fp32): the all-reduced tensor, the gathered output, the
    reduce-scattered input, the tensor split over the ranks by an all-to-all, the tensor each rank sends to the next
    (and receives from the one before)."""
    elements = max(size, message // 4 // size * size)  # divisible by the group's size
    whole, part = torch.ones(elements, device=device), torch.ones(elements // size, device=device)
    if name == "all_reduce":
        return lambda: dist.all_reduce(whole, group=group)
    if name == "all_gather":
        return lambda: dist.all_gather_into_tensor(whole, part, group=group)
    if name == "reduce_scatter":
        return lambda: dist.reduce_scatter_tensor(part, whole, group=group)
    if name == "all_to_all":  # even splits: each rank sends 1/size of its tensor to every rank
        received = torch.empty_like(whole)
        return lambda: dist.all_to_all_single(received, whole, group=group)
    me = dist.get_rank(group)
    after, before = (dist.get_global_rank(group, (me + k) % size) if group else (me + k) % size for k in (1, -1))
    received = torch.empty_like(whole)
    ops = lambda: [dist.P2POp(dist.isend, whole, after), dist.P2POp(dist.irecv, received, before)]  # noqa: E731
    return lambda: [request.wait() for request in dist.batch_isend_irecv(ops())]


if __name__ == "__main__":
    tie_to_parent()
    if sys.argv[1] == "agent":  # torchrun's agent: its ranks (this module again) are tied to it in turn
        from torch.distributed.run import main as torchrun

        os.environ.update(tied_env({}))
        torchrun(sys.argv[2:])
    else:
        main(sys.argv[2], ProbeSettings.from_json(sys.argv[3]))
