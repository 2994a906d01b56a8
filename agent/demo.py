"""`meshpilot demo`: the main job end to end, on whatever this machine has.

It makes an example experiment repository (with a bare remote beside it), sweeps parallelism layouts with and
without packing, trains the winner longer, evaluates it on the private built-in suite, writes the report and
docs on a branch, pushes it and opens a local pull request. Every step is the same code the CLI runs.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from agent.records import TRIAL, TRIAL_FILE
from agent.report import write_report
from agent.sweep import run_sweep
from trainer.config import ConfigError
from trainer.layout import layout_name

if TYPE_CHECKING:
    from agent.sweep.runner import ProgressCallback

# Imports of torch, transformers and git wait for the command itself: `meshpilot --help` loads this module.
# Small enough for a 2-core machine to sweep in minutes; the head is not tied to the embedding so that the
# layers can be split into pipeline stages.
DEMO_MODEL = {
    "model_type": "llama",
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 192,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
}
CPU_LAYOUTS = ["dp_replicate=2", "dp_shard=2", "tp=2", "dp_shard=2,tp=2", "pp=2"]
CPU_PROCESSES = 4  # processes, not cores: FSDP2 x TP needs 4; trials run one at a time
SEQ_LEN, MICRO_BATCH = 128, 2
ROWS_PER_DEVICE = 4  # per optimizer step: divides among the data-parallel ranks of every swept layout


def register(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser("demo", help="run the whole job on an example repository: sweep, train, bench, PR")
    demo.add_argument("--dir", type=Path, default=Path("meshpilot-demo"), help="a new directory")
    demo.add_argument("--trial-steps", type=int, default=6, help="optimizer steps per sweep trial (default 6)")
    demo.add_argument("--final-steps", type=int, default=40, help="optimizer steps for the winner (default 40)")
    demo.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    # The winner's longer run is launched from this process, as `meshpilot train` launches one, and for the same
    # reason (trainer.cli): numpy's OpenBLAS starts a thread pool when imported, and a launcher with more than one
    # thread cannot fork torchrun's agent (trainer.launch.torchrun.can_fork), which then imports torch, transformers
    # and the model's code afresh (seconds of CPU). numpy's BLAS does next to nothing here (torch has its own).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from agent.sweep.progress import SweepReporter  # imported here: it loads numpy, which `--help` must not wait for

    # Flushed: each phase shows as it starts, also when stdout is a pipe (block-buffered) beside the sweep's stderr.
    say = functools.partial(print, flush=True)
    with SweepReporter(sys.stderr) as reporter:
        outcome = run_demo(
            args.dir, trial_steps=args.trial_steps, final_steps=args.final_steps, say=say, progress=reporter.update
        )
    print(f"report: {outcome['report_path']} on branch {outcome['branch']} of {outcome['repository']}")
    print(f"  read it: git -C {outcome['repository']} show {outcome['branch']}:{outcome['report_path']}")
    return 0


def run_demo(
    directory: Path,
    *,
    trial_steps: int = 6,
    final_steps: int = 40,
    say=lambda text: None,
    progress: ProgressCallback | None = None,
) -> dict:
    """The demo in `directory` (new or empty); `say` gets a line as each phase starts, `progress` the sweep's."""
    directory = directory.resolve()
    if directory.exists() and any(directory.iterdir()):  # refused before the seconds of imports below
        raise ConfigError(f"--dir {directory} is not empty: give a new directory")
    # torch (seconds to import) only when the demo runs
    import torch

    from evalsuite.api import run_bench  # imported here, as torch is: it loads transformers

    devices, layouts = demo_layouts(torch.cuda.device_count() if torch.cuda.is_available() else 0)
    repo = _make_repository(directory, trial_steps, devices)
    experiment = repo / "meshpilot.yaml"

    kind = "GPUs" if torch.cuda.is_available() else "CPU processes"
    say(f"1/4 sweeping {len(layouts)} layouts x packing on {devices} {kind}")
    # Every layout with and without packing, once each: the micro-batch and checkpointing stay as the experiment has
    # them (a 2-core machine has no time for the planner's full grid).
    space = {
        "layout": layouts,
        "data.packing": [True, False],
        "train.micro_batch": [MICRO_BATCH],
        "train.activation_checkpointing": [False],
    }
    sweep_dir = directory / "sweep"
    summary = run_sweep(
        experiment,
        sweep_dir,
        space=space,
        devices=devices,
        trials=2 * len(layouts),
        sampler="grid",
        progress=progress,
    )
    winner = next(t for t in summary["trials"] if t["id"] == summary["winner"])
    say(f"   winner {winner['id']}: {_describe(winner['params'])}, {winner['tokens_per_s']:,.0f} tokens/s")

    say(f"2/4 training the winner for {final_steps} steps")
    final_run = _train_winner(sweep_dir / winner["run_dir"], directory / "final", final_steps)

    say("3/4 evaluating on the private built-in suite")
    run_bench("builtin", final_run, directory / "bench")  # writes bench/result.json
    bench_file = directory / "bench" / "result.json"

    say("4/4 writing the report, pushing the branch, opening a local pull request")
    outcome = write_report(sweep_dir, repo, bench_results=[bench_file], pr=True, provider="local")
    return {"repository": str(repo), **outcome}


