"""A test whose process hangs reports the stacks every process of it was in (tests/hung.py)."""

from __future__ import annotations

import subprocess
import sys

import hung
import psutil
from killed_runs import wait_for

# A parent and its child, each blocked in a function of its own: the child in a sleep, the parent waiting for it.
CHILD = """
import time

def child_sleeping_here():
    time.sleep(600)

child_sleeping_here()
"""
PARENT = f"""
import subprocess, sys

def parent_waiting_here():
    subprocess.run([sys.executable, "-c", {CHILD!r}])

parent_waiting_here()
"""


def test_the_stacks_of_a_hung_process_and_its_descendants_are_reported():
    with subprocess.Popen([sys.executable, "-c", PARENT]) as parent:
        try:
            # State, not time: poll until both are in their functions (the bound turns a hang into a failure).
            wait_for(lambda: "child_sleeping_here (" in hung.stacks(parent.pid), "the child's stack", timeout_s=120)
            stacks = hung.stacks(parent.pid)
        finally:
            for process in [*psutil.Process(parent.pid).children(recursive=True), psutil.Process(parent.pid)]:
                process.kill()
    assert stacks.count("--- process ") == 2
    assert "parent_waiting_here (" in stacks and "child_sleeping_here (" in stacks  # frames: name (file:line)
    message = str(hung.Hung(["cmd"], 5, "out", "the end of stderr", stacks))
    assert "timed out after 5 seconds" in message and "the end of stderr" in message
    assert "parent_waiting_here" in message
