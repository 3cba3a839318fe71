"""The call jail's seccomp-BPF filter: after `install_filter(fd)` a jailed child can only compute.

Standard library only: a per-run copy of this file is loaded inside the sandbox (graph_planner/jail.py).

After it, the calling process can manage its memory, read randomness (no clock at all),
block signals, exit, and `write` and `read` on `fd` (its one channel to the zygote: the answer, and the
callbacks of graph_planner/jail_callback.py); every other system call fails with EPERM (a call from a foreign
ABI kills the process). Installed with no_new_privs, it is inherited and cannot be removed, and nothing the
process does after it can open a file, a socket or a process.
"""

from __future__ import annotations

import ctypes
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
RET_ALLOW = 0x7FFF0000
RET_ERRNO_EPERM = 0x00050000 | 1
RET_KILL_PROCESS = 0x80000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# x86_64 numbers. Only what CPython needs to run pure code once it is loaded: memory (malloc, the
# obmalloc arenas, mprotect for nothing writable from outside), futex (the GIL), getrandom (hash seeds of a
# new dict type), signal masks and returns, and the two exits. No clock at all: a clock shared with other
# processes carries data from one call to a later one (a call waits until the time encodes a value, the next
# call reads it: review 14's A09; a negative id even named another process's CPU clock, which one call can
# move and a later one read: A12), and the process's own CPU clock, with its nanoseconds, is the timer that
# a cache side channel needs (a call leaves lines of the shared libraries' code cached or flushed, a later
# call times its reads of them), so `clock_gettime` is refused for every id, and jail_clock.blind() routes the
# reads that need no system call to this filter. (RLIMIT_CPU, set before the filter, still bounds the call.)
# Nor a clock rebuilt from a wait, nor a word another process can name: `futex` only as a private plain wait
# (a relative timeout) or wake. A shared futex on a page of a file mapping (the interpreter's read-only code)
# is keyed by the file's inode and offset, the same word in every sandbox that binds the interpreter, so a
# child of one run woke a child of another run waiting there and told it the answer (review 16's A17: reward 1
# with the bug left in 3 of 3 pairs of concurrent runs); a private one is keyed by the process's own memory.
# An absolute deadline on the wall clock (FUTEX_WAIT_BITSET | FUTEX_CLOCK_REALTIME) returns at once when
# it has passed and sleeps when it has not, which the process's own CPU time told apart, so a search over
# deadlines found the time to ~30 ms (review 15's A16: reward 1 with the bug left, 3 of 3), and FUTEX_LOCK_PI
# answered whether any pid exists. `madvise` only with the advice malloc gives (below; MADV_PAGEOUT on a file's pages
# would evict them from the page cache every process shares, a channel a later call times by faulting them
# back: review 15's A15, held in the sandbox only because the run's uid does not own the interpreter's files).
SYS_READ, SYS_WRITE, SYS_MMAP, SYS_MADVISE, SYS_FUTEX, SYS_GETRANDOM = 0, 1, 9, 28, 202, 318
FUTEX_OPS = (0, 1)  # FUTEX_WAIT, FUTEX_WAKE
FUTEX_PRIVATE_FLAG = 128
# madvise: only MADV_NORMAL and MADV_DONTNEED (what glibc's malloc gives). Not MADV_FREE: its pages keep their
# contents until the kernel reclaims them, so a child learns whether reclaim happened, which memory a concurrent
# run's child touched decides under a shared memory limit (review 18's A22: values crossed runs, not yet a
# forge); not the huge-page advice either, which nothing here needs.
MADVICE = (0, 4)  # MADV_NORMAL, MADV_DONTNEED
# mmap: anonymous and private, with the flags malloc and the interpreter use and nothing else (an allow-list, so
# a flag a later kernel adds stays out): never MAP_HUGETLB, whose pages come from the host's one pool
# (vm.nr_hugepages), reserved at mmap time and refused when too few are free, a count every process on the host
# changes and reads (review 17's A21: a child of one run held v+1 pages while a concurrent run's child counted
# the free ones, reward 1 with the bug left in 4 of 5 pairs on a host with a pool), nor MAP_SHARED.
MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE, MAP_POPULATE, MAP_STACK, MAP_FIXED_NOREPLACE = (
    0x02,
    0x10,
    0x20,
    0x4000,
    0x8000,
    0x20000,
    0x100000,
)
MMAP_FLAGS = MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS | MAP_NORESERVE | MAP_POPULATE | MAP_STACK | MAP_FIXED_NOREPLACE
# getrandom: flags 0 or GRND_NONBLOCK; GRND_RANDOM drew on a host-wide entropy count before Linux 5.6
GETRANDOM_FLAGS = (0, 1)
ALLOWED = {
    "brk": 12,
    "munmap": 11,
    "mremap": 25,
    "mprotect": 10,
    "rt_sigreturn": 15,
    "rt_sigprocmask": 14,
    "sigaltstack": 131,
    "exit": 60,
    "exit_group": 231,
}
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH = 0, 4
_ARG = [16 + 8 * i for i in range(6)]  # seccomp_data.args[i]: low 32 bits first (little endian)


