"""torchrun's agent for one run, whose ranks are forked from it: `python -m trainer.torchrun TORCHRUN_ARGS RUN_DIR`.

A rank started the usual way (`torchrun -m trainer.worker`) is a fresh interpreter that spends about five seconds
of CPU importing torch, transformers and the model's code before its first step, once per rank. Here the agent
imports all of that once, then starts each rank with fork (torchrun's own function entrypoint, start method
"fork"): the ranks begin with everything imported. The rendezvous, the restart policy, the failure report and the
exit code are torchrun's, from its own parser and launcher.

Fork is safe here because the agent has run no OpenMP threads when it forks. Where a GPU is visible the ranks are
spawned instead, without the preload: importing transformers asks torch about the devices, after which CUDA cannot
be used in a forked child, and torch's optimizers touch CUDA even for CPU tensors when a GPU is present (both seen
on an H100: "Cannot re-initialize CUDA in forked subprocess", "CUDA error: initialization error"). Beside GPU work
the ranks' own imports cost little; CPU runs hide the GPUs (trainer.environment.process_env), so they fork. The
chain of lifelines (trainer.lifeline) is unchanged: the agent is tied to the launcher, each rank to the agent, and
the ranks stay in the launcher's process group.
"""

from __future__ import annotations

import os
import sys
import uuid

from trainer.lifeline import tie_to_parent, tied_env


def main(argv: list[str]) -> None:
    """Run torchrun's agent with `argv` (its command line, the run directory last); raise if a rank failed."""
    import torch
    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    from trainer import worker
    from trainer.loop import load_run
    from trainer.rundir import RunDir

    experiment, _ = load_run(RunDir(argv[-1]))
    start_method = "spawn" if torch.cuda.is_available() else "fork"
    args = parse_args([*argv[:-1], f"--start-method={start_method}", "-m", "trainer.worker", argv[-1]])
    if args.standalone:  # as torchrun's own `run` does
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    config, _, _ = config_from_args(args)
    if start_method == "fork":
        worker.preload(experiment)
    record(elastic_launch(config, worker.main))(argv[-1])


if __name__ == "__main__":
    tie_to_parent()
    os.environ.update(tied_env({}))  # the ranks inherit this environment: each is tied to this agent in turn
    main(sys.argv[1:])  # a failed rank raises here, after torchrun's failure report: its exit code is torchrun's
    # Every rank ended well: skip the interpreter's teardown (torch's modules and destructors), which the launcher
    # would wait for.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
