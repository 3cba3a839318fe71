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

parent = psutil.Process(int(sys.argv[1]))
seen = {}

def record():
    while True:
        try:
            for p in parent.children(recursive=True):
                if p.pid != os.getpid():
                    seen.setdefault(p.pid, p.create_time())
        except psutil.Error:
            return
        time.sleep(1.0)

threading.Thread(target=record, daemon=True).start()
while os.read(0, 1):
    pass
time.sleep(0.5)
for pid, started in list(seen.items()):
    try:
        p = psutil.Process(pid)
        if p.create_time() == started:
            p.kill()
    except psutil.Error:
        pass
"""
_pipes: list[int] = []


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
