"""Judging a patch: test runs on a clean checkout of the base commit, their cache, and the gold patch's check.

Every verdict an agent gets comes through `run_patch`: the base commit checked out afresh, the patch's
files written, the tests run in the sandbox under a CPU-time limit, with the runtime guard watching
every function the patch changed. An event the guard stops is held against the patch unless the clean
version of the same function set off the same event in the clean suite (recorded when the corpus was
built; for older corpora, the base commit's run of the same tests, recorded once, on demand). A
pass is judged twice: a second run built differently (another boot file, descriptor, key, canaries at
random places) must agree, or the verdict is void. Outcomes are cached by (task, patch, tests) and the
verdict rules' version; only confirmed passes and believed failures are cached, never a void run.
`gold_submit` sends a task's own reference fix down the same path, which is how the corpus builder
proves a task solvable. Text a model wrote runs only on a task with the call jail: a patch of origin
"model" (the default) on any other task is not run at all (graph_planner.provenance).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace

from graph_planner.corpus.fetch import git
from graph_planner.corpus.testrun import _DIGEST, JAIL_FAULT, NAMES, PROCESS, RECORD_VERSION, Guard, load_proof
from graph_planner.env_config import EpisodeConfig
from graph_planner.patch_check import changed_functions, outer_functions
from graph_planner.patching import PatchError, apply_diff, parse_diff, screen
from graph_planner.provenance import GOLD, MODEL, UNJUDGED, unjudged, unjudged_result
from graph_planner.pyparse import parse
from graph_planner.result_cache import ResultCache
from graph_planner.state_digest import differs, reference
from graph_planner.tasks import RepairTask

DEFAULT_TEST_CPU_S = EpisodeConfig().test_cpu_s
STATE_REFERENCE = "<state digest>"  # the result cache's "file" under which a task's gold state is kept
# A gold reference is kept under the digest code's own hash: a reference taken by other digest code is never
# compared with this one's (review 8: a change of how defaults hashed, with the rules' version unchanged, made
# every cached reference refuse correct fixes).
DIGEST_CODE = hashlib.sha256(_DIGEST.read_bytes()).hexdigest()[:16]


def watched(task: RepairTask, patch: dict[str, str]) -> tuple[Guard, Guard]:
    """(the guard of the patched code, the recorder of the clean code): every function the patch changed,
    at its lines in the patched file and in the base file, under one name."""
    new, old = [], []
    for path, text in sorted(patch.items()):
        if not path.endswith(".py"):
            continue
        for name, old_lines, new_lines in changed_functions(base_text(task, path), text):
            new.append((path, *new_lines, f"{path}::{name}"))
            old.append((path, *old_lines, f"{path}::{name}"))
    return Guard(tuple(new)), Guard(tuple(old), record=True)


_FIX_SITES: dict[str, frozenset[str]] = {}
_FIX_LOCK = threading.Lock()


def fix_sites(task: RepairTask) -> frozenset[str]:
    """Every function the task's gold patch changes, as "path::function" (empty when it changes none)."""
    with _FIX_LOCK:
        if task.instance_id not in _FIX_SITES:
            try:
                files = {p for p in parse_diff(task.gold_patch) if p.endswith(".py")}
                texts = apply_diff(task.gold_patch, lambda p: base_text(task, p), files) if files else {}
            except PatchError:
                texts = {}
            _FIX_SITES[task.instance_id] = frozenset(
                f"{path}::{name}"
                for path, text in texts.items()
                for name, *_ in changed_functions(base_text(task, path), text)
            )
        return _FIX_SITES[task.instance_id]


def off_target(task: RepairTask, patch: dict[str, str]) -> list[str]:
    """The functions `patch` changes that the task's fix does not: the bug lives in the fix's functions, so a
    change elsewhere (the package's own test helpers, a value class's `__eq__` the tests compare with) makes
    the tests pass without fixing it, or plants data for unchanged code to run."""
    if not any(p.endswith(".py") for p in patch):
        return []
    sites = fix_sites(task)
    if not sites:
        return []
    changed = [
        f"{p}::{n}"
        for p, t in sorted(patch.items())
        if p.endswith(".py")
        for n, *_ in changed_functions(base_text(task, p), t)
    ]
    return [c for c in changed if c not in sites]


def jail_target(task: RepairTask, patch: dict[str, str]) -> tuple | None:
    """Guard.jail for `patch` on a task that qualifies for the call jail: (module, path, qualname, first line,
    last line, package) of its target function in the patched file and the file's base text; None when that
    function is not there."""
    spec = task.jail
    text = patch.get(spec["path"])
    text = base_text(task, spec["path"]) if text is None else text
    try:
        found = [fn for q, fn in outer_functions(parse(text)) if q == spec["qualname"]]
    except SyntaxError:
        return None
    if len(found) != 1:
        return None
    fn = found[0]
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    package, base = spec["module"].split(".")[0], base_text(task, spec["path"])
    return (spec["module"], spec["path"], spec["qualname"], first, fn.end_lineno, package, base)


