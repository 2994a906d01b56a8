"""What makes the trainer honest on a GPU, checked on the CPU: the planner keeps the CUDA runtime's headroom and
sizes devices as torch reports them, checkpoints wait on their own group with a longer timeout, the measured CUDA
peak adds up, evaluation picks bf16 on CUDA only, batches are read ahead, the memory snapshot covers untimed steps
only, and fused AdamW with the one-reduction gradient norm holds under pipeline x tensor parallelism."""

from __future__ import annotations

import os
import sys
import threading
import types
from datetime import timedelta

import numpy as np
import pytest
import torch
import torch.distributed as dist
from support import TINY_MODEL, train, write_experiment
from transformers import AutoConfig

from evalsuite.models import eval_dtype
from trainer.config import TrainSpec, load_experiment
from trainer.costs.memory_model import CUDA_RUNTIME, MemoryPlan, nccl_communicators, predict_memory
from trainer.data.rows import BatchPlan, BatchPrefetcher, RowSource, TokenizedCorpus
from trainer.hardware import GPUS, gpu_preset, planned_hardware
from trainer.host.environment import device_name, process_env
from trainer.layout import Layout
from trainer.rank import checkpoint
from trainer.rank.loop import collective_timeouts, init_worker, set_collective_timeout
from trainer.rank.memory import cuda_peak, process_device_used
from trainer.results.rundir import untimed_steps

GiB, MiB = 1024**3, 1024**2


# --- device sizes and the planner's headroom -----------------------------------------------------------------------


def test_plan_default_device_memory_is_what_torch_reports_for_an_h100():
    def memory(device_mem=None, gpu=None, configured=None):
        return planned_hardware("cuda", 8, 1, gpu, None, device_mem, configured)[1]

    # torch.cuda.get_device_properties(0).total_memory on an "NVIDIA H100 80GB HBM3", measured: 81079 MiB.
    assert memory() == 85_017_493_504
    assert GPUS["h100-sxm"].name == "NVIDIA H100 80GB HBM3" == planned_hardware("cuda", 8, 1)[0].device_name
    # --device-mem first, then --gpu, then the experiment's hardware.device_mem.
    h200 = gpu_preset("h200")
    assert memory("40GiB", "h200", "1GiB") == 40 * GiB
    assert memory(None, "h200", "1GiB") == h200.memory_bytes == 143155 * MiB
    # torch's total_memory on an H200 (SXM), measured on one (bench/results/gpu_h200_mfu.json), in whole MiB.
    assert h200.memory_bytes <= 150_109_880_320 < h200.memory_bytes + MiB
    assert memory(None, None, "1GiB") == GiB
    # A CPU plan is for this machine's own CPU, whose probe and calibration it then finds.
    assert planned_hardware("cpu", 2, 1)[0].device_name == device_name("cpu")


def test_nccl_communicators_per_layout():
    assert nccl_communicators(Layout(dp_replicate=1)) == 0  # one process: no NCCL
    assert nccl_communicators(Layout(dp_replicate=1, dp_shard=8)) == 2  # the world's and FSDP's
    assert nccl_communicators(Layout(dp_replicate=1, dp_shard=2, tp=2, pp=2)) == 4
    assert nccl_communicators(Layout(dp_replicate=1, dp_shard=2, cp=2)) == 4  # dp_shard, cp and their flattening


def test_the_cuda_prediction_adds_the_runtime_and_the_cpu_one_does_not():
    config = AutoConfig.for_model(**TINY_MODEL)
    layout = Layout(dp_replicate=1, dp_shard=2)
    cpu, cuda = (MemoryPlan(2, 64, "fp32", False, TrainSpec(), device_type=d) for d in ("cpu", "cuda"))
    on_cpu, on_cuda = predict_memory(config, layout, cpu)[0], predict_memory(config, layout, cuda)[0]
    assert "cuda_runtime" not in on_cpu
    tensors = on_cpu["peak"]
    expected = CUDA_RUNTIME.context + 2 * CUDA_RUNTIME.nccl_per_communicator + CUDA_RUNTIME.workspaces
    assert on_cuda["cuda_runtime"] == expected + int(CUDA_RUNTIME.allocator_slack * tensors)
    assert on_cuda["peak"] == tensors + on_cuda["cuda_runtime"]


