"""`python -m agent.jobs OUT TOKEN`: the supervisor of the job written in OUT (agent.jobs.start spawns it)."""

import sys
from pathlib import Path

from agent.jobs.supervisor import supervise
from trainer.host.lifeline import tie_to_parent

if __name__ == "__main__":
    tie_to_parent()  # a job started from inside another (a sweep's trial) dies with it; see start._spawn_supervisor
    supervise(Path(sys.argv[1]), token=sys.argv[2])
