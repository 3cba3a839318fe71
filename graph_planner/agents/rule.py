"""The rule agent: a fixed localise-then-try strategy, the baseline every learned agent is compared with.

  1. find: anchor on the traceback in the problem statement and the failing tests' names;
  2. expand: the functions the failing tests call (1 hop);
  3. coverage: rank functions by the failing tests' coverage spectrum (SBFL), when the budget allows;
  4. memory: add the best-ranked functions (the SBFL ranking first, then traceback frames innermost first,
     then called functions);
  5. read each remembered function and enumerate its candidate edits (graph_planner.candidates),
     one-token ones first (a token-level operator's inverse, a `not` taken off a condition), those on a
     traceback line first, then conditions negated and defaults changed; with `proposals`, the
     environment's menus (Explore candidates), whose statements of the module put back come last, except
     a binding of a name the traceback reports undefined (`NameError: name 'x' is not defined`), which
     comes first: the error names the statement that is missing; and the first two proposals of a function
     whose own code shows a defect (graph_planner.defects: a branch that lost its binding, a container
     never filled, an emptied branch), which come before every token edit;
  6. Repair with one candidate at a time until the failing tests pass or the test budget is spent; a
     function whose edit came back "off target" (not where this task's bug can be fixed) is not tried again;
  7. Submit.
It decides only from observations, like a model would.
"""

from __future__ import annotations

import re

from graph_planner.candidates import Candidate, from_read, function_menu
from graph_planner.defects import pointed
from graph_planner.graph.build import is_test_file, test_node
from graph_planner.graph.search import PYTEST_FRAME
from graph_planner.unbound import bound_name

POINTED_FIRST = 2  # proposals a function whose code shows a defect gets before every token edit
UNDEFINED = re.compile(r"NameError: name '(?P<name>\w+)' is not defined")


