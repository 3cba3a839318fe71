"""CPU-seconds per test, every process a test starts included (a pytest plugin, and its report).

Wall seconds from a 2-worker run mix a test's own cost with its neighbour's; what the suite's length
depends on is the CPU all its processes spend. Each xdist worker moves itself into its own cgroup (v1
`cpuacct`, root only), so every process a test starts (Ray's daemons and workers, CLI subprocesses, sandboxes)
is counted against it, even after it is reparented. The shared Prefect and MLflow servers are moved into a
third cgroup when first seen, so they are reported apart instead of charged to whichever test started them.

    python -m pytest tests -n 2 -p tools.suite_cpu ...   # writes runs/test-cpu-<worker>.jsonl (make test does)
    python tools/suite_cpu.py runs/test-cpu-*.jsonl       # CPU-seconds per file and the top tests
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/cpuacct")
SERVICES = ("prefect server start", "mlflow", "gunicorn", "uvicorn")


def _group(name: str) -> Path:
    # PLANACT_SUITE_CPU_TAG keeps two suites measured at once on one machine (two checkouts) apart.
    path = ROOT / f"planact-suite-{os.environ.get('PLANACT_SUITE_CPU_TAG', '')}{name}"
    path.mkdir(exist_ok=True)
    return path


def _usage(group: Path) -> float:
    return int((group / "cpuacct.usage").read_text()) / 1e9


def _move_services(group: Path, services: Path) -> None:
    for pid in (group / "cgroup.procs").read_text().split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(s in cmd for s in SERVICES):
            try:
                (services / "cgroup.procs").write_text(pid)
            except OSError:
                pass


_state: dict = {}


def pytest_configure(config) -> None:
    """Move this worker into its cgroup (services get a shared one)."""
    if not ROOT.is_dir() or os.geteuid() != 0:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    try:
        group, services = _group(worker), _group("services")
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:  # a read-only cgroup file system (a container): the suite runs, unmeasured
        return
    out = Path("runs") / f"test-cpu-{worker}.jsonl"
    out.parent.mkdir(exist_ok=True)
    _state.update(group=group, services=services, out=open(out, "w"))


def pytest_runtest_protocol(item, nextitem):
    """Charge setup + call + teardown of `item` to it."""
    if not _state:
        return None
    from _pytest.runner import runtestprotocol

    t0, c0, s0 = time.perf_counter(), _usage(_state["group"]), _usage(_state["services"])
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    _move_services(_state["group"], _state["services"])
    row = {
        "test": item.nodeid,
        "wall": round(time.perf_counter() - t0, 2),
        "cpu": round(_usage(_state["group"]) - c0, 2),
        "services_cpu": round(_usage(_state["services"]) - s0, 2),
    }
    _state["out"].write(json.dumps(row) + "\n")
    _state["out"].flush()
    return True


def main() -> None:
    """Sum the rows per file; print the files and tests by CPU-seconds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    rows = [json.loads(x) for f in args.rows for x in Path(f).read_text().splitlines() if x.strip()]
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f[0] += r["cpu"]
        f[1] += r["wall"]
    print(f"{len(rows)} tests: {sum(r['cpu'] for r in rows):.0f} CPU-s, {sum(r['wall'] for r in rows):.0f} wall-s")
    for name, (cpu, wall) in sorted(files.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"  {cpu:7.1f} CPU-s {wall:7.1f} wall-s  {name}")
    print("  slowest tests by CPU:")
    for r in sorted(rows, key=lambda r: -r["cpu"])[: args.top]:
        print(f"  {r['cpu']:7.1f} CPU-s {r['wall']:7.1f} wall-s  {r['test']}")


if __name__ == "__main__":
    main()