def _make_repository(directory: Path, trial_steps: int, devices: int) -> Path:
    """An experiment repository on branch main with one commit, pushed to a bare `origin` beside it."""
    # GitPython (a slow import) only when the demo makes its repository
    import git

    git.Repo.init(directory / "remote.git", bare=True, initial_branch="main")
    path = directory / "experiment-repo"
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "meshpilot demo")
        config.set_value("user", "email", "demo@meshpilot.invalid")
    experiment = {
        "model": {"config": DEMO_MODEL},
        "tokenizer": "builtin",
        "data": {"train": "builtin:stdlib-docs", "seq_len": SEQ_LEN, "packing": True},
        "train": {
            "steps": 6,
            "global_batch_tokens": SEQ_LEN * ROWS_PER_DEVICE * devices,
            "micro_batch": MICRO_BATCH,
            "lr": 3.0e-3,
            "warmup_steps": 2,
        },
        "search": {"trial_steps": trial_steps},
    }
    (path / "meshpilot.yaml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    (path / "README.md").write_text("# Demo experiment\n\nA small Llama-style model trained with meshpilot.\n")
    (path / ".gitignore").write_text("runs/\n")
    repo.index.add(["meshpilot.yaml", "README.md", ".gitignore"])
    repo.index.commit("Experiment: a small Llama on the built-in corpus")
    repo.create_remote("origin", str(directory / "remote.git"))
    repo.remotes.origin.push("main:main")
    return path


def demo_layouts(gpus: int) -> tuple[int, list[str]]:
    """The devices every trial uses and the layouts to sweep: all the GPUs when there are any, else CPU processes.

    One GPU has one layout (the sweep is over packing alone); several get data parallel, FSDP2, and with an even
    count TP and PP beside data parallelism (the demo model has 4 layers and 2 KV heads: degree 2 fits both).
    """
    if gpus == 0:
        return CPU_PROCESSES, CPU_LAYOUTS
    if gpus == 1:
        return 1, ["dp_replicate=1"]
    layouts = [f"dp_replicate={gpus}", f"dp_shard={gpus}"]
    if gpus % 2 == 0:
        rest = f",dp_shard={gpus // 2}" if gpus > 2 else ""
        layouts += [f"tp=2{rest}", f"pp=2{rest}"]
    return gpus, layouts


def _train_winner(trial_dir: Path, out: Path, steps: int) -> Path:
    """The winning trial trained again for `steps` steps: its experiment, processes, layout and settings exactly as
    its record (trial.json) says it ran, but keeping its final checkpoint, to evaluate."""
    from trainer.launch.launcher import TrainRequest, launch, prepare  # imported here: it loads torch, transformers

    record = TRIAL.read(trial_dir / TRIAL_FILE)
    if record is None:
        raise FileNotFoundError(f"{trial_dir / TRIAL_FILE}: the winner has no trial record")
    ran = record["request"]
    request = TrainRequest(
        Path(ran["experiment"]), nproc=ran["nproc"], layout=ran["layout"], steps=steps, out=out,
        overrides=list(record["settings"]),
    )  # fmt: skip
    prepared = prepare(request)
    metrics = launch(prepared)
    if metrics["status"] != "ok":
        raise RuntimeError(f"the winner's longer run failed: {metrics['error']}")
    return out


def _describe(params: dict) -> str:
    return f"{layout_name(params['layout'])}, packing {'on' if params['packing'] else 'off'}"
