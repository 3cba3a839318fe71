"""One test run in the sandbox, and whether its report can be believed.

pytest runs in planact's sandbox (no network, a view holding only the interpreter, pytest, the package's
dependencies and the copy; CPU and wall-clock limits), started by `plugin/planact_boot.py`, which reads
its configuration from stdin before any repository code is imported. Per-test outcomes come over a pipe
only the host reads, each line signed with a key the host made for this run (the descriptor number and
the key are in no environment, argv or file). With `Guard.watch` set, an audit hook ends the run the
moment a function the patch changed sets off an interpreter capability (exec, compile, open, import,
frames, gc walks, ctypes, processes, sockets...) that its clean version did not set off in the same tests.

A run of named tests is believed when its signed report, pytest's exit status and its failure count
agree: status 0 exactly when every phase passed. A confirming run (`confirm=True`) is built differently
(another file name, descriptor and key) and carries two canary tests the host writes with values only it
knows, at random places among the tests (one must fail, one must pass) and a must-fail one last. A
report that disagrees is void ("tampered", every test failed).
"""

from __future__ import annotations

import json
import random
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import sandbox
from graph_planner.corpus.channel import CHANNEL_BYTES, UNSIGNED, canaries, read_channel, tampering
from graph_planner.patch_forms import INTROSPECTION
from graph_planner.patch_policy import CAPABILITY_MODULES
from sandbox.view import SITE, pytest_view

_PLUGIN_DIR = Path(__file__).parent / "plugin"
_BOOT = _PLUGIN_DIR / "planact_boot.py"
_NAME_GUARD = _PLUGIN_DIR / "planact_names.py"  # the boot script loads it from its own per-run copy
_DIGEST = _PLUGIN_DIR / "planact_digest.py"  # the module state digest, likewise
# the call jail (copied whole)
_JAIL = [
    Path(__file__).parent.parent / f"jail{n}.py"
    for n in ("", "_client", "_rewrite", "_wire", "_callback", "_fork", "_clock", "_filter")
]
GUARD_EXIT = 86  # the boot script's exit status when its guard stopped the run (kept equal to it)
JAIL_EXIT = 87  # the boot script's exit status when the call jail could not judge a call (kept equal to it)
JAIL_FAULT = "jail fault"  # a run's status then: every test failed
NAMES = "<names>"  # the boot script's key of the name guard's record (kept equal to it)
PROCESS = "<process>"  # its key of the process-wide events (code run from data wherever it runs)
# What a clean run's record covers: raised whenever the guards come to judge events an older record never
# held (2: the name guard judges `__import__` of a capability module, 2026-11-29). A corpus recorded under
# another version has its record taken again from the base commit when a name or process event stops a run
# (judge.py): against its old record, 37 of funcy's gold fixes stopped on an `import inspect` there.
RECORD_VERSION = 2
COVERAGE = ".planact-coverage.json"


@dataclass(frozen=True)
class Suite:
    """How one repository's tests run: import paths, pytest arguments, limits."""

    source_root: str = "."
    """Folder (relative to the repository) that goes first on PYTHONPATH: "." or "src"."""
    pythonpath: tuple[str, ...] = ()
    """Further absolute folders on PYTHONPATH (unpacked pure-Python dependencies); mounted read-only."""
    pytest_args: tuple[str, ...] = ("-o", "addopts=")
    """Extra pytest arguments; the default drops the project's addopts (coverage plugins, doctest flags
    that need packages the sandbox does not have)."""
    timeout_s: float = 120.0
    """Wall-clock limit of one whole test run (SWE-smith uses 120 s)."""
    cpu_s: float | None = None
    """CPU-seconds limit of the test process; None = the wall-clock limit alone decides (see load_proof)."""
    memory_mb: int = 2048
    """Address-space limit per process."""
    cpu_per_test_s: float = 0.0
    """With `cpu_s`, CPU seconds a mutant's run gets on top of it per test it runs: a failing test's
    traceback costs CPU (~15 ms each, ~30 s for a mutant that fails 2,000 tests), and that cost must stay
    far below the limit for the verdict not to follow CPU time's run-to-run noise (see validate_mutant)."""


# Wall-clock backstop of a CPU-limited run, in multiples of its CPU limit: wide enough that a run slowed
# down by everything else on a loaded 2-core machine (three benchmark processes, two test slots each)
# still finishes, while a run that computes forever is stopped by its CPU limit alone.
WALL_BACKSTOP = 4.0


def load_proof(suite: Suite, seconds: float) -> Suite:
    """`suite` judged by `seconds` of CPU time instead of wall-clock time, so that a verdict (kept or
    dropped mutant, reward 1 or 0) does not depend on how busy the machine was; a run that blocks without
    computing is still stopped, at WALL_BACKSTOP x `seconds`."""
    return replace(suite, timeout_s=WALL_BACKSTOP * seconds, cpu_s=seconds)


