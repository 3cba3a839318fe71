"""A watchdog that outlives the driver: when the driver dies, even by SIGKILL, what it started dies too.

A local Ray started by `ray.init()` shares fate with its driver only in part: the raylet and GCS get
the kernel's parent-death signal, but the agents the raylet spawns (`ray::DashboardAgent`,
`ray::RuntimeEnvAgent`) and workers can outlive a SIGKILLed driver for good (measured by
benchmarks/fault_matrix.py). The watchdog is a small separate process that records the driver's
descendants every second and, when the pipe from the driver reaches EOF (the kernel closes it however
the driver died), kills every recorded process still running (same PID and start time: never a
stranger that reused a PID).
"""

from __future__ import annotations

import os
import subprocess
import sys

_WATCHDOG = r"""
import os, sys, threading, time
import psutil
from planact.reaper import start_ticks

parent = psutil.Process(int(sys.argv[1]))
seen = {}

def record():
    while True:
        try:
            for p in parent.children(recursive=True):
                if p.pid != os.getpid():
                    seen.setdefault(p.pid, start_ticks(p.pid))
        except psutil.Error:
            return
        time.sleep(1.0)

threading.Thread(target=record, daemon=True).start()
while os.read(0, 1):
    pass
time.sleep(0.5)
for pid, started in list(seen.items()):
    try:
        if started is not None and start_ticks(pid) == started:
            os.kill(pid, 9)
    except OSError:
        pass
"""
_pipes: list[int] = []


def start_ticks(pid: int) -> float | None:
    """When process `pid` started, or None when there is no such process: with the pid, a name no later process
    takes. On Linux the kernel's count of clock ticks since boot (/proc/PID/stat): psutil's create_time adds the
    boot time read from the wall clock, so a clock step (a VM paused and resumed) changed it between recording
    and checking, and a live process looked like a stranger."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return float(stat[stat.rindex(b")") + 2 :].split()[19])  # field 22, starttime
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None  # gone
    except OSError:
        return None
    import psutil  # no /proc (macOS): psutil's own start time

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def reap_descendants_on_death() -> None:
    """Start the watchdog for this process (once); it exits quietly with the process, killing what is left."""
    if _pipes:
        return
    read, write = os.pipe()
    subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid())],
        stdin=read,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    os.close(read)
    _pipes.append(write)  # held open for this process's life: its closing is the signal
