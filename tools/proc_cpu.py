"""Where a command's CPU goes, by kind of process: sample /proc while it runs, then sum per kind.

tools/suite_cpu.py charges every process to the test that started it; this answers the other question,
which kinds of process the CPU went to across a whole run (Ray's daemons, role agents, sandboxed pytest
runs, training drivers, the shared servers). Every 0.5 s it reads each process's own CPU time and command
line; a process's last reading counts, so one that lives under 0.5 s is missed (short-lived processes are
undercounted, never overcounted). The command line is read again at every sample: a process that Ray forks
and then execs is counted under what it became, not under its parent.

    python tools/proc_cpu.py record runs/proc-cpu.jsonl -- make test
    python tools/proc_cpu.py report runs/proc-cpu.jsonl --top 30
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# (pattern on the command line, kind): the first match names the kind; the rest fall back to the program name.
KINDS = (
    (r"^ray::(\S+)", r"ray::\1"),
    (r"ray/_private/workers/default_worker\.py", "ray worker (before its title)"),
    (r"ray/dashboard/agent\.py", "ray dashboard agent"),
    (r"ray/dashboard/dashboard\.py", "ray dashboard head"),
    (r"ray/_private/log_monitor\.py", "ray log monitor"),
    (r"ray/_private/runtime_env/agent", "ray runtime-env agent"),
    (r"ray/autoscaler/_private/monitor\.py", "ray autoscaler monitor"),
    (r"/(raylet|gcs_server) ", r"ray \1"),
    (r"-m (flows\.\w+|prefect\.engine|ipykernel_launcher|pytest)", r"python -m \1"),
    (r"prefect server start|prefect\.server\.api\.server:create_app", "prefect server"),  # a run's own: uvicorn
    (r"prefect worker start", "prefect worker"),
    (r"mlflow|uvicorn", "mlflow server"),
    (r"exec\(eval\(sys\.stdin", "pytest-xdist worker"),
    (r"/planact-run-[^/]+/[0-9a-f]{12}\.py", "sandboxed test run"),
    (r"benchmarks/(\w+)\.py", r"benchmark \1"),
)


def kind(cmdline: str, comm: str) -> str:
    """The kind of process a command line (or, when it is empty, a program name) belongs to."""
    for pattern, name in KINDS:
        m = re.search(pattern, cmdline)
        if m:
            return m.expand(name)
    return Path(cmdline.split(" ")[0]).name if cmdline else comm


def _read(pid: str) -> tuple[tuple[str, str], float, str, str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
    # utime + stime of the process itself (children are processes of their own here); start time keys it
    return (pid, rest[19]), (int(rest[11]) + int(rest[12])) / TICK, cmdline, comm


def record(out: Path, command: list[str], every_s: float = 0.5) -> int:
    """Run `command`, sampling every process on the machine until it exits; returns its exit status."""
    # processes alive before the command count only the CPU they spend while it runs
    before = {got[0]: got[1] for pid in filter(str.isdigit, os.listdir("/proc")) if (got := _read(pid))}
    seen: dict[tuple[str, str], list] = {}
    proc = subprocess.Popen(command)
    while True:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            got = _read(pid)
            if got:
                key, cpu, cmdline, comm = got
                row = seen.setdefault(key, [0.0, cmdline, comm])
                row[0] = max(row[0], cpu - before.get(key, 0.0))
                row[1], row[2] = cmdline or row[1], comm
        if proc.poll() is not None:
            break
        time.sleep(every_s)
    with open(out, "w") as f:
        for (pid, _), (cpu, cmdline, comm) in seen.items():
            if cpu > 0:
                f.write(json.dumps({"pid": int(pid), "cpu_s": cpu, "cmdline": cmdline[:300], "comm": comm}) + "\n")
    return proc.returncode


def report(path: Path, top: int = 30) -> list[tuple[str, float, int]]:
    """(kind, CPU-seconds, processes) per kind, most CPU first; prints the `top` of them."""
    total: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for line in path.read_text().splitlines():
        row = json.loads(line)
        k = total[kind(row["cmdline"], row["comm"])]
        k[0] += row["cpu_s"]
        k[1] += 1
    rows = sorted(((k, cpu, n) for k, (cpu, n) in total.items()), key=lambda r: -r[1])
    print(f"{sum(r[1] for r in rows):.0f} CPU-s in {sum(r[2] for r in rows)} processes")
    for k, cpu, n in rows[:top]:
        print(f"  {cpu:8.1f} CPU-s  {n:5d} processes  {cpu / n:6.2f} each  {k}")
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line: `record OUT -- COMMAND...` or `report FILE [--top N]`."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out", type=Path)
    r.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("report")
    s.add_argument("file", type=Path)
    s.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    if args.cmd == "record":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return record(args.out, command)
    report(args.file, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
