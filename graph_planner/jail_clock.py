"""Take every clock away from a jailed child: `blind(plan())`, run before the seccomp filter.

Standard library only: a per-run copy of this file is loaded inside the sandbox (graph_planner/jail.py).

Why: two calls of the patched function are two children, but they share the machine's clocks, and a clock
carries data from one to a later one (a call waits until the time encodes what it learned, the next call
reads it: review 14's A09 scored 1 with the bug left). A clock is read three ways without a system call,
so the seccomp filter alone cannot refuse it:

* the vDSO's functions (`clock_gettime`, `gettimeofday`, `time`, `getcpu`): libc calls them instead of the
  kernel. Their entry points are overwritten with the system call itself (`mov eax, NR; syscall; ret`), so
  every read of a clock reaches the filter, which answers EPERM for every clock;
* the vDSO's data pages (`[vvar]`, `[vvar_vclock]`), which those functions read and anyone can: unmapped;
* the time-stamp counter (`rdtsc`, `rdtscp`): made to fault (`PR_SET_TSC`).

Why not simply unmap the data pages: CPython 3.11 reads the monotonic clock on paths every program takes
(a lock's deadline, even for a non-blocking try), and with the functions left in place that read is a
SIGSEGV. Through the stubs it is a failed system call, which CPython takes as time 0 where it cannot raise
(`_PyTime_GetMonotonicClock`), and raises OSError where it can (`time.time()`, `time.monotonic()`).
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import struct

# x86_64 system call numbers of the vDSO's functions
STUBBED = {
    b"clock_gettime": 228,
    b"gettimeofday": 96,
    b"time": 201,
    b"clock_getres": 229,
    b"getcpu": 309,
}
PR_SET_TSC, PR_TSC_SIGSEGV = 26, 2
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
AT_SYSINFO_EHDR = 33
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB = 0, 4, 5, 6
PAGE = 4096

_libc = None


def prepare():
    """Load libc's functions now (in the zygote: a child has no time to spare and nothing to open)."""
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.getauxval.argtypes = [ctypes.c_ulong]
        libc.getauxval.restype = ctypes.c_ulong
        _libc = libc
    return _libc


def _stub(nr: int) -> bytes:
    """mov eax, nr; syscall; ret: the kernel's result is the function's (a negative errno, as the vDSO's own
    fallback returns it), and the arguments are already where the system call takes them (rdi, rsi)."""
    return b"\xb8" + struct.pack("<I", nr) + b"\x0f\x05\xc3"


def vdso_functions(base: int) -> list[tuple[bytes, int]]:
    """The addresses of the vDSO's exported functions (names with and without `__vdso_`), from its ELF image
    mapped at `base`: program headers -> dynamic section -> symbol and string tables."""
    read = ctypes.string_at
    if read(base, 4) != b"\x7fELF":
        raise OSError("the vDSO is not an ELF image")
    (phoff,) = struct.unpack_from("<Q", read(base + 0x20, 8))
    phentsize, phnum = struct.unpack_from("<HH", read(base + 0x36, 4))
    bias, dynamic = None, None
    for i in range(phnum):
        p_type, _, p_offset, p_vaddr = struct.unpack_from("<IIQQ", read(base + phoff + i * phentsize, 24))
        if p_type == PT_LOAD and bias is None:
            bias = base + p_offset - p_vaddr
        elif p_type == PT_DYNAMIC:
            dynamic = p_vaddr
    if bias is None or dynamic is None:
        raise OSError("the vDSO has no loadable or dynamic segment")
    tags = {}
    at = bias + dynamic
    for _ in range(64):
        tag, val = struct.unpack_from("<qQ", read(at, 16))
        if tag == DT_NULL:
            break
        tags[tag] = val
        at += 16
    if not {DT_HASH, DT_STRTAB, DT_SYMTAB} <= set(tags):
        raise OSError("the vDSO's dynamic section lacks its hash, symbol or string table")
    (count,) = struct.unpack_from("<I", read(bias + tags[DT_HASH] + 4, 4))  # nchain: one per symbol
    found = []
    for i in range(count):
        st_name, st_info, _, shndx, st_value = struct.unpack_from("<IBBHQ", read(bias + tags[DT_SYMTAB] + 24 * i, 16))
        if st_info & 0xF != 2 or shndx == 0:  # functions defined here only
            continue
        name = ctypes.string_at(bias + tags[DT_STRTAB] + st_name)
        found.append((name.removeprefix(b"__vdso_"), bias + st_value))
    return found


def _maps() -> list[tuple[int, int, str]]:
    with open("/proc/self/maps") as fh:  # (before the filter: after it, open is refused)
        rows = [line.split() for line in fh]
    return [(*(int(x, 16) for x in r[0].split("-")), r[-1] if len(r) > 5 else "") for r in rows]


def plan() -> tuple:
    """What `blind` will do, worked out once in the process whose forks run it (a fork inherits the address
    space as it is): the vDSO's span, the stubs to write and where, and the data pages to unmap."""
    libc = prepare()
    base = libc.getauxval(AT_SYSINFO_EHDR)
    spans = _maps()
    vdso, writes = None, []
    if base:
        vdso = next(((lo, hi) for lo, hi, name in spans if name == "[vdso]"), None)
        if vdso is None or vdso[0] != base:
            raise OSError("the vDSO is not where the auxiliary vector says")
        functions = vdso_functions(base)
        if b"clock_gettime" not in dict(functions):
            raise OSError("the vDSO exports no clock_gettime")
        writes = [(address, _stub(STUBBED[name])) for name, address in functions if name in STUBBED]
    data = [(lo, hi, name) for lo, hi, name in spans if name in ("[vvar]", "[vvar_vclock]")]
    return vdso, writes, data