def _record_lacks(task: RepairTask, key: str) -> bool:
    """True when the task's clean record cannot say what the clean code set off under `key` (NAMES or PROCESS):
    it holds no such key, or it was taken under another record version (guards that judge more than it saw)."""
    return key not in task.clean_events or task.record_version != RECORD_VERSION


def _allowing(guard: Guard, events: dict[str, list[str]]) -> Guard:
    """`guard` letting each watched function set off what `events` (function -> events) says it did clean."""
    # and the name guard's (file, function, gadget, name) and the process-wide events' (event, place, detail)
    names = {name for *_, name in guard.watch} | {NAMES, PROCESS}
    return Guard(guard.watch, tuple((n, tuple(e)) for n, e in sorted(events.items()) if n in names))


def _run(runtime, task: RepairTask, patch: dict[str, str], tests: list[str], suite, guard: Guard, confirm=False):
    work = runtime.reset(task)  # a clean checkout: nothing a previous run wrote survives
    for path, text in patch.items():
        (work / path).write_text(text)
    return runtime.run_tests(tests, suite, guard=guard, confirm=confirm)


def _clean_record(runtime, cache: ResultCache, task: RepairTask, tests: list[str], suite, recorder: Guard) -> dict:
    """Which audit events each watched function sets off in the base commit's run of `tests`."""
    key = (task.instance_id, tuple(tests), recorder.watch)
    if key not in cache.records:
        cache.records[key] = _run(runtime, task, {}, tests, suite, recorder).record
    return cache.records[key]


def _guarded_run(
    runtime, cache: ResultCache, task: RepairTask, patch: dict[str, str], tests: list[str], suite, guarded, digest
):
    """The static path's run under the runtime guard (run again against the base commit's record when the guard
    stopped a function the corpus has no record for): (the guard it ran under, the run, seconds)."""
    guard, recorder = watched(task, patch) if guarded else (Guard(), Guard())
    guard = replace(_allowing(guard, task.clean_events), digest=digest)
    run = _run(runtime, task, patch, tests, suite, guard)
    seconds = run.seconds
    if (
        run.guard
        and guard.watch
        and (not task.clean_events or (run.guard[1] in (NAMES, PROCESS) and _record_lacks(task, run.guard[1])))
    ):
        # a corpus without the clean suite's record: the buggy base commit's run of Submit's whole test list
        # stands in, whatever this run's mode. (Its run of the same tests did not: a fixed function returns
        # where the bug raised, its callers go on into code the buggy FAIL_TO_PASS run never reached, and
        # the gold fix of a mutation task, funcy's get_argnames, was voided by an unchanged getattr there;
        # Submit mode already allowed what the whole list sets off.)
        record = _clean_record(runtime, cache, task, task.submit_tests(), suite, recorder)
        event, where = run.guard
        if event in record.get(where, ()):  # the function did the same before the patch: not its doing
            # the confirming run below is judged against the same baseline (it once kept the bare guard, and
            # voided every release-history gold fix whose tests make the package call getattr or
            # import_module with a name the guard keys)
            guard = replace(_allowing(guard, {**task.clean_events, **record}), digest=digest)
            run = _run(runtime, task, patch, tests, suite, guard)
            seconds += run.seconds
    return guard, run, seconds


def _judged(
    runtime,
    cache: ResultCache,
    task: RepairTask,
    patch: dict[str, str],
    tests: list[str],
    suite,
    guarded,
    digest,
    both=False,
):
    """The patch's run of `tests` under the guard and, where every test passed and nothing was voided, the
    confirming run: (run, confirming run or None, seconds). `digest`: the first run reports its module state
    digests (`both`: the confirming run too, as the gold fix's reference needs). A task that qualifies for
    the call jail runs its target function in the jail: no patched code runs in the test process, so there is
    no guard to watch and no state to digest, but its pass is judged twice all the same. A jailed child has
    randomness no filter takes away (getrandom, RDRAND, a new zygote's hash seed), so a body that guesses
    among k answers where no test tells it which passes one run in k; judged once, that luck was a confirmed
    pass and entered the result cache (review 20, A24). The confirming run is a new sandbox and zygote."""
    if task.jail:
        guard = Guard(jail=jail_target(task, patch))
        run = _run(runtime, task, patch, tests, suite, guard)
        seconds = run.seconds
    else:
        guard, run, seconds = _guarded_run(runtime, cache, task, patch, tests, suite, guarded, digest)
    again = None
    if not run.tampered and run.status == "ok" and all(run.outcomes.get(t) == "passed" for t in tests):
        # A pass is judged twice: a forger keyed to one run's build meets another build and other canaries.
        # not digested but for a reference: a forge must change state in the first run to pass it at all
        again = _run(runtime, task, patch, tests, suite, replace(guard, digest=digest and both), confirm=True)
        seconds += again.seconds
    return run, again, seconds