def test_plan_drops_a_layout_that_fits_only_without_the_runtime_reserve(tmp_path, monkeypatch):
    from trainer.costs.planner import plan
    from trainer.hardware import Hardware

    monkeypatch.setenv("MESHPILOT_CACHE", str(tmp_path))  # no calibration records
    experiment = load_experiment(write_experiment(tmp_path, {"train": {"precision": "fp32"}}))
    config = AutoConfig.for_model(**TINY_MODEL)
    hardware = Hardware("cuda", "NVIDIA H100 80GB HBM3", devices_per_node=1)
    roomy = [c for c in plan(experiment, config, hardware, 100 * GiB, 64) if c.dropped is None]
    smallest = min(roomy, key=lambda c: c.memory["peak"])
    runtime = smallest.memory["cuda_runtime"]
    # Room for every candidate's tensors, not for the smallest one's tensors and its CUDA runtime.
    device_mem = smallest.memory["peak"] - runtime // 2
    assert max(c.memory["peak"] - c.memory["cuda_runtime"] for c in roomy) < device_mem
    tight = plan(experiment, config, hardware, device_mem, 64)
    assert all(c.dropped for c in tight if c.memory["peak"] > device_mem) and not any(c.dropped is None for c in tight)
    dropped = next(c for c in tight if c.layout == smallest.layout and c.micro_batch == smallest.micro_batch)
    assert f"({runtime / GiB:.2f} GiB of it the CUDA runtime's)" in dropped.dropped
    assert f"more than {device_mem / GiB:.2f} GiB" in dropped.dropped


# --- measured CUDA memory and the snapshot -------------------------------------------------------------------------


def test_the_measured_cuda_peak_adds_what_lives_outside_the_allocator():
    peak = cuda_peak(allocated_peak=10 * GiB, reserved_peak=12 * GiB, device_used=15 * GiB, reserved_now=11 * GiB)
    assert peak == {"allocated_peak": 10 * GiB, "reserved_peak": 12 * GiB, "outside_allocator": 4 * GiB,
                    "peak": 16 * GiB}  # fmt: skip
    # The allocator grew after the device was read: never a negative remainder.
    assert cuda_peak(1, 2, 1, 2)["outside_allocator"] == 0


def test_the_device_memory_used_is_this_process_s_own_where_nvml_reports_it(monkeypatch):
    """Seen on an H100 with the GPU tests run side by side: the whole device's used memory counted the other
    workers' processes as this one's CUDA context (4.4 GiB). NVML's per-process figure is this process's own."""

    class Process:
        def __init__(self, pid, used):
            self.pid, self.usedGpuMemory = pid, used

    class FakeNvml(types.ModuleType):
        class NVMLError(Exception):
            pass

        def __init__(self, processes):
            super().__init__("pynvml")
            self.processes, self.asked = processes, []

        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByUUID(self, uuid):
            self.asked.append(uuid)
            return uuid

        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            return self.processes

    nvml = FakeNvml([Process(11, 5 * GiB), Process(42, 2 * GiB)])
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert process_device_used("96b8ead3-8c28", 42) == 2 * GiB and nvml.asked == ["GPU-96b8ead3-8c28"]
    assert process_device_used("GPU-96b8ead3-8c28", 7) is None  # not listed: the caller falls back to the device
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([Process(42, None)]))  # hidden by the container
    assert process_device_used("x", 42) is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert process_device_used("x", 42) is None


def test_cpu_processes_see_no_gpu():
    """A CPU run holds no CUDA context and its ranks can be forked (trainer.launch.torchrun): its processes see no
    GPU."""
    assert process_env("cpu", 2)["CUDA_VISIBLE_DEVICES"] == ""
    assert process_env("cuda", 2).get("CUDA_VISIBLE_DEVICES") == os.environ.get("CUDA_VISIBLE_DEVICES")  # untouched


@pytest.mark.parametrize(("steps", "warmup", "first", "untimed"), [(10, 2, 0, 2), (2, 2, 0, 0), (10, 0, 0, 0),
                                                                    (10, 2, 9, 0), (10, 2, 4, 2)])  # fmt: skip
def test_the_snapshot_records_untimed_steps_only(steps, warmup, first, untimed):
    """The history is recorded for the untimed steps and dumped after the last of them; a run whose every step is
    timed records none (untimed 0), rather than slowing a timed step."""
    assert untimed_steps(steps, warmup, first) == untimed


# --- checkpoints -----------------------------------------------------------------------------------------------


def test_checkpoints_wait_on_their_own_group_with_a_longer_timeout(tmp_path, monkeypatch):
    import torch.distributed.checkpoint as dcp

    from trainer.model.build import build_model
    from trainer.rank.optim import build_optimizer, build_scheduler

    seen = []
    for name in ("save", "load"):
        real = getattr(dcp, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            seen.append((_name, kwargs.get("process_group")))
            return _real(*args, **kwargs)

        monkeypatch.setattr(dcp, name, spy)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    steps_timeout = collective_timeouts(TrainSpec())[1]
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=steps_timeout)
    try:
        group = checkpoint.checkpoint_group()
        timeout = group._get_backend(torch.device("cpu")).options._timeout
        assert timeout == checkpoint.CHECKPOINT_TIMEOUT > steps_timeout
        assert timeout >= timedelta(minutes=30)
        spec = TrainSpec(precision="fp32")
        model = build_model(AutoConfig.for_model(**TINY_MODEL), None, seed=0)
        optimizer = build_optimizer(model, spec, "cpu")
        scheduler = build_scheduler(optimizer, spec)
        state = checkpoint.TrainerState(step=1, next_row=8)
        saved = checkpoint.save(tmp_path / "checkpoints", state, model, optimizer, scheduler, 1, {}, group)
        checkpoint.load(saved, model, optimizer, scheduler, {}, group)
    finally:
        dist.destroy_process_group()
    assert seen == [("save", group), ("load", group)]