class RuleAgent:
    """A state machine over PlannerEnv observations."""

    name = "rule"

    def __init__(self, memory_nodes: int = 6, coverage: bool = True, proposals: int = 0):
        self.memory_nodes = memory_nodes
        self.coverage = coverage
        self.proposals = proposals  # repository proposals a function to ask for, tried after every inverse
        self.undefined: set[str] = set()  # names the problem statement's NameError reports

    def begin(self, obs: dict) -> None:
        """Start an episode from reset()'s observation."""
        self.statement = obs["problem_statement"]
        self.failing = obs["failing_tests"]
        self.trace_lines = {(m.group("path"), int(m.group("line"))) for m in PYTEST_FRAME.finditer(self.statement)}
        self.undefined = {m.group("name") for m in UNDEFINED.finditer(self.statement)}
        self.phase = "find"
        self.ranked: list[str] = []
        self.suspicious: list[str] = []
        self.to_read: list[str] = []
        self.queue: list[Candidate] = []
        self.last: tuple[str, str] | None = None  # (file, function text) of the edit tried last

    def _rank(self, results: list[dict]) -> None:
        for r in results:
            if r["kind"] == "function" and not is_test_file(r["node"].split("::")[0]) and r["node"] not in self.ranked:
                self.ranked.append(r["node"])

    def take_ranking(self, obs: dict) -> list[str]:
        """Fold the last localisation step's results in; the ranking is then the SBFL ranking (when a
        coverage run gave one) followed by the graph's."""
        if obs.get("op") == "coverage":
            self.suspicious = [r["node"] for r in obs.get("results", [])]
        else:
            self._rank(obs.get("results", []))
        self.ranked = self.suspicious + [n for n in self.ranked if n not in self.suspicious]
        return self.ranked

    def act(self, obs: dict) -> dict:
        """The next action given the last observation."""
        if self.phase == "find":
            self.phase = "expand"
            names = [t.split("[")[0].split("::")[-1] for t in self.failing[:5]]
            return {"type": "explore", "op": "find", "anchors": [self.statement[-3000:], *names]}
        if self.phase == "expand":
            self._rank(obs.get("results", []))
            self.phase = "coverage" if self.coverage else "memory"
            return {"type": "explore", "op": "expand", "nodes": [test_node(t) for t in self.failing[:5]], "hop": 2}
        if self.phase == "coverage":
            self._rank(obs.get("results", []))
            self.phase = "memory"
            return {"type": "explore", "op": "coverage"}
        if self.phase == "memory":
            self.take_ranking(obs)
            self.to_read = self.ranked[: self.memory_nodes]
            self.phase = "read"
            return {"type": "memory", "ops": [{"op": "add", "node": n} for n in self.to_read]}
        if self.phase == "read":
            held = obs.get("nodes", self.to_read)
            self.to_read = [n for n in self.to_read if n in held] or self.to_read
            self.phase = "menus" if self.proposals else "try"
            return {"type": "explore", "op": "read", "nodes": self.to_read}
        if self.phase == "menus":
            # the environment's menus hold the module's statements put back, which a read does not show
            self.phase = "try"
            return {"type": "explore", "op": "candidates", "nodes": self.to_read, "proposals": self.proposals}
        if self.phase == "try":
            if "source" in obs:
                self.queue = self._candidates(obs["source"])
            if "menus" in obs:
                self.queue = self._from_menus(obs["menus"])
            tests = obs.get("tests") or {}
            if obs.get("applied") and tests.get("status") == "ok" and not tests.get("failed"):
                return {"type": "submit"}
            if tests.get("status") == "off target":
                # every candidate replaces its whole function: the same `old` is the same function
                self.queue = [c for c in self.queue if (c.edit["file"], c.edit["old"]) != self.last]
            if tests.get("status") == "test budget spent" or not self.queue:
                return {"type": "submit"}
            c = self.queue.pop(0)
            self.last = (c.edit["file"], c.edit["old"])
            return {"type": "repair", "apply": True, "target": c.edit["file"], "plan": c.description, "edits": [c.edit]}
        return {"type": "submit"}

    def _candidates(self, sources: dict[str, str]) -> list[Candidate]:
        menus = []
        for node, text in sources.items():
            parsed = from_read(node, text)
            if parsed:
                file, first, src = parsed
                menus.append((file, function_menu(file, first, src)))
        return self.order(menus)

    def _from_menus(self, menus: dict[str, list[dict]]) -> list[Candidate]:
        out = []
        for node in self.to_read:
            cands = [Candidate(**c) for c in menus.get(node, [])]
            if cands:
                out.append((cands[0].edit["file"], cands))
        return self.order(out)

    def order(self, menus: list[tuple[str, list[Candidate]]]) -> list[Candidate]:
        """One queue from the ranked functions' menus ((file, candidates), best-ranked first): one-token edits,
        then the other structural inverses, then repository proposals; within each, edits on a traceback line
        first, then by the function's rank. Before all of them, proposals binding a name the traceback reports
        undefined."""
        out = []
        for rank, (file, cands) in enumerate(menus):
            promoted = 0
            for c in cands:
                on_trace = (file, c.line) in self.trace_lines
                named = c.proposed and bound_name(c.description) in self.undefined
                # the first POINTED proposals of a function: its own code shows the defect they mend
                early = c.proposed and promoted < POINTED_FIRST and pointed(c.description)
                promoted += early
                # one-token edits first: a structural guess is the rarer bug and every try costs a run; a
                # proposal (hundreds a function) last, so it never displaces an inverse; unless the error
                # itself names the missing binding, or the code shows the defect
                out.append((not named, not early, not c.one_token, c.proposed, not on_trace, rank, len(out), c))
        return [c for *_, c in sorted(out, key=lambda x: x[:7])]


def run_episode(env, task, agent) -> dict:
    """One episode of `agent` on `task` in `env`; returns the episode's stats."""
    obs = env.reset(task)
    agent.begin(obs)
    done, info = False, {}
    while not done:
        obs, reward, done, info = env.step(agent.act(obs))
    return info["stats"]
