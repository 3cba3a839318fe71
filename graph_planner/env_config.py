"""The code-repair environment's settings: `env.repair` of a run config (env.kind: repair) and the episode budgets.

planact finds RepairEnvConfig by its entry point (`planact.config_sections`, name `env.repair`): its defaults
are written here once. Import-light on purpose: planact loads this module when it builds its run config.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, model_validator

from graph_planner.corpus.mutate import KINDS, TOKEN_LEVEL
from planact.config_base import ConfigError, StrictConfig

if TYPE_CHECKING:  # planact builds its run config from this module: no import of it at run time
    from planact.config import RunConfig

# One definition for the episode config and the repair team environment (a test run's limit is one setting).
TEST_CPU_S = Field(
    30.0,
    gt=0.0,
    description="CPU-seconds limit of one test run (wall-clock backstop 4x: verdicts do not depend on machine load); a "
    "patch that loops forever costs this much CPU.",
)


class EpisodeConfig(StrictConfig):
    """Budgets of one code-repair episode (graph_planner's PlannerEnv; its EnvLimits are built from this)."""

    steps: int = Field(24, ge=1, description="Actions per episode (malformed ones count).")
    test_runs: int = Field(
        6, ge=0, description="Test runs Repair may start before Submit (Submit's run is always allowed)."
    )
    coverage_runs: int = Field(
        1,
        ge=0,
        description="Explore(coverage) runs per episode: the failing tests' modules on the base commit under the "
        "call recorder, for spectrum-based localisation (counted apart from test_runs; 0 turns it off).",
    )
    test_cpu_s: float = TEST_CPU_S
    episode_s: float = Field(
        600.0, gt=0, description="Wall-clock limit of one episode; past it the next step ends the episode unrewarded."
    )
    read_chars: int = Field(4000, ge=100, description="Characters of source a `read` returns per node.")
    screen_patches: bool = Field(
        True,
        description="Refuse patches that add imports or process/introspection names (turn off only to test the "
        "sandbox).",
    )
    guard_patches: bool = Field(
        True,
        description="Run patched code under the runtime guard: an audit event (exec, open, import, frames, "
        "processes, sockets...) set off by a function the patch changed, that its clean version did not set off, "
        "voids the verdict (turn off only to test the sandbox alone).",
    )
    target_patches: bool = Field(
        True,
        description="Score a patch only when every function it changes is one the task's reference fix changes "
        "(a change elsewhere, such as the package's own test helpers or the `__eq__` its tests compare with, "
        "scores 0 and runs nothing); turn off only to test the layers behind it (check, guard, sandbox).",
    )
    digest_state: bool = Field(
        True,
        description="Void a Submit pass whose module state after some test (the repository's module globals and "
        "what they reach, the test modules' globals) differs from the gold fix's run of the same test: a patch "
        "that widened a tolerance in place instead of fixing the bug (turn off only to test the layers behind it).",
    )


# The mutation kinds a tiny model can repair from what it sees.
TOKEN_KINDS = TOKEN_LEVEL
MAX_PROPOSALS = 256
"""Most repository proposals a function's menu holds (env.repair.proposals, Explore candidates); a median function
has ~600."""


FREE_REPLY_TOKENS = 128  # decoding 'free': the shortest reply limit that fits a small function


class RepairEnvConfig(StrictConfig):
    """Code repair by the planner/actor team (env.kind: repair): the graph planner localises, the patch model edits."""

    # renamed since runs were stored (the resume guard reads stored configs under the new names)
    moved: ClassVar[dict[str, str]] = {"test_timeout_s": "test_cpu_s"}

    corpus: str = Field(
        "runs/rl-corpus",
        description="Corpus folder built by `planact-repair corpus` (train.jsonl, heldout.jsonl, repos/).",
    )
    kinds: list[Literal[KINDS]] = Field(
        default_factory=lambda: list(TOKEN_KINDS),
        min_length=1,
        description="Mutation kinds used for training and evaluation. The default, token-level ones, are what a tiny "
        "actor can repair from what it sees; negate_if and default are repaired by an inverse in the menu (a "
        "condition negated, a literal default changed back); remove_stmt and remove_if only by a repository "
        "proposal (set `proposals`).",
    )
    proposals: int = Field(
        0,
        ge=0,
        le=MAX_PROPOSALS,
        description="Repository proposals in each offered function's menu, after its token edits and inverses: "
        "statements and `if` blocks of its module put back into a gap, and same-named parameters' defaults, "
        "nearest donors first (the function's own statements, then its class's, then the module's; a median "
        "function has ~600). The only route to a removed statement; each one is an option the patch model "
        "scores, so they cost time (0: none).",
    )
    max_function_chars: int = Field(
        1200, ge=100, description="Tasks whose buggy function is longer are skipped (it must fit the actor's context)."
    )
    unseen_function_frac: float = Field(
        0.25,
        ge=0.0,
        lt=1.0,
        description="Fraction of the training packages' functions held out of training and warm start: the 'unseen "
        "functions' split.",
    )
    planner_nodes: int = Field(
        4,
        ge=1,
        le=10,
        description="Functions the planner may read or target (the top of the localisation ranking).",
    )
    localisation: Literal["sbfl", "graph"] = Field(
        "sbfl",
        description="How the offered functions are ranked: 'sbfl' = the failing tests' coverage spectrum (Ochiai) "
        "first, then the graph's ranking; 'graph' = traceback frames and the failing tests' callees only.",
    )
    planner_reads: int = Field(
        2, ge=1, le=4, description="Explore(read) turns before the planner must name its Repair target."
    )
    decoding: Literal["candidates", "free"] = Field(
        "candidates",
        description="'candidates': both roles choose among the options the environment enumerates, sampled from the "
        "model's own distribution over them (tiny models); 'free': the planner still chooses the target "
        "function, the patch model writes the whole corrected function in one fenced python block "
        "(graph_planner.free_edit; any engine; malformed and refused replies score 0 and are counted). A reply "
        "is model text, judged only on tasks with the call jail: free decoding uses only the corpus's jailed "
        "tasks (qualified with `jail: true` in the corpus config or `python -m graph_planner.jail_qualify`).",
    )
    teacher: Literal["top", "traced_edit"] = Field(
        "top",
        description="The planner's warm-start teacher: 'top' targets the top-ranked function; 'traced_edit' targets "
        "the first function with a candidate edit on a traceback line, else the first with any candidate "
        "edit (the rule agent's localisation; needs mark_editable_trace).",
    )
    mark_editable_trace: bool = Field(
        False,
        description="In the planner's observation, mark offered functions with a candidate edit on a traceback line "
        "`(trace+edit)` and those without any candidate edit `(no edit)` (what the rule agent ranks by).",
    )
    planner_labels: Literal["number", "mark"] = Field(
        "number",
        description="How the planner's observation and actions name the offered functions: 'number' by rank ('read "
        "2'); 'mark' by mark and rank among functions with that mark ('read trace+edit 1', 'read fn 2'; "
        "needs mark_editable_trace), so the option's own tokens say what kind of function it names.",
    )
    actor_marks: bool = Field(
        False,
        description="Write the actor's candidate edits on a traceback line as `><line>: <old> -> <new>` (the `>` its "
        "prompt marks those lines with), so that 'edit where the test failed' is one option token shared "
        "by every task (what the rule agent tries first).",
    )
    gigpo_step_weight: float = Field(
        1.0, ge=0.0, description="GiGPO weight of the step-level (anchor-state) advantage of the planner's turns."
    )
    gigpo_gamma: float = Field(0.95, gt=0.0, le=1.0, description="Discount of the planner's turn returns.")
    workers: int = Field(2, ge=1, le=32, description="Sandbox slots that run tests in parallel when scoring a round.")
    test_cpu_s: float = TEST_CPU_S
    eval_unseen_functions: int = Field(
        60,
        ge=1,
        description="Held-out tasks from unseen functions of the training packages per evaluation (at most; below the "
        "split's size they are taken in turn from each package).",
    )
    eval_unseen_packages: int = Field(
        60,
        ge=1,
        description="Held-out tasks from packages never trained on per evaluation (at most; below the split's size "
        "they are taken in turn from each package).",
    )
    eval_unseen_2025: int = Field(
        60,
        ge=1,
        description="Held-out tasks from packages first released in 2025 or later (the corpus's unseen_2025 split: "
        "code a pretrained model cannot have memorised) per evaluation; the split is skipped when the corpus "
        "has none.",
    )
    eval_budget: int = Field(
        2, ge=1, le=8, description="Submits per task at evaluation; solve rates are reported at every budget up to it."
    )
    eval_real_corpus: str = Field(
        "",
        description="A release-history corpus (`planact-repair corpus --history`: a folder holding real.jsonl, or the "
        "JSONL itself) whose fixes from the packages' real release history evaluation adds as split 'real' beside "
        "the held-out ones: same systems, budgets and metric names ('real/team/solve_at_1', ...), plus the share "
        "the localisation and the candidate edits can reach ('real/reach/*'). Empty: no real split.",
    )
    eval_real: int = Field(
        60,
        ge=1,
        description="Real-fix tasks per evaluation when eval_real_corpus is set (at most; below the split's size they "
        "are taken in turn from each package). Every one counts: a task whose fixed function is not offered is "
        "unsolved, not skipped.",
    )
    prompt_style: Literal["compact", "file"] = Field(
        "compact",
        description="'compact': the tiny models' prompts (the function with traceback lines marked, edits written "
        "`<line>: <old> -> <new>`, functions named by rank or mark); 'file': for pretrained models, the "
        "patch model continues the module's own code before the target function and its options are the "
        "whole function as each candidate edit leaves it; the planner is asked in words and names "
        "functions (set the actor's sampling.chat_template: false).",
    )
    context_chars: int = Field(
        3000,
        ge=0,
        le=100_000,
        description="prompt_style 'file': characters of the module before the target function the patch model reads "
        "(~4 per token).",
    )
    sft_extra_sources: int = Field(
        40, ge=0, description="Standard-library modules mutated (unvalidated) for extra warm-start data of the actor."
    )

    @model_validator(mode="after")
    def _teacher_sees(self) -> RepairEnvConfig:
        # The planner imitates its teacher from the observation alone: it must show what the teacher uses.
        if self.teacher == "traced_edit" and not self.mark_editable_trace:
            raise ValueError(
                "teacher 'traced_edit' needs mark_editable_trace: true (the planner must see the marks it imitates)"
            )
        if self.planner_labels == "mark" and not self.mark_editable_trace:
            raise ValueError("planner_labels 'mark' needs mark_editable_trace: true (the labels are the marks)")
        removed = sorted({"remove_stmt", "remove_if"} & set(self.kinds))
        if removed and self.proposals == 0 and self.decoding == "candidates":
            # a removed statement is in no token edit or inverse: every such task would score 0 by construction
            raise ValueError(
                f"kinds {removed} need proposals > 0 (a removed statement is only in the menu as a repository "
                "proposal), or decoding 'free'"
            )
        return self

    def check_run(self, run: RunConfig) -> None:
        """The roles' engines and reply limit fit the decoding mode (called on a run whose env.kind is repair)."""
        # The planner chooses among the offered functions in both modes; in 'free' the actor writes its
        # edit, so any engine may serve it.
        free = self.decoding == "free"
        for role in ("planner",) if free else ("planner", "actor"):
            if getattr(run, role).engine != "hf":
                raise ValueError(
                    f"env.repair.decoding {self.decoding!r} scores the {role}'s candidate sets "
                    f"in-process: {role}.engine must be 'hf'"
                    + ("" if free else " (a served patch model needs decoding: free)")
                )
        if free and run.actor.sampling.max_new_tokens < FREE_REPLY_TOKENS:
            # the reply holds the whole corrected function: a short limit cuts every block open (malformed)
            raise ValueError(
                f"env.repair.decoding 'free': actor.sampling.max_new_tokens must be at least "
                f"{FREE_REPLY_TOKENS} (the patch model writes the whole function)"
            )

    def preflight(self, run: RunConfig) -> None:
        """Before any work starts: the corpus exists and, for free decoding, has training tasks with the call jail."""
        if not (Path(self.corpus) / "train.jsonl").is_file():
            raise ConfigError(
                f"env.repair.corpus: no corpus at {Path(self.corpus).resolve()} (build it: "
                "planact-repair corpus --config configs/repair-rl-corpus.yaml --out runs/rl-corpus)"
            )
        if self.decoding == "free":  # (imported here: a config module stays light to import)
            from graph_planner.provenance import HOW_TO_JAIL
            from graph_planner.tasks import load_tasks

            train = [t for t in load_tasks(self.corpus, split="train") if t.meta.get("mutation") in self.kinds]
            if not any(t.jail for t in train):
                raise ConfigError(
                    f"env.repair.decoding 'free': none of the {len(train)} training tasks of kinds {self.kinds} in "
                    f"{Path(self.corpus).resolve()} has the call jail (task field `jail`), and text a model wrote is "
                    f"judged only there; {HOW_TO_JAIL}"
                )