@dataclass
class TestRun:
    """Outcome of one test run: per test id passed / failed / skipped, how the process ended, its output."""

    outcomes: dict[str, str] = field(default_factory=dict)
    status: str = "ok"
    seconds: float = 0.0
    output: str = ""
    rc: int | None = None
    coverage: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    cpu_s: float | None = None
    order: list[str] = field(default_factory=list)
    """Test ids in the order the run executed them."""
    tampered: str = ""
    """Why the run's own report was not believed ("" when it was): its outcomes are then all failures."""
    guard: tuple[str, str] | None = None
    """(event, function) when the guard stopped the run: a changed function set off that event."""
    record: dict[str, list[str]] = field(default_factory=dict)
    """In record mode: function -> the audit events it set off in this run."""
    digests: list[tuple[str, dict[str, str | None]]] = field(default_factory=list)
    """With `Guard.digest`: (test id, module state keys changed since the previous digest) in run order."""
    digest_s: float = 0.0
    """Seconds the test process spent taking those digests."""

    def passed(self) -> set[str]:
        """Ids of the tests that passed."""
        return {t for t, o in self.outcomes.items() if o == "passed"}

    @property
    def tail(self) -> str:
        """The last 2000 characters of the run's output."""
        return self.output[-2000:]


@dataclass(frozen=True)
class Guard:
    """What the runtime guard watches in one run."""

    watch: tuple[tuple[str, int, int, str], ...] = ()
    """(path relative to the copy, first line, last line, function name) of every function the patch changed
    (matched by the absolute path Python compiled the file under, in the copy)."""
    allowed: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(function name, events) the clean version of that function set off in the same tests."""
    record: bool = False
    """Record which watched function sets off which event instead of stopping the run (the clean code)."""
    digest: bool = False
    """Report the module state digest after each passed test call (graph_planner/state_digest.py)."""
    jail: tuple = ()
    """(module, path relative to the copy, qualname, first line, last line, package, the file's base text): run
    that function of the patched file only in the call jail (graph_planner/jail.py); () for none."""


def name_guard_config(file: str | Path = _NAME_GUARD, modules: list[str] = ()) -> dict:
    """The boot script's name guard settings: the guard's file (a run's own copy), frame and code words,
    capability modules, and the modules (the host's canaries) it may import without judging."""
    return {
        "file": str(file),
        "words": INTROSPECTION.pattern,
        "capability": sorted(CAPABILITY_MODULES),
        "modules": list(modules),
    }


def _jail_config(jail: tuple, workdir: Path, folder: Path, suite: Suite) -> dict:
    """The boot script's call jail settings: the jail's per-run copy, the target, its limits."""
    module, path, qualname, first, last, package, base = jail
    per_call = max(2.0, min(10.0, suite.cpu_s or suite.timeout_s))
    return {
        "lib": str(folder / "jail_client.py"),
        "module": module,
        "file": str(workdir / path),
        "qualname": qualname,
        "first": first,
        "last": last,
        "package": package,
        "call_s": per_call,  # CPU seconds (the child's RLIMIT_CPU); the clock stops it at wall_factor x
        "wall_factor": WALL_BACKSTOP,
        # the run's own budget for every jailed call together (on the clock, so wall_factor x it)
        "total_s": suite.cpu_s or suite.timeout_s,
        "max_calls": 200_000,
        # a call's callbacks into the tests' callables (graph_planner/jail_callback.py): count, bytes sent
        "max_callbacks": 100_000,
        "callback_mb": 256,
        "memory_mb": min(1024, suite.memory_mb // 2),
        "base": base,  # on disk once the zygote has read the patch: a subprocess imports the unpatched code
    }


def run_in_place(
    workdir: str | Path,
    tests: list[str] | None = None,
    suite: Suite = Suite(),
    coverage: bool = False,
    guard: Guard = Guard(),
    confirm: bool = False,
) -> TestRun:
    """Run pytest (all tests or `tests`, in that order) in the sandbox with `workdir` as the only writable
    place, under `guard`; named tests are judged as the module docstring says (`confirm`: the second,
    differently built run with canaries)."""
    workdir = Path(workdir).resolve()
    (workdir / COVERAGE).unlink(missing_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="planact-run-"))
    folder.chmod(0o755)
    boot, name_guard, digest = (folder / f"{secrets.token_hex(6)}.py" for _ in range(3))  # per-run names:
    for source, copy in ((_BOOT, boot), (_NAME_GUARD, name_guard), (_DIGEST, digest)):  # nothing is keyed to them
        shutil.copyfile(source, copy)
        copy.chmod(0o644)
    jail_dir = folder / f"jail-{secrets.token_hex(6)}"
    if guard.jail:
        jail_dir.mkdir(mode=0o755)
        for source in _JAIL:
            shutil.copyfile(source, jail_dir / source.name)
            (jail_dir / source.name).chmod(0o644)
    # --rootdir: test ids stay relative to the copy whatever else is collected (the canaries live outside)
    args = ["-q", "-rf", "--tb=short", "-p", "no:cacheprovider", f"--rootdir={workdir}", *suite.pytest_args]
    if coverage:
        args += ["-p", "planact_coverage"]
    named, canary = list(tests or []), {}
    if confirm and named:
        named, canary = canaries(folder, named)
    args += named
    key = secrets.token_bytes(16)

    def config(channel: int | None) -> bytes:
        watch = [[str(workdir / p), first, last, name] for p, first, last, name in guard.watch]
        cfg = {
            "channel": channel,
            "move_to": random.randrange(64, 250),  # under the sandbox's 256 open files
            "key": key.hex(),
            "watch": watch,
            "allowed": {name: list(events) for name, events in guard.allowed},
            "record": guard.record,
            # a canary's module is its test's name
            "names": name_guard_config(name_guard, [suffix[2:] for suffix in canary]),
            "args": args,
            "digest": str(digest) if guard.digest else None,
            "jail": _jail_config(guard.jail, workdir, jail_dir, suite) if guard.jail else None,
        }
        return json.dumps(cfg).encode()

    limits = sandbox.Limits(
        timeout_s=suite.timeout_s,
        cpu_s=suite.cpu_s,
        memory_mb=suite.memory_mb,
        processes=64,
        open_files=256,
        output_bytes=32 * 1024,
        file_mb=64,
    )
    # Only the plugins named here: the entry-point plugins installed beside planact (xdist, anyio,
    # hypothesis, timeout, ...) cost ~0.8 s of every ~1.1 s run's startup and no corpus suite uses them.
    pythonpath = [str(workdir / suite.source_root), SITE, *suite.pythonpath, str(_PLUGIN_DIR)]
    env = {"PYTHONPATH": ":".join(pythonpath), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    shown = [*suite.pythonpath, str(_PLUGIN_DIR), str(folder)]
    view = pytest_view(tuple(p for p in shown if Path(p).exists()))
    argv = [sandbox.python(), "-s", str(boot)]
    try:
        done = sandbox.run(
            argv,
            stdin=config,
            workdir=workdir,
            limits=limits,
            env=env,
            view=view,
            channel=True,
            channel_bytes=CHANNEL_BYTES,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report = read_channel(done.channel, key)
    outcomes, order = report.outcomes, report.order
    ids = {next((t for t in outcomes if t.endswith(suffix)), suffix): want for suffix, want in canary.items()}
    tampered = ""
    # Only a run that ended on its own has a report to judge: one the host stopped (CPU or wall limit,
    # memory) is that failure, whatever it had reported so far.
    ended_itself = done.status in ("ok", "error")
    jailed = ""
    if guard.jail and (done.returncode == JAIL_EXIT or report.jail):
        jailed = report.jail or "the call jail ended the run"
    if jailed:
        pass  # the run ended at the fault, by design: its exit status and counts are no forgery
    elif done.returncode == GUARD_EXIT or report.guard:
        event, where = report.guard or ("an event it did not report", "a changed function")
        tampered = f"the guard stopped the run: {where} set off {event}"
    elif tests and done.channel_truncated:
        tampered = "the report passed the channel's size limit (its last lines would be lost)"
    elif tests and report.problem == UNSIGNED:
        tampered = report.problem  # no honest run writes a line the plugin did not sign, passes or not
    elif tests and ended_itself and any(o == "passed" for t, o in outcomes.items() if t not in ids):
        tampered = tampering(report, done.returncode, ids)
    outcomes = {t: o for t, o in outcomes.items() if t not in ids}
    order = [t for t in order if t not in ids]
    cov = {}
    if coverage and (workdir / COVERAGE).is_file():
        cov = {k: [tuple(x) for x in v] for k, v in json.loads((workdir / COVERAGE).read_text()).items()}
    # A session that ended normally is a verdict even with no outcome (a module that no longer imports
    # stops pytest at collection): its named tests are missing, so they failed.
    finished = bool(outcomes) or report.end is not None
    status = done.status if done.status in ("timeout", "memory") or not finished else "ok"
    if tampered:
        outcomes, status = {t: "failed" for t in outcomes}, "tampered"
    elif jailed:  # a call the jail could not judge (a timeout, a crash, a value no plain data): no test passes
        outcomes, status = {t: "failed" for t in outcomes}, JAIL_FAULT
    return TestRun(
        outcomes,
        status,
        done.seconds,
        done.stdout + done.stderr + (f"\n[call jail] {jailed}\n" if jailed else ""),
        done.returncode,
        cov,
        report.seconds,
        done.cpu_s,
        order,
        tampered,
        report.guard,
        report.record,
        report.digests if not tampered else [],
        report.digest_s,
    )
