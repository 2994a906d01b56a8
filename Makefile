# Two commands on a fresh machine:  `make demo` runs the main job on the embedded defaults (sweep, train the
# winner, private benchmark, report, pushed branch and local PR), `make test` runs every test.
# Both create .venv and install what they need on first use. `make example` trains the built-in example once.

VENV ?= .venv
PYTHON ?= python3
# Installed before anything else: a bare `torch` requirement would pull multi-GB CUDA builds onto CPU machines.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
# Test processes side by side, each taking whole test files (module fixtures are built once): most of a test's
# time is single-threaded (imports, a launcher waiting on its ranks), so two share two cores well. Three were a
# minute faster once (13.5 against 14.6 minutes) but a fresh clone's suite of 2026-11-26 took 14.8 minutes in
# pytest with three against 14.1 with two: the tests have since become CPU-bound (ranks forked, not waited on).
TEST_WORKERS ?= 2

.PHONY: demo example test lint clean

$(BIN)/meshpilot: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

demo: $(BIN)/meshpilot
	$(BIN)/meshpilot demo --dir runs/demo-$$(date +%Y%m%d-%H%M%S)

example: $(BIN)/meshpilot
	$(BIN)/meshpilot train trainer/examples/tiny_llama.yaml --nproc 2 --out runs/example-$$(date +%Y%m%d-%H%M%S)

# Bytecode written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on this machine image): each
# test process would otherwise compile meshpilot's modules and rewrite the tests' asserts afresh (7 s of CPU each).
test: $(BIN)/meshpilot
	$(BIN)/ruff check .
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--durations=25

clean:
	rm -rf $(VENV) runs .pytest_cache