def available() -> str:
    """Why seccomp filters cannot jail this process ("" when they can): x86_64 Linux with filter support."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"the jail's filter is written for x86_64 Linux, not {platform.system()} {platform.machine()}"
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as fh:
            actions = fh.read().split()
    except OSError:
        return ""  # /proc/sys hidden (a sandbox view): install_filter's own result decides
    return "" if {"errno", "allow"} <= set(actions) else f"this kernel's seccomp lacks errno/allow: {actions}"


def _program(fd: int) -> bytes:
    """The BPF program: allow ALLOWED, `read(fd, ...)`, `write(fd, ...)`, anonymous `mmap`; EPERM for the rest."""
    ins: list[tuple[int, int, int, int]] = []

    def op(code, k, jt=0, jf=0):
        ins.append((code, jt, jf, k))

    deny, allow = "deny", "allow"
    jumps: list[tuple[int, str, str]] = []  # (index, true target, false target) resolved below

    def branch(k, if_true, if_false=None):
        jumps.append((len(ins), if_true, if_false))
        op(_JEQ_K, k)

    op(_LD_W_ABS, _ARCH)
    op(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0)  # another ABI (i386 numbers differ): kill, never guess
    op(_RET_K, RET_KILL_PROCESS)
    op(_LD_W_ABS, _NR)
    op(_JGE_K, X32_SYSCALL_BIT, 0, 1)
    op(_RET_K, RET_KILL_PROCESS)
    for nr in sorted(ALLOWED.values()):
        branch(nr, allow)
    branch(SYS_READ, "channel")
    branch(SYS_WRITE, "channel")
    branch(SYS_MMAP, "mmap")
    branch(SYS_FUTEX, "futex")
    branch(SYS_MADVISE, "madvise")
    branch(SYS_GETRANDOM, "getrandom")
    op(_RET_K, RET_ERRNO_EPERM)
    labels = {"channel": len(ins)}
    # read and write: only on the channel descriptor (both halves of the 64-bit argument); a read can only
    # fill the process's own memory with what the zygote relays, a write only reach the zygote
    op(_LD_W_ABS, _ARG[0])
    branch(fd, "channel_hi", deny)
    labels["channel_hi"] = len(ins)
    op(_LD_W_ABS, _ARG[0] + 4)
    branch(0, allow, deny)
    # futex: a private plain wait or wake (the operation is a 32-bit int), nothing else
    labels["futex"] = len(ins)
    op(_LD_W_ABS, _ARG[1])
    branch(FUTEX_OPS[0] | FUTEX_PRIVATE_FLAG, allow)
    branch(FUTEX_OPS[1] | FUTEX_PRIVATE_FLAG, allow, deny)
    # madvise: the advice (a 32-bit int) is one malloc gives
    labels["madvise"] = len(ins)
    op(_LD_W_ABS, _ARG[2])
    for advice in MADVICE[:-1]:
        branch(advice, allow)
    branch(MADVICE[-1], allow, deny)
    # getrandom: the flags (a 32-bit int) are 0 or GRND_NONBLOCK
    labels["getrandom"] = len(ins)
    op(_LD_W_ABS, _ARG[2])
    branch(GETRANDOM_FLAGS[0], allow)
    branch(GETRANDOM_FLAGS[1], allow, deny)
    # mmap: no flag outside MMAP_FLAGS, and anonymous (the kernel then ignores fd; glibc passes fd -1 as a
    # 32-bit int, so the argument's upper half is not reliable): a shared writable file mapping would be a
    # write to that file
    labels["mmap"] = len(ins)
    op(_LD_W_ABS, _ARG[3])
    jumps.append((len(ins), deny, None))
    op(_JSET_K, 0xFFFFFFFF ^ MMAP_FLAGS)
    jumps.append((len(ins), allow, deny))
    op(_JSET_K, MAP_ANONYMOUS)
    labels[deny] = len(ins)
    op(_RET_K, RET_ERRNO_EPERM)
    labels[allow] = len(ins)
    op(_RET_K, RET_ALLOW)
    for at, if_true, if_false in jumps:
        code, _, _, k = ins[at]
        jt = labels[if_true] - at - 1
        jf = 0 if if_false is None else labels[if_false] - at - 1
        assert 0 <= jt < 256 and 0 <= jf < 256
        ins[at] = (code, jt, jf, k)
    return b"".join(struct.pack("<HBBI", *i) for i in ins)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = None


def prepare() -> None:
    """Load libc's prctl now (dlopen opens files: after the filter it could not)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        _libc.syscall.restype = ctypes.c_long  # (an mmap's address is wider than an int)


