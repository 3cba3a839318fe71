"""The call jail leaves a child no clock and nothing another process can also change and read (reviews 14-17):
each route is tried in a jailed child (tests/unit/test_jail.py's harness) beside the same code outside the jail,
where it works."""

from __future__ import annotations

import os
import textwrap

import pytest

from graph_planner import jail_filter

from .test_jail import run_jailed

pytestmark = pytest.mark.skipif(bool(jail_filter.available()), reason="needs seccomp filters on x86_64 Linux")


CLOCKS = """
'MARK'
import ctypes, datetime, time
libc = ctypes.CDLL(None, use_errno=True)
ts = (ctypes.c_long * 2)()

def raw(nr, *args):
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()

def read(fn):
    try:
        return fn()
    except OSError as e:
        return type(e).__name__

out = [read(time.time), read(time.monotonic), read(time.perf_counter), str(datetime.datetime.now())]
# every clock id through the system call: realtime, monotonic, raw, coarse, boottime, TAI; then the two CPU
# clocks of this process, the CPU clock of the test process (pid x) and of pid 1 by a negative id
out.append([raw(228, c, ts) for c in (0, 1, 4, 5, 6, 7, 11)])
out.append([raw(228, c, ts) for c in (2, 3)])
out.append([raw(228, ((~p) << 3) | 2, ts) for p in (x, 1)])
out.append([raw(96, ts, 0), raw(201, 0)])  # gettimeofday, time
out.append([libc.clock_gettime(c, ts) for c in (0, 1)])  # libc's path (the vDSO)
return out
"""


def test_a_call_reads_no_clock(tmp_path):
    # Review 14: calls talked through the clocks every process shares (A09: a call waited until the wall clock
    # encoded what it had probed, the next call read it) and through the test process's CPU clock (A12).
    out = run_jailed(tmp_path, CLOCKS, [os.getpid()])
    value = eval(out.get("value", "None"))  # noqa: S307 - the repr of plain data the test built itself
    assert value is not None, out
    assert value[:3] == ["PermissionError"] * 3 and value[3].startswith("1970-01-01"), value
    assert value[4] == [-1] * 7, value  # EPERM for every shared clock
    assert value[5] == [-1, -1], value  # nor its own CPU time: the timer a cache side channel needs
    assert value[6] == [-1, -1] and value[7] == [-1, -1] and value[8] == [-1, -1], value


WAITS = """
'MARK'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.syscall.restype = ctypes.c_long  # (an mapping's address is wider than an int)

def raw(nr, *args):
    rc = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, ctypes._SimpleCData) else ctypes.c_long(a) for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()

word = ctypes.c_uint32(0)
epoch = (ctypes.c_long * 2)(0, 0)
at = ctypes.c_void_p(ctypes.addressof(word))
ts = ctypes.c_void_p(ctypes.addressof(epoch))
page = libc.mmap(None, 4096, 3, 0x22, -1, 0)
shared = page  # (a file's pages outside the jail, where open is allowed)
if x:
    with open(ctypes.__file__, "rb") as fh:
        shared = libc.mmap(None, 4096, 1, 0x02, fh.fileno(), 0)
return [
    raw(202, at, 9 | 256, 0, ts, 0, -1),  # a wait on an absolute wall-clock deadline (passed: ETIMEDOUT -110)
    raw(202, at, 6, 0, 0, 0, 0) if x else -1,  # FUTEX_LOCK_PI: a probe of which pids exist
    raw(28, ctypes.c_void_p(shared), 4096, 21),  # MADV_PAGEOUT
    raw(202, at, 1 | 128, 1, 0, 0, 0),  # a private wake (allowed: 0 woken)
    raw(202, at, 0 | 128, 1, ts, 0, 0),  # a private wait whose value differs (allowed: EAGAIN -11)
    raw(28, ctypes.c_void_p(page), 4096, 4),  # MADV_DONTNEED (allowed)
    raw(202, at, 1, 1, 0, 0, 0),  # a shared wake: keyed by a file's page, another run's process could wait there
    raw(9, 0, 2 << 20, 3, 0x22 | 0x40000, -1, 0) < 0,  # MAP_HUGETLB: the host's pool of huge pages (refused or none)
    raw(9, 0, 4096, 3, 0x21, -1, 0) > 0,  # a shared anonymous mapping
    raw(318, ctypes.c_void_p(page), 8, 2),  # getrandom(GRND_RANDOM): once a host-wide entropy count
    raw(28, ctypes.c_void_p(page), 4096, 8),  # MADV_FREE: whether reclaim happened, a shared memory limit's state
]
"""


