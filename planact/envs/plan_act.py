"""Synthetic Plan/Act environment: instructions over digit lists.

The planner sees only an instruction ("sort the digits, but first add one to
each digit") and must emit a plan in a tiny plan language ("inc>sort"). The
actor sees only the plan and the data ("inc>sort:3141=") and must produce the
answer ("2245"). The verifier knows the true plan, so it scores exactly.

Why RL has something SFT cannot give here: the planner's teacher is
imperfect. For "B, but first A" instructions it writes the plan in text order
("B>A", wrong) with probability `teacher_order_error`. A model trained on those
demonstrations imitates the mixture; only reward reveals which order is right.

Reward credit (documented, configurable in CreditConfig):
* actor: 1 if its answer equals the task's true answer ("outcome"), or if it
  equals the given plan applied to the data ("plan_fidelity"); 0 when the
  plan was malformed and `actor_requires_valid_plan` is set.
* planner: mean outcome of the actor samples that executed its plan.
Malformed plans and answers score 0 and are counted; nothing here raises on
model output.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from planact.config import EnvConfig

OPS = ("rev", "sort", "inc", "rot", "swap")
WORDINGS = {
    "rev": ("reverse the list", "flip the order", "read it backwards", "mirror the digits"),
    "sort": ("sort the digits", "put them in order", "arrange ascending", "order low to high"),
    "inc": ("add one to each digit", "increment every digit", "raise each digit by one", "bump all digits up"),
    "rot": ("rotate left by one", "move the first digit to the end", "shift everything left", "cycle the list once"),
    "swap": ("swap the ends", "exchange first and last", "switch the end digits", "trade the outer digits"),
}
PLAN_SEP = ">"
CHARSET_PLAN = frozenset("abcdefghijklmnopqrstuvwxyz" + PLAN_SEP)
MAX_PLAN_OPS = 3


def apply_op(op: str, digits: str) -> str:
    """Apply one plan operation to a digit string."""
    if op == "rev":
        return digits[::-1]
    if op == "sort":
        return "".join(sorted(digits))
    if op == "inc":
        return "".join(str((int(d) + 1) % 10) for d in digits)
    if op == "rot":
        return digits[1:] + digits[:1]
    if op == "swap":
        return digits if len(digits) < 2 else digits[-1] + digits[1:-1] + digits[0]
    raise KeyError(op)


def execute_plan(ops: list[str], digits: str) -> str:
    """Apply the operations left to right."""
    for op in ops:
        digits = apply_op(op, digits)
    return digits


def parse_plan(text: str) -> list[str] | None:
    """Parse 'inc>sort' into ['inc', 'sort']; None when malformed."""
    parts = [p.strip() for p in text.strip().split(PLAN_SEP)]
    if not parts or len(parts) > MAX_PLAN_OPS or any(p not in OPS for p in parts):
        return None
    return parts


def format_plan(ops: list[str]) -> str:
    """The plan language's surface form."""
    return PLAN_SEP.join(ops)


@dataclass(frozen=True)
class Task:
    """One instruction over one digit list, with its ground truth."""

    task_id: str
    instruction: str
    data: str
    ops: tuple[str, ...]
    answer: str
    but_first: bool

    def to_dict(self) -> dict:
        """Plain dict (for JSON and Prefect payloads)."""
        return asdict(self)


def planner_prompt(task: Task | dict) -> str:
    """What the planner sees: the instruction only."""
    instruction = task.instruction if isinstance(task, Task) else task["instruction"]
    return f"{instruction} ="


def actor_prompt(plan_text: str | None, data: str) -> str:
    """What the actor sees: the plan (empty on barrier fallback) and the data."""
    return f"{plan_text or ''}:{data}="


_HELDOUT: dict[str, tuple[tuple[Task, ...], frozenset]] = {}  # env config (JSON) -> held-out tasks and their keys