def install_filter(fd: int) -> None:
    """Jail the calling (single-threaded) process: see the module docstring. Raises OSError when it cannot."""
    prepare()
    code = _program(fd)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def what_leaks() -> str:
    """What a process could still share with another here ("" when nothing of what the filter must refuse is
    allowed): for the preflight, after the filter. Each probe is harmless when refused and when allowed."""
    n, word = ctypes.c_long, ctypes.c_uint32(0)
    soon = (ctypes.c_long * 2)(0, 1)  # past (absolute) or 1 ns (relative): an allowed wait returns at once
    ts, buf = (ctypes.c_long * 2)(), ctypes.create_string_buffer(8)
    private, wait_bitset_realtime = MAP_PRIVATE | MAP_ANONYMOUS, 9 | 256 | FUTEX_PRIVATE_FLAG
    probes = [
        *((f"clock {c}", 228, (n(c), ts)) for c in (0, 1, 2, 3)),
        ("a shared futex wait", SYS_FUTEX, (ctypes.byref(word), n(0), n(0), soon, n(0), n(-1))),
        ("a wall-clock futex wait", SYS_FUTEX, (ctypes.byref(word), n(wait_bitset_realtime), n(0), soon, n(0), n(-1))),
        ("a hugetlb mapping", SYS_MMAP, (n(0), n(2 << 20), n(3), n(private | 0x40000), n(-1), n(0))),
        ("a shared mapping", SYS_MMAP, (n(0), n(4096), n(3), n(0x01 | MAP_ANONYMOUS), n(-1), n(0))),
        ("getrandom from the host's entropy count", SYS_GETRANDOM, (buf, n(8), n(2))),
        ("MADV_FREE", SYS_MADVISE, (n(0), n(4096), n(8))),
    ]
    for name, nr, args in probes:
        if not (_libc.syscall(n(nr), *args) == -1 and ctypes.get_errno() == 1):
            return f"{name} was allowed"
    return ""