def state_reference(
    runtime, cache: ResultCache, task: RepairTask, tests: list[str], suite, guarded: bool = True
) -> dict:
    """The gold fix's module state after each of `tests` (state_digest.reference of its two runs), computed
    once per task and tests and kept in the result cache beside the task's other results."""
    key = ResultCache.key(task.instance_id, {STATE_REFERENCE: DIGEST_CODE}, tests)
    hit = cache.get_reference(key)
    if hit is not None:
        return hit
    try:
        gold = gold_texts(task)
    except PatchError as e:
        ref = {"none": f"gold patch does not apply: {e}"}
    else:
        run, again, _ = _judged(runtime, cache, task, gold, tests, suite, guarded, True, both=True)
        if (
            again is None
            or again.tampered
            or again.status != "ok"
            or any(again.outcomes.get(t) != "passed" for t in tests)
        ):
            ref = {"none": "the gold fix does not pass these tests"}  # nothing to compare with: the check is off
        else:
            ref = reference(run.digests, again.digests)
    cache.put_reference(key, ref)
    return ref


def run_patch(
    runtime,
    cache: ResultCache,
    task: RepairTask,
    patch: dict[str, str],
    tests: list[str],
    mode: str,
    cpu_s: float,
    guarded: bool = True,
    targeted: bool = True,
    digest: bool | None = None,
    origin: str = MODEL,
) -> dict:
    """`tests` on a clean checkout of the task's base commit plus `patch` (path -> text), cached by
    (task, patch, tests): a cached outcome carries 'cached': True. A pass carries 'confirmed': True.
    `guarded=False` (only to test the sandbox alone) runs without the runtime guard; `targeted=False` (only to
    test the layers behind it) also runs a patch that changes functions the task's fix does not. `digest` (by
    default on in "submit" mode, the one that earns reward): a pass whose module state after some test is not
    the gold fix's is void (graph_planner/state_digest.py). `origin` (graph_planner.provenance): where the
    patch's code came from; "model", the default, is run only on a task with the call jail, and elsewhere
    scores 0 with status UNJUDGED before anything runs (an empty patch holds no one's text: the bug is run)."""
    limit = min(task.suite.timeout_s, cpu_s)  # CPU capped by the suite's wall-clock limit (one thread)
    # first, before the cache: a static verdict of the same text (a menu edit's, an earlier run's) may be there
    if patch and unjudged(task, origin):
        return unjudged_result(mode, tests, limit)
    digest = (mode == "submit" if digest is None else digest) and not task.jail
    # a jailed task always: the jail holds only its target function, a change elsewhere would run unjailed
    outside = off_target(task, patch) if targeted or task.jail else []
    if outside:  # before the cache (an untargeted verdict may be there): a change outside the fix's functions
        # scores 0 whatever the tests say, and nothing runs
        result = {"mode": mode, "status": "off target", "rc": None, "seconds": 0.0, "passed": 0}
        result.update(failed=sorted(tests)[:20], n_failed=len(tests), cpu_s=limit)
        # (the fix's own functions stay unnamed: an agent must not read where the bug is from a verdict)
        result["tail"] = f"changes {', '.join(outside)}: outside the functions where this task's bug can be fixed"
        return result
    if task.jail and jail_target(task, patch) is None:
        result = {"mode": mode, "status": JAIL_FAULT, "rc": None, "seconds": 0.0, "passed": 0, "cpu_s": limit}
        result.update(failed=sorted(tests)[:20], n_failed=len(tests), tail="the jailed function is missing")
        return result
    # a jailed verdict is its own (another check, another run): never one judged the other way
    key = ResultCache.key(
        task.instance_id, {**patch, "<call jail>": repr(task.jail)} if task.jail else patch, tests, digest
    )
    cached = cache.get(key)
    # A timeout cached before runs were judged by CPU time (no "cpu_s") may only have been a loaded
    # machine: judge it again rather than keep a reward of 0 that the patch may not deserve.
    if cached is not None and not (cached.get("status") == "timeout" and "cpu_s" not in cached):
        return {**cached, "cached": True}
    suite = load_proof(task.suite, limit)
    run, again, seconds = _judged(runtime, cache, task, patch, tests, suite, guarded, digest)
    wanted = set(tests)
    failed = sorted(t for t in wanted if run.outcomes.get(t) != "passed")
    tampered = run.tampered
    if again is not None:
        missing = sorted(t for t in wanted if again.outcomes.get(t) != "passed")
        if again.tampered or again.status != "ok" or missing:
            why = again.tampered or f"{again.status}, {len(missing)} named tests not passed"
            tampered = f"the confirming run disagrees ({why})"
            failed = sorted(wanted)
        elif digest:
            # the tests passed; with the state they compared against the gold fix's? (the reference's own
            # runs reset the working copy: it gets the patch back after)
            ref = state_reference(runtime, cache, task, tests, suite, guarded)
            work = runtime.reset(task)
            for path, text in patch.items():
                (work / path).write_text(text)
            tampered = differs(ref, run.digests)
            failed = sorted(wanted) if tampered else failed
    result = {
        "mode": mode,
        "status": "tampered" if tampered else run.status,
        "rc": run.rc,
        "seconds": round(seconds, 2),
        "passed": len(wanted) - len(failed),
        "failed": failed[:20],
        "n_failed": len(failed),
        "tail": run.tail[-1500:],
        "cpu_s": limit,
        # CPU seconds the judged runs took (the sandbox's count; the clean record's runs aside)
        "used_cpu_s": round(sum(r.cpu_s or 0.0 for r in (run, again) if r is not None), 3),
    }
    if digest:  # what the module state digests cost this verdict's runs (seconds in the test process)
        result["digest_s"] = round(run.digest_s, 3)
    if task.jail:
        result["jailed"] = True
    if tampered:
        # a void verdict scores 0, is counted, and never enters the cache every later run and seed reads
        return {**result, "tampered": tampered}
    if not failed:
        result["confirmed"] = True
    if guarded:  # an unguarded verdict never stands in for a guarded one
        cache.put(key, result)
    return result


