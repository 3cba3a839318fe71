"""The LLM that workflow operators call: any planact engine behind one async interface, with usage and cost.

`create_llm_instance(llm_config)` is what a graph.py calls (as in AFlow). Each call returns a fresh
`LLM` with its own usage counter over a backend cached per process, so a worker loads local models
once however many workflows it evaluates. Local engines are fed in micro-batches: concurrent
operator calls from many problems become one batched generate, which is what makes offline
evaluation on CPU fast enough to search.

Which requests share a batch depends on timing, so sampling is seeded per request, not per batch:
an evaluation names each problem's scope (`sample_scope`), and a call's seed is a hash of that scope,
the prompt, the temperature and how many times this LLM was asked that prompt there before. The same
workflow on the same problems then draws the same samples however the calls were batched or sharded.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from planact.engines.base import SamplingParams
from planact.engines.remote import Usage

# The local Plan/Act pair understands exactly two prompt shapes (planact.envs.plan_act).
ACTOR_PROMPT_RE = re.compile(r":\s*\d+\s*=\s*$")

# Set by the evaluator per problem (a string naming run, round, repeat and problem); asyncio tasks
# an operator starts inherit it. None = no per-request seeds (the engine's own call-count seeds).
sample_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("aflow_sample_scope", default=None)


def request_seed(scope: str, prompt: str, temperature: float, occurrence: int) -> int:
    """A 63-bit seed from a request's identity (stable across processes, unlike hash())."""
    digest = hashlib.blake2b(f"{scope}\x00{temperature!r}\x00{occurrence}\x00{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


class _Batcher:
    """Collects concurrent requests to one engine and sends them as one generate call per temperature."""

    def __init__(self, engine, max_new_tokens: int, window_s: float = 0.002, max_batch: int = 256):
        self.engine, self.max_new_tokens, self.window_s, self.max_batch = engine, max_new_tokens, window_s, max_batch
        self._lock = threading.Lock()  # generate() of a torch model is not re-entrant across threads
        # Pending requests per event loop: evaluations in different threads each run their own loop.
        self._pending: dict[int, list[tuple[str, float, asyncio.Future]]] = {}
        self._flushers: dict[int, asyncio.Task] = {}

    async def generate(self, prompt: str, temperature: float, seed: int | None = None) -> tuple[str, dict]:
        """Queue one request for the next batch and wait for its completion."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.setdefault(id(loop), []).append((prompt, temperature, seed, fut))
        flusher = self._flushers.get(id(loop))
        if flusher is None or flusher.done():
            self._flushers[id(loop)] = asyncio.create_task(self._flush_soon(id(loop)))
        return await fut

    async def _flush_soon(self, key: int) -> None:
        await asyncio.sleep(self.window_s)
        pending = self._pending[key]
        while pending:
            batch = pending[: self.max_batch]
            del pending[: self.max_batch]
            by_temp: dict[float, list] = {}
            for item in batch:
                by_temp.setdefault(item[1], []).append(item)
            for temp, items in by_temp.items():
                seeds = [seed for _, _, seed, _ in items]
                try:
                    outs = await asyncio.to_thread(
                        self._run, [p for p, _, _, _ in items], temp, None if None in seeds else seeds
                    )
                except Exception as err:  # every waiter learns the engine's error; none hangs
                    for *_, fut in items:
                        if not fut.done():
                            fut.set_exception(err)
                    continue
                for (*_, fut), out in zip(items, outs):
                    if not fut.done():
                        fut.set_result(out)

    def _run(self, prompts: list[str], temperature: float, seeds: list[int] | None) -> list[tuple[str, dict]]:
        params = SamplingParams(temperature=temperature, max_new_tokens=self.max_new_tokens, n=1, row_seeds=seeds)
        with self._lock:
            groups = self.engine.generate(prompts, params)
        out = []
        for g in groups:
            c = g[0]
            out.append(
                (
                    c.text,
                    {
                        "prompt_tokens": c.meta.get("prompt_tokens", len(c.prompt_ids)),
                        "completion_tokens": c.meta.get("completion_tokens", len(c.token_ids)),
                    },
                )
            )
        return out


class Backend:
    """One or more engines with a routing rule and a price table; shared by every LLM of a process."""

    def __init__(
        self,
        engines: dict[str, _Batcher],
        route,
        prices: tuple[float, float] = (0.0, 0.0),
        follows_instructions: bool = True,
        answers_from_known_programs: bool = False,
    ):
        self.engines, self.route, self.prices = engines, route, prices
        self.follows_instructions = follows_instructions
        self.answers_from_known_programs = answers_from_known_programs

    async def complete(self, prompt: str, temperature: float, seed: int | None = None) -> tuple[str, dict]:
        """Answer one prompt through the engine the route picks."""
        return await self.engines[self.route(prompt)].generate(prompt, temperature, seed)


class LLM:
    """What operators hold: `await llm(prompt)` -> text; usage and cost counted per instance."""

    def __init__(self, backend: Backend, temperature: float):
        self.backend, self.temperature = backend, temperature
        self.usage = Usage(*backend.prices)  # the engines' own counter: requests, tokens, cost at these prices
        self._asked: dict[tuple, int] = {}  # (scope, prompt, temperature) -> times asked, for request seeds

    @property
    def follows_instructions(self) -> bool:
        """False for the local Plan/Act pair: it only speaks its two prompt shapes, so ensembles vote instead."""
        return self.backend.follows_instructions

    @property
    def answers_from_known_programs(self) -> bool:
        """True for the offline candidate coder: its programs come from a fixed set, so their test verdicts are
        memoised."""
        return self.backend.answers_from_known_programs

    async def __call__(self, prompt: str, temperature: float | None = None) -> str:
        temp = self.temperature if temperature is None else temperature
        scope, seed = sample_scope.get(), None
        if scope is not None:  # counted before any await: program order, not completion order, numbers the calls
            key = (scope, prompt, temp)
            k = self._asked[key] = self._asked.get(key, -1) + 1
            seed = request_seed(scope, prompt, temp, k)
        text, u = await self.backend.complete(prompt, temp, seed)
        self.usage.add(u.get("prompt_tokens"), u.get("completion_tokens"))
        return text

    def get_usage_summary(self) -> dict:
        """AFlow's accessor, in AFlow's names: calls, token counts and `total_cost` (results.json)."""
        u = self.usage
        return {
            "calls": u.requests,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_cost": u.cost_usd,
        }


_BACKENDS: dict[str, Backend] = {}
_BACKENDS_LOCK = threading.Lock()


def _planact_backend(cfg, root: Path) -> Backend:
    from aflow_rl.executor import ensure_planact_checkpoint
    from planact.engines.hf import HFEngine
    from planact.models import load_model

    folder = ensure_planact_checkpoint(cfg, root)
    engines = {}
    for role, cap in (("planner", 16), ("actor", 12)):
        model, tok = load_model(Path(folder) / role)
        engines[role] = _Batcher(HFEngine(model, tok, name=f"aflow-{role}"), min(cfg.max_new_tokens, cap))
    route = lambda prompt: "actor" if ACTOR_PROMPT_RE.search(prompt) else "planner"  # noqa: E731
    return Backend(engines, route, follows_instructions=False)


def _api_backend(cfg) -> Backend:
    from planact.engines.api import AnthropicEngine, OpenAIEngine

    api = cfg.openai if cfg.kind == "openai" else cfg.anthropic
    engine = OpenAIEngine(api, name="aflow") if cfg.kind == "openai" else AnthropicEngine(api, name="aflow")
    batcher = _Batcher(engine, cfg.max_new_tokens, max_batch=api.concurrency)
    return Backend({"api": batcher}, lambda _p: "api", (api.prices.input_per_mtok, api.prices.output_per_mtok))


def _coder_backend(cfg, benchmark: str, data_path: str | None) -> Backend:
    from aflow_rl.coder import coder_for

    coder = coder_for(benchmark, data_path, cfg.coder_skill, cfg.coder_mutants)
    return Backend({"coder": coder}, lambda _p: "coder", follows_instructions=False, answers_from_known_programs=True)


def backend_for(cfg, root: str | Path = "runs", benchmark: str = "planact", data_path: str | None = None) -> Backend:
    """The process-wide backend for an LLMConfig (built on first use).

    The local executor (kind 'planact') is the Plan/Act pair on the synthetic benchmark and the
    candidate coder (aflow_rl.coder) on code benchmarks; API kinds answer any benchmark.
    """
    from aflow_rl.benchmarks import CODE_BENCHMARKS

    local_code = cfg.kind == "planact" and benchmark in CODE_BENCHMARKS
    key = f"{Path(root).resolve()}|{cfg.model_dump_json()}" + (f"|{benchmark}|{data_path}" if local_code else "")
    with _BACKENDS_LOCK:
        if key not in _BACKENDS:
            if local_code:
                _BACKENDS[key] = _coder_backend(cfg, benchmark, data_path)
            else:
                _BACKENDS[key] = _planact_backend(cfg, Path(root)) if cfg.kind == "planact" else _api_backend(cfg)
        return _BACKENDS[key]


@dataclass
class LLMHandle:
    """What a Workflow receives as `llm_config`: the model config, where local models live, the benchmark asked."""

    config: object
    root: str = "runs"
    extra: dict = field(default_factory=dict)
    benchmark: str = "planact"
    data_path: str | None = None


def create_llm_instance(llm_config: LLMHandle) -> LLM:
    """AFlow's factory: a fresh usage counter over this process's cached backend."""
    return LLM(
        backend_for(llm_config.config, llm_config.root, llm_config.benchmark, llm_config.data_path),
        llm_config.config.temperature,
    )