class PlanActEnv:
    """Procedural, seeded task source with a held-out split and teacher demonstrations."""

    def __init__(self, cfg: EnvConfig, seed: int = 0):
        self.cfg = cfg
        self.seed = seed
        # Every stage of a round builds its env afresh: the held-out split is made once per env config.
        key = cfg.model_dump_json()
        if key not in _HELDOUT:
            heldout = tuple(self._generate(random.Random(cfg.heldout_seed), cfg.heldout_size, exclude=set()))
            _HELDOUT[key] = (heldout, frozenset((t.instruction, t.data) for t in heldout))
        heldout, self._heldout_keys = _HELDOUT[key]
        self.heldout = list(heldout)

    def _make_task(self, rng: random.Random) -> Task:
        cfg = self.cfg
        n = rng.randint(cfg.min_ops, cfg.max_ops)
        ops = [rng.choice(OPS) for _ in range(n)]
        words = [rng.choice(WORDINGS[op]) for op in ops]
        data = "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(cfg.min_len, cfg.max_len)))
        but_first = n > 1 and rng.random() < cfg.but_first_prob
        if but_first:
            # "B, then C, but first A": the first op is said last.
            instruction = ", then ".join(words[1:]) + ", but first " + words[0]
        else:
            instruction = ", then ".join(words)
        return Task("", instruction, data, tuple(ops), execute_plan(ops, data), but_first)

    def _generate(self, rng: random.Random, count: int, exclude: set) -> list[Task]:
        out: list[Task] = []
        while len(out) < count:
            t = self._make_task(rng)
            if (t.instruction, t.data) in exclude:
                continue
            out.append(Task(f"{rng.getrandbits(48):012x}", t.instruction, t.data, t.ops, t.answer, t.but_first))
        return out

    def sample_tasks(self, round_idx: int, count: int | None = None) -> list[Task]:
        """Training tasks for a round: deterministic in (seed, round), disjoint from held-out."""
        rng = random.Random(f"{self.seed}:train:{round_idx}")
        return self._generate(rng, count or self.cfg.tasks_per_round, self._heldout_keys)

    # --- teacher demonstrations (for the supervised warm start) ---

    def teacher_plan(self, task: Task, rng: random.Random) -> str:
        """The imperfect teacher: 'but first' plans are written in text order with teacher_order_error."""
        ops = list(task.ops)
        if task.but_first and rng.random() < self.cfg.teacher_order_error:
            ops = ops[1:] + ops[:1]
        return format_plan(ops)

    def planner_demos(self, count: int, rng: random.Random) -> list[tuple[str, str]]:
        """(prompt, target) pairs for the planner's warm start."""
        tasks = self._generate(rng, count, self._heldout_keys)
        return [(planner_prompt(t), self.teacher_plan(t, rng)) for t in tasks]

    def actor_demos(self, count: int, rng: random.Random) -> list[tuple[str, str]]:
        """(prompt, target) pairs for the actor's warm start: any valid plan, executed exactly."""
        out = []
        for _ in range(count):
            ops = [rng.choice(OPS) for _ in range(rng.randint(1, max(self.cfg.max_ops, 1)))]
            data = "".join(str(rng.randint(0, 9)) for _ in range(rng.randint(self.cfg.min_len, self.cfg.max_len)))
            out.append((actor_prompt(format_plan(ops), data), execute_plan(ops, data)))
        return out


@dataclass
class Verdict:
    """The verifier's judgement of one actor answer."""

    outcome: float  # 1.0 iff the answer equals the task's true answer
    fidelity: float  # 1.0 iff the answer equals the given plan applied to the data
    plan_valid: bool
    answer_valid: bool


def verify(task: dict, plan_text: str | None, answer_text: str) -> Verdict:
    """Score one (plan, answer) pair for a task; never raises on malformed output."""
    ops = parse_plan(plan_text) if plan_text is not None else None
    answer = (answer_text or "").strip()
    answer_valid = answer.isdigit() and len(answer) == len(task["data"])
    outcome = float(answer_valid and answer == task["answer"])
    fidelity = float(answer_valid and ops is not None and answer == execute_plan(ops, task["data"]))
    return Verdict(outcome, fidelity, ops is not None, answer_valid)