def test_a_call_can_neither_wait_on_the_wall_clock_nor_evict_shared_pages(tmp_path):
    # Review 18: A22 read a shared memory limit's reclaim through MADV_FREE (pages kept or zeroed).
    # Review 17: A21 held huge pages of the host's pool for a concurrent run's child to count (MAP_HUGETLB).
    # Review 16: A17 woke a child of another run, concurrent, through a shared futex on the interpreter's code
    # pages (keyed by the file: the same word in every sandbox); only private futexes are left. Review 15: A16 rebuilt the wall clock from futex waits on absolute deadlines (a passed one returns at once,
    # which the call's own CPU time told from a sleep) and carried A09's value again (reward 1, 3 of 3); A15
    # evicted a shared file's pages (MADV_PAGEOUT) for a later call to time. The control: the same calls here.
    here = {}
    exec("def gadget(x):\n" + textwrap.indent(WAITS, "    "), here)  # noqa: S102 - the test's own code
    outside = here["gadget"](1)
    assert outside[0] == -110 and outside[1] != -1 and outside[2] == 0 and outside[6] == 0, outside  # allowed
    assert outside[8] is True and outside[9] == 8 and outside[10] == 0, outside
    out = run_jailed(tmp_path, WAITS, [0])
    expected = [-1, -1, -1, 0, -11, 0, -1, True, False, -1, -1]  # the hugetlb mmap fails either way: EPERM in the jail
    assert eval(out.get("value", "None")) == expected, out  # noqa: S307 - plain data it built


def test_the_jail_does_not_run_where_tpause_could_time_a_call(monkeypatch, tmp_path):
    # Review 17 (A20, Intel only, not run here): TPAUSE/UMWAIT compare the time-stamp counter with a deadline the
    # call chooses whenever the OS limits their wait. This CPU has no WAITPKG (the control: the jail runs).
    from graph_planner import jail_clock

    assert jail_clock.tsc_wait_open() == "" and not (jail_clock._cpuid_7_ecx() >> 5) & 1
    limit = tmp_path / "max_time"
    monkeypatch.setattr(jail_clock, "_cpuid_7_ecx", lambda: 1 << 5)
    monkeypatch.setattr(jail_clock, "UMWAIT_MAX_TIME", str(limit))
    assert "unreadable" in jail_clock.tsc_wait_open()
    limit.write_text("100000\n")  # Linux's default
    assert "100000" in jail_clock.tsc_wait_open()
    limit.write_text("0\n")  # no limit: the flag tells nothing
    assert jail_clock.tsc_wait_open() == ""


def test_a_blinded_child_reads_no_cycle_counter_and_rdpru_is_checked_where_the_cpu_has_it(monkeypatch):
    # Review 18's suggestion: AMD's RDPRU reads APERF (a cycle count: a clock) with no system call. PR_SET_TSC
    # should refuse it at user level; where CPUID names it, a blinded child tries it before the jail runs.
    from graph_planner import jail_clock

    steps = jail_clock.plan()
    assert jail_clock.read_blind(jail_clock.RDTSC, None)  # the control: unblinded, rdtsc answers
    assert not jail_clock.read_blind(jail_clock.RDTSC, steps)  # blinded: it faults
    assert jail_clock.counters_open(steps) == ""
    monkeypatch.setattr(jail_clock, "_cpuid_80000008_ebx", lambda: 1 << 4)  # a CPU that names RDPRU
    has_rdpru = bool((jail_clock._run_code(jail_clock._CPUID_80000008_EBX) >> 4) & 1)
    assert jail_clock.counters_open(steps) == ""  # tried and refused (here: no such instruction, #UD)
    assert has_rdpru or not jail_clock.read_blind(jail_clock.RDPRU_APERF, None)
    monkeypatch.setattr(jail_clock, "read_blind", lambda code, steps: True)  # one where it answers
    assert "RDPRU" in jail_clock.counters_open(steps)


VDSO_DATA = """
'MARK'
import ctypes
libc = ctypes.CDLL(None)
libc.getauxval.restype = ctypes.c_ulong
vdso = libc.getauxval(33)  # the data pages lie below the vDSO's code, x bytes down on this kernel
return len(ctypes.string_at(vdso - x, 64))
"""
RDTSC = """
'MARK'
import ctypes
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
page = libc.mmap(None, 4096, 7, 0x22, -1, 0)  # read, write, exec; private, anonymous
code = bytes.fromhex("0f31" "48c1e220" "4809d0" "c3")  # rdtsc; shl rdx, 32; or rax, rdx; ret
ctypes.memmove(page, code, len(code))
return ctypes.CFUNCTYPE(ctypes.c_uint64)(page)() > 0
"""


@pytest.mark.parametrize("name,body", [("the vDSO's data pages", VDSO_DATA), ("the time-stamp counter", RDTSC)])
def test_a_clock_read_without_a_system_call_is_a_fault(tmp_path, name, body):
    # The control: the same code outside the jail reads the clock.
    with open("/proc/self/maps") as fh:
        spans = {row.split()[-1]: int(row.split("-")[0], 16) for row in fh if "[v" in row}
    below = spans["[vdso]"] - spans["[vvar]"]
    here = {}
    exec("def gadget(x):\n" + textwrap.indent(body, "    "), here)  # noqa: S102 - the test's own code
    assert here["gadget"](below) not in (None, 0, False), name
    out = run_jailed(tmp_path, body, [below])
    assert "died" in out.get("fault", ""), out  # SIGSEGV: the child ends, the call is a fault, no value