def blind(steps: tuple) -> None:
    """Leave this (single-threaded) process, a fork of the one that made `steps` with `plan()`, no clock once
    the filter refuses the rest. Raises OSError when any step fails: the caller must
    then not run the call."""
    libc = prepare()
    vdso, writes, data = steps
    if vdso is not None:
        lo, hi = vdso
        if libc.mprotect(ctypes.c_void_p(lo), hi - lo, PROT_READ | PROT_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect of the vDSO failed")
        for address, code in writes:
            ctypes.memmove(address, code, len(code))
        if libc.mprotect(ctypes.c_void_p(lo), hi - lo, PROT_READ | PROT_EXEC) != 0:
            raise OSError(ctypes.get_errno(), "mprotect of the vDSO failed")
    for lo, hi, name in data:
        if libc.munmap(ctypes.c_void_p(lo), hi - lo) != 0:
            raise OSError(ctypes.get_errno(), f"munmap of {name} failed")
    if libc.prctl(PR_SET_TSC, PR_TSC_SIGSEGV, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_TSC) failed")


# A clock without a system call or rdtsc: TPAUSE and UMWAIT (Intel's WAITPKG: Tremont, Alder Lake, Sapphire Rapids
# and later) wait until the time-stamp counter reaches a deadline the caller gives, at any privilege level
# (PR_SET_TSC does not stop them), and set the carry flag when the OS's time limit ended the wait instead: a
# comparison of the host's counter with a number the child chooses, so a search over deadlines reads it (review
# 17, written for Intel, not run: this machine is AMD). With the limit at 0 there is no limit and the flag tells
# nothing; elsewhere the jail does not run.
UMWAIT_MAX_TIME = "/sys/devices/system/cpu/umwait_control/max_time"
# push rbx; mov eax, 7; xor ecx, ecx; cpuid; mov eax, ecx; pop rbx; ret: CPUID leaf 7's ECX (bit 5: WAITPKG)
_CPUID_7_ECX = bytes.fromhex("53b80700000031c90fa289c85bc3")
# the same for leaf 0x80000008's EBX (bit 4: RDPRU)
_CPUID_80000008_EBX = bytes.fromhex("53b80800008031c90fa289d85bc3")
# counter reads that need no system call, each returning EDX:EAX as one number (shl rdx, 32; or rax, rdx; ret)
_EDX_EAX = "48c1e22048" + "09d0c3"
RDTSC = bytes.fromhex("0f31" + _EDX_EAX)
RDPRU_APERF = bytes.fromhex("b901000000" + "0f01fd" + _EDX_EAX)  # mov ecx, 1 (APERF); rdpru


def _run_code(code: bytes) -> int:
    """Run `code` (a function of no arguments returning in EAX/RAX) from a private executable page."""
    libc = prepare()
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, 0x22, -1, 0)  # private, anonymous
    if page in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap of a code page failed")
    try:
        ctypes.memmove(page, code, len(code))
        return ctypes.CFUNCTYPE(ctypes.c_uint64)(page)()
    finally:
        libc.munmap(ctypes.c_void_p(page), PAGE)


def _cpuid_7_ecx() -> int:
    return _run_code(_CPUID_7_ECX) & 0xFFFFFFFF


def _cpuid_80000008_ebx() -> int:
    return _run_code(_CPUID_80000008_EBX) & 0xFFFFFFFF


def read_blind(code: bytes, steps: tuple | None) -> bool:
    """Whether `code` still returns a value in a child that `blind(steps)` ran in (None: not blinded, the
    control); the child runs it and exits 0, or dies of the fault that refused it."""
    pid = os.fork()
    if pid == 0:
        try:
            faulthandler.disable()  # the fault is the expected answer, not a crash to report
            if steps is not None:
                blind(steps)
            _run_code(code)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure is "no value"
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def counters_open(steps: tuple) -> str:
    """Why a blinded child could still read a counter with no system call ("" when it cannot). AMD's RDPRU
    reads APERF, a per-CPU count of cycles: a clock. The architecture refuses it at user level when CR4.TSD is
    set, which PR_SET_TSC sets, so blind() should stop it; untested on a CPU that has it (this VM's has not),
    so where CPUID names it, a blinded child tries it, and the jail does not run if it answers. (MWAITX, AMD's
    timed wait, has no flag that tells a timeout from a wake: with one thread, and the filter allows no
    other, it is a sleep, not a clock.)"""
    if (_cpuid_80000008_ebx() >> 4) & 1 and read_blind(RDPRU_APERF, steps):
        return "RDPRU (AMD) reads a cycle counter in a jailed child on this CPU: a clock; the jail does not run here"
    return ""


def tsc_wait_open() -> str:
    """Why TPAUSE/UMWAIT would give a child a clock here ("" when they cannot: no WAITPKG, or no OS time limit)."""
    if not (_cpuid_7_ecx() >> 5) & 1:
        return ""
    try:
        with open(UMWAIT_MAX_TIME) as fh:
            limit = fh.read().strip()
    except OSError as e:
        limit = f"unreadable: {e.strerror}"
    if limit == "0":
        return ""
    return (
        f"this CPU has TPAUSE/UMWAIT (WAITPKG), and their OS time limit ({UMWAIT_MAX_TIME}: {limit}) lets a jailed "
        "call compare the time-stamp counter with a deadline it chooses: a clock; set the limit to 0 to jail here"
    )