def passed(result: dict) -> bool:
    """Every wanted test of a run passed."""
    return result.get("status") == "ok" and not result.get("failed")


def gold_submit(runtime, task: RepairTask, cpu_s: float = DEFAULT_TEST_CPU_S, digest: bool = False) -> str:
    """Why the task's own gold patch fails the path an agent's patch takes ("" when it resolves the task):
    applied to the base commit, through the patch check, then Submit's run of FAIL_TO_PASS + PASS_TO_PASS
    in the task's order, on a clean checkout in the sandbox. `digest`: also compared with its own module state
    reference (two more runs; what a nondeterministic state would refuse: the corpus builder leaves it off)."""
    try:
        texts = gold_texts(task)
    except PatchError as e:
        return f"gold patch does not apply: {e}"
    why = submit_texts(runtime, ResultCache(), task, texts, cpu_s, digest, origin=GOLD)
    return why and f"gold patch {why}"


def gold_texts(task: RepairTask) -> dict[str, str]:
    """The files the task's gold patch changes, with the patch applied to the base commit (raises PatchError)."""
    files = set(git(task.repo_dir, "ls-tree", "-r", "--name-only", task.base_commit).splitlines())
    return apply_diff(task.gold_patch, lambda p: base_text(task, p), {f for f in files if f.endswith(".py")})


def base_text(task: RepairTask, path: str) -> str:
    """A file of the task's base commit (the buggy code)."""
    return git(task.repo_dir, "show", f"{task.base_commit}:{path}", strip=False)


def submit_texts(
    runtime,
    cache: ResultCache,
    task: RepairTask,
    texts: dict[str, str],
    cpu_s: float = DEFAULT_TEST_CPU_S,
    digest: bool = True,
    origin: str = MODEL,
) -> str:
    """Why new file texts (path -> text) fail Submit ("" when they resolve the task): the patch check against
    the base commit, then FAIL_TO_PASS + PASS_TO_PASS in the task's order on a clean checkout (text of
    `origin` "model" only on a task with the call jail)."""
    if unjudged(task, origin):
        return UNJUDGED
    refused = {p: r for p, t in texts.items() if (r := screen(base_text(task, p), t, not task.jail))}
    if refused:
        return f"refused by the patch check: {refused}"
    result = run_patch(runtime, cache, task, texts, task.submit_tests(), "submit", cpu_s, digest=digest, origin=origin)
    if passed(result):
        return ""
    what = (
        result.get("tampered") or f"{result['n_failed']} of its tests fail"
        if result["status"] in ("ok", "tampered")
        else result["status"]
    )
    return f"fails Submit ({what})"