def _timeout(group) -> timedelta:
    return group._get_backend(torch.device("cpu")).options._timeout


def test_collectives_wait_longer_through_set_up_and_the_first_steps(monkeypatch):
    """The process group starts with train.first_steps_timeout_s (a deep pipeline's first compiled step can take
    longer than the 5 minutes a step's collectives get); after the first steps every group but the checkpoints'
    gets train.collective_timeout_s."""
    first, later = collective_timeouts(TrainSpec())
    assert later == timedelta(minutes=5) and first >= timedelta(minutes=30)
    spec = TrainSpec(first_steps_timeout_s=900, collective_timeout_s=120)
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    init_worker("cpu", spec)
    try:
        assert _timeout(dist.group.WORLD) == timedelta(seconds=900)
        mesh_group = dist.new_group([0])  # as the layout's mesh makes them, with a default timeout of their own
        set_collective_timeout(collective_timeouts(spec)[0])  # trainer.rank.loop._setup, once the mesh is built
        checkpoints = checkpoint.checkpoint_group()
        assert _timeout(dist.group.WORLD) == _timeout(mesh_group) == timedelta(seconds=900)
        set_collective_timeout(collective_timeouts(spec)[1], keep=(checkpoints,))
        assert _timeout(dist.group.WORLD) == _timeout(mesh_group) == timedelta(seconds=120)
        assert _timeout(checkpoints) == checkpoint.CHECKPOINT_TIMEOUT
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_a_run_relaxes_the_collective_timeout_after_its_first_steps(tmp_path):
    """Through the trainer: the long timeout through set-up and the untimed warm-up steps, the configured one from
    the first timed step on (rank 0's log says when)."""
    changes = {
        "train": {"steps": 4, "timing_warmup_steps": 2, "first_steps_timeout_s": 900, "collective_timeout_s": 120}
    }
    run = train(write_experiment(tmp_path, changes), tmp_path / "run", "--nproc", "2")
    log = run.log.read_text()
    first = log.index("collectives time out after 900 s through set-up and the first steps")
    later = log.index("collectives time out after 120 s from step 3 on")
    assert first < log.index("step 1 loss") < log.index("step 2 loss") < later < log.index("step 3 loss")


# --- evaluation -------------------------------------------------------------------------------------------------


def test_evaluation_is_bf16_on_cuda_only():
    assert eval_dtype(torch.device("cuda", 0), bf16_supported=True) == torch.bfloat16
    assert eval_dtype(torch.device("cuda", 0), bf16_supported=False) == torch.float32  # e.g. a V100
    assert eval_dtype(torch.device("cpu"), bf16_supported=True) == torch.float32


# --- reading ahead ----------------------------------------------------------------------------------------------


class CountingRows(RowSource):
    """A RowSource that notes which thread reads each row."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.readers: list[tuple[int, str]] = []

    def row(self, index: int):
        self.readers.append((index, threading.current_thread().name))
        return super().row(index)


def test_batches_are_read_ahead_in_one_background_thread_and_equal_direct_reads():
    lengths = np.arange(20, 60)
    tokens = (np.arange(lengths.sum()) % 50).astype(np.uint32)
    corpus = TokenizedCorpus(tokens, np.concatenate([[0], np.cumsum(lengths)]))
    plan = BatchPlan(micro_batch=2, grad_accum=2, dp_degree=2)
    rows = CountingRows(corpus, 16, packing=True, seed=0)
    direct = RowSource(corpus, 16, packing=True, seed=0)
    prefetcher = BatchPrefetcher(rows, plan, dp_rank=1, pin=False)
    try:
        for step in range(3):
            first = step * plan.rows_per_step
            got = prefetcher.step_batches(first, prefetch_next=step < 2)
            expected = [direct.batch(indices) for indices in plan.micro_batches(first, 1)]
            assert len(got) == len(expected) == plan.grad_accum
            for batch, want in zip(got, expected, strict=True):
                assert batch.keys() == want.keys() and all(torch.equal(batch[k], want[k]) for k in want)
        # After a resume at another row, what was read ahead is not used: that row is read now.
        resumed = prefetcher.step_batches(5 * plan.rows_per_step, prefetch_next=False)
        assert torch.equal(resumed[0]["input_ids"], direct.batch([5 * 8 + 4, 5 * 8 + 5])["input_ids"])
    finally:
        prefetcher.close()
    threads = {name for _, name in rows.readers}
    assert len(threads) == 1 and threads.pop().startswith("meshpilot-prefetch")
    # Rows of steps 0-2 (this rank's half of each) once each, then the resumed step's: nothing beyond the last step.
    assert [i for i, _ in rows.readers] == [4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 44, 45, 46, 47]


# --- fused AdamW and the gradient norm under pipeline x tensor parallelism ----------------------------------------
