"""The `meshpilot` entry point: it tells a newcomer what meshpilot is and what to run first, knows its version,
and loads only the package of the command given."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from support import REPO

from agent.cli import COMMANDS, main


def test_help_says_what_meshpilot_is_and_what_to_run_first(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    assert exit.value.code == 0
    shown = capsys.readouterr().out
    assert "parallel" in shown and "meshpilot demo" in shown
    assert all(command in shown for command in COMMANDS)  # every package's commands are listed


def test_version(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"meshpilot {version('meshpilot')}"


def test_a_command_loads_only_its_own_package():
    script = (
        "import sys, atexit\n"
        "atexit.register(lambda: print('LOADED', 'textual' in sys.modules, 'evalsuite.cli' in sys.modules))\n"
        "from agent.cli import main\n"
        "main(['train', '--help'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "usage: meshpilot train" in done.stdout
    assert "LOADED False False" in done.stdout, done.stdout[-500:] + done.stderr[-2000:]
