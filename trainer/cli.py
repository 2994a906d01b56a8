"""`meshpilot train`, `meshpilot plan` and `meshpilot probe`: the trainer's own subcommands."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.config import print_error
from trainer.costs.plan_export import TARGETS, PlanContext

if TYPE_CHECKING:
    from trainer.costs.planner import Candidate


def register(commands: argparse._SubParsersAction) -> None:
    _add_train(commands)
    _add_plan(commands)
    _add_probe(commands)
    _add_export_hf(commands)


def _add_train(commands: argparse._SubParsersAction) -> None:
    train = commands.add_parser("train", help="train a model with the built-in trainer")
    train.add_argument("experiment", type=Path, help="experiment file (YAML)")
    train.add_argument("--nproc", type=int, help="processes per node (default: every GPU, or 1 on CPU)")
    train.add_argument("--layout", help="degrees, e.g. dp_replicate=2 (default: data parallel over all processes)")
    train.add_argument("--steps", type=int, help="optimizer steps (overrides train.steps)")
    train.add_argument("--out", type=Path, help="run directory (default: runs/<experiment>-<time>)")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an experiment key, e.g. --set train.lr=1e-3 (repeatable)",
    )
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    train.add_argument("--nnodes", type=int, help="nodes taking part (default: hardware.nodes, or 1)")
    train.add_argument("--node-rank", type=int, default=0, help="this node's rank")
    train.add_argument("--rdzv-endpoint", help="host:port of the rendezvous, for multi-node runs")
    train.add_argument(
        "--ignore-memory-check",
        action="store_true",
        help="launch even where the memory model predicts a peak above the memory each process has",
    )
    train.set_defaults(handler=_train)


def _train(args: argparse.Namespace) -> int:
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.host.lifeline import tie_to_parent

    tie_to_parent()  # started by a job supervisor: die with it (imported first: the next import takes seconds)
    # numpy's OpenBLAS starts a thread pool when imported, and a launcher with more than one thread cannot fork
    # torchrun's agent (trainer.launch.torchrun.can_fork). Nothing of a run uses numpy's BLAS (torch has its own).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.launch.launcher import TrainRequest, describe, launch, prepare

    request = TrainRequest(
        experiment=args.experiment,
        nproc=args.nproc,
        layout=args.layout,
        steps=args.steps,
        out=args.out,
        overrides=args.overrides,
        resume=args.resume,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        ignore_memory_check=args.ignore_memory_check,
    )
    prepared = prepare(request)
    metrics = launch(prepared)
    print(describe(metrics, prepared.run), file=sys.stderr if metrics["status"] != "ok" else sys.stdout)
    return exit_code(metrics)


def exit_code(metrics: dict) -> int:
    """0 for a run that ended ok; 128 + the signal's number for a preempted one, as a shell reports a command the
    signal ended (SIGTERM: 143), though this one saved its state first; 1 for a failure."""
    if metrics["status"] == "ok":
        return 0
    if metrics["status"] == "preempted" and metrics.get("signal"):
        return 128 + signal.Signals[metrics["signal"]].value
    return 1


def _add_plan(commands: argparse._SubParsersAction) -> None:
    plan = commands.add_parser("plan", help="rank parallelism layouts by predicted memory and throughput")
    plan.add_argument("experiment", type=Path, nargs="?", help="experiment file (YAML); or give --model")
    plan.add_argument("--model", help="a model preset instead of the experiment's model, e.g. llama-3.1-8b")
    plan.add_argument("--gpu", help="a GPU preset (its name and memory), e.g. h100, 'a100 40gb', 4090")
    plan.add_argument("--devices", type=int, required=True, help="devices per node")
    plan.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    plan.add_argument("--network", help="the link between nodes: ib400 (InfiniBand NDR, the default) or ib200 (HDR)")
    plan.add_argument(
        "--device-mem",
        help="memory per device, e.g. 80GiB (default: --gpu's, else hardware.device_mem, else an H100 80GB's as "
        "torch reports it: 79.18 GiB)",
    )
    plan.add_argument("--device-type", choices=("cuda", "cpu"), default="cuda", help="device kind (default cuda)")
    plan.add_argument("--device-name", help="device model, for its peak FLOP/s (default: --gpu's, else an H100)")
    plan.add_argument("--seq-len", type=int, help="sequence length (default: data.seq_len)")
    plan.add_argument("--top", type=int, default=20, help="rows of the table (default 20)")
    output = plan.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print every candidate as JSON")
    output.add_argument(
        "--export",
        choices=TARGETS,
        help="write the picked row as an accelerate config or a torchtitan job config, or print its "
        "`meshpilot train` line (torchrun), with the line that launches it",
    )
    plan.add_argument("--pick", type=int, default=1, help="with --export: the table's row number (default 1)")
    plan.add_argument("--export-dir", type=Path, default=Path("."), help="where --export writes (default: here)")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    plan.set_defaults(handler=_plan)


def _plan(args: argparse.Namespace) -> int:
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.host.collector import collector_paused

    # Paused from the first import on: importing torch and transformers (and, for a model that is no preset's, the
    # modeling code its meta-device model is built from) is most of the command, and the collector would walk
    # every module's objects again and again as they come.
    with collector_paused():
        return _make_plan(args)


def _make_plan(args: argparse.Namespace) -> int:
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.costs.plan_request import PlanRequest, plan_request
    from trainer.costs.planner import format_fp8_alternative, format_table
    from trainer.model.presets import preset_key

    request = PlanRequest(
        devices=args.devices, experiment=args.experiment, model=args.model, nodes=args.nodes,
        device_type=args.device_type, gpu=args.gpu, device_name=args.device_name, device_mem=args.device_mem,
        network=args.network, seq_len=args.seq_len, overrides=tuple(args.overrides),
    )  # fmt: skip
    planned = plan_request(request)
    candidates = planned.candidates
    if args.json:
        print(json.dumps([c.as_dict() for c in candidates], indent=1))
    else:
        print(format_table(candidates, args.top))
        if (fp8 := format_fp8_alternative(candidates, args.top)) is not None:
            print(fp8)
    if args.export:
        preset = preset_key(args.model) if args.model else None
        context = PlanContext(
            planned.experiment, planned.hardware, planned.seq_len, args.experiment, planned.overrides, preset
        )
        return _export(args, candidates, context)
    return 0 if any(c.dropped is None for c in candidates) else 1


def _export(args: argparse.Namespace, candidates: list[Candidate], context: PlanContext) -> int:
    """The picked row as the --export target's files and launch line; 1, with the reason, where it cannot."""
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.costs.plan_export import ExportRefused, export, pick

    candidate = pick(candidates, args.pick)
    try:
        done = export(args.export, candidate, context, args.export_dir)
    except ExportRefused as refusal:
        print(refusal, file=sys.stderr)
        return 1
    print(done.describe())
    return 0


def _add_probe(commands: argparse._SubParsersAction) -> None:
    probe = commands.add_parser(
        "probe", help="measure this machine's compute and links for the throughput model (under a minute)"
    )
    probe.add_argument("--show", action="store_true", help="print the stored probe of this machine; measure nothing")
    probe.add_argument("--nproc", type=int, help="processes per node (default: every GPU, or 2 on CPU)")
    probe.add_argument("--device-type", choices=("auto", "cuda", "cpu"), default="auto", help="(default: auto)")
    probe.add_argument("--quick", action="store_true", help="fewer sizes and repeats: seconds faster, rougher")
    probe.add_argument("--nnodes", type=int, default=1, help="nodes taking part, each running this (default 1)")
    probe.add_argument("--node-rank", type=int, default=0, help="this node's rank")
    probe.add_argument("--rdzv-endpoint", help="host:port of the rendezvous, for several nodes")
    probe.set_defaults(handler=_probe)


def _probe(args: argparse.Namespace) -> int:
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.host.lifeline import tie_to_parent

    tie_to_parent()  # started by a job supervisor: die with it, and the probe's processes with this one
    from trainer.costs.probe import (
        ProbeError,
        Rendezvous,
        default_nproc,
        format_probe,
        probe_path,
        probe_settings,
        read_probe,
        run_probe,
    )

    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.hardware import this_machine
    from trainer.host.environment import resolve_device_type

    device_type = resolve_device_type(args.device_type, "--device-type")
    if args.show:
        hardware = this_machine(device_type, 1)
        probe = read_probe(hardware)
        if probe is None:
            print(f"no probe of this machine yet (run `meshpilot probe`); it would be {probe_path(hardware)}")
            return 1
        print(f"{format_probe(probe)}\n\nstored in {probe_path(hardware)}")
        return 0
    rendezvous = Rendezvous(args.nnodes, args.node_rank, args.rdzv_endpoint)
    nproc = args.nproc if args.nproc is not None else default_nproc(device_type)
    settings = probe_settings(device_type, nproc, rendezvous, args.quick)
    try:
        path, probe = run_probe(settings, rendezvous)
    except ProbeError as error:
        print_error(error)
        return 1
    print(f"{format_probe(probe)}\n\nsaved to {path}; predictions for this machine start from it")
    return 0


def _add_export_hf(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser("export", help="save a run's checkpoint as a Hugging Face model directory")
    export.add_argument("run", type=Path, help="run directory")
    export.add_argument("--step", type=int, help="the checkpoint of this step (default: the latest complete one)")
    export.add_argument(
        "--out", type=Path, help="a new or empty directory (default: RUN/hf, or RUN/hf-step-N with --step)"
    )
    export.add_argument(
        "--trust",
        action="store_true",
        help="load a checkpoint meshpilot did not write (no manifest.json): its .metadata is a pickle, which can run "
        "code; only for directories from a source you trust",
    )
    export.set_defaults(handler=_export_hf)


def _export_hf(args: argparse.Namespace) -> int:
    # Imported here: each subcommand imports only what it runs (every parser is registered for help).
    from trainer.export.hf import export_run, read_provenance

    out = export_run(args.run, args.step, args.out, trust=args.trust)
    print(f"exported {read_provenance(out)['checkpoint']} of {args.run} to {out}")
    return 0
