"""In-process transformers engine: batched sampling with a KV cache.

Runs inside a Ray actor (planact.workers.RoleWorker). Returns exact token ids
and the logprob of every sampled token at the sampling temperature, computed
with left padding, an attention mask and explicit position ids so that a fresh
forward pass of the same model reproduces them (tests/unit/test_engine.py).
"""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from planact.engines.base import Completion, SamplingParams, encode_prompt
from planact.rl.logprobs import pad_batch, token_logprobs


class HFEngine:
    """Generation over a transformers causal LM held in this process."""

    def __init__(self, model: torch.nn.Module, tokenizer, max_batch: int = 512, name: str = "hf"):
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch = max_batch
        self.name = name
        self.weight_version = 0
        self._cache_kw = _cache_keyword(model)
        self._calls = 0

    def encode(self, prompt: str, raw: bool = False) -> list[int]:
        """The prompt's ids as the model reads them (planact.engines.base.encode_prompt)."""
        return encode_prompt(self.tokenizer, prompt, raw)

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """Sample `params.n` completions per prompt, batched up to max_batch rows."""
        rows = [self.encode(p, params.raw_prompt) for p in prompts for _ in range(params.n)]
        self._calls += 1
        if params.row_seeds is not None:
            if len(params.row_seeds) != len(prompts):
                raise ValueError(f"row_seeds: {len(params.row_seeds)} seeds for {len(prompts)} prompts")
            gens = [
                torch.Generator(device="cpu").manual_seed((int(s) + j) % 2**63)
                for s in params.row_seeds
                for j in range(params.n)
            ]
        else:
            seed = params.seed if params.seed is not None else (self.weight_version * 1_000_003 + self._calls)
            gens = [torch.Generator(device="cpu").manual_seed(int(seed))]
        flat: list[Completion] = []
        for start in range(0, len(rows), self.max_batch):
            chunk = gens if len(gens) == 1 else gens[start : start + self.max_batch]
            flat.extend(self._generate_batch(rows[start : start + self.max_batch], params, chunk))
        return [flat[i * params.n : (i + 1) * params.n] for i in range(len(prompts))]

    @torch.no_grad()
    def _generate_batch(
        self, rows: list[list[int]], params: SamplingParams, gens: list[torch.Generator]
    ) -> list[Completion]:
        """Decode one batch; one generator for the batch, or one per row (row_seeds)."""
        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        pad, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        B, L = len(rows), max(len(r) for r in rows)
        input_ids = torch.full((B, L), pad, dtype=torch.long)
        attn = torch.zeros((B, L), dtype=torch.long)
        for i, r in enumerate(rows):  # left padding keeps every row's last token at column L-1
            input_ids[i, L - len(r) :] = torch.tensor(r)
            attn[i, L - len(r) :] = 1
        positions = (attn.cumsum(-1) - 1).clamp(min=0)
        input_ids, attn, positions = input_ids.to(device), attn.to(device), positions.to(device)

        out_tokens = torch.full((B, params.max_new_tokens), pad, dtype=torch.long)
        out_lp = torch.zeros((B, params.max_new_tokens))
        lengths = torch.zeros(B, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        stopped = torch.zeros(B, dtype=torch.bool)
        out = model(input_ids=input_ids, attention_mask=attn, position_ids=positions, use_cache=True)
        cache_kw = self._cache_kw
        cache = getattr(out, cache_kw)
        next_pos = positions[:, -1]
        for t in range(params.max_new_tokens):
            logits = out.logits[:, -1, :].float().cpu()
            if params.temperature > 0:
                logp = F.log_softmax(logits / params.temperature, dim=-1)
                probs = logp.exp()
                if params.top_p < 1.0:
                    probs = _top_p_filter(probs, params.top_p)
                if len(gens) == 1:
                    tok = torch.multinomial(probs, 1, generator=gens[0]).squeeze(-1)
                else:
                    tok = torch.cat(
                        [torch.multinomial(probs[i : i + 1], 1, generator=g) for i, g in enumerate(gens)]
                    ).squeeze(-1)
            else:
                logp = F.log_softmax(logits, dim=-1)
                tok = logits.argmax(-1)
            tok = torch.where(done, torch.full_like(tok, pad), tok)
            out_tokens[:, t] = tok
            out_lp[:, t] = logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
            lengths += (~done).long()
            hit_eos = (tok == eos) & ~done
            stopped |= hit_eos
            done |= hit_eos
            if bool(done.all()) or t == params.max_new_tokens - 1:
                break
            # Finished rows keep attending (mask 1) to keep shapes simple; their extra tokens are discarded.
            attn = torch.cat([attn, torch.ones((B, 1), dtype=attn.dtype, device=device)], dim=1)
            next_pos = next_pos + 1
            out = model(
                input_ids=tok.unsqueeze(-1).to(device),
                attention_mask=attn,
                position_ids=next_pos.unsqueeze(-1),
                use_cache=True,
                **{cache_kw: cache},
            )
            cache = getattr(out, cache_kw)
        model.train(was_training)

        results = []
        for i in range(B):
            n = int(lengths[i])
            ids = out_tokens[i, :n].tolist()
            results.append(
                Completion(
                    prompt_ids=rows[i],
                    token_ids=ids,
                    logprobs=out_lp[i, :n].tolist(),
                    text=self.tokenizer.decode(ids, skip_special_tokens=True),
                    finish_reason="stop" if bool(stopped[i]) else "length",
                    weight_version=self.weight_version,
                )
            )
        return results

    def choose(
        self, requests: list[tuple[str, list[str]]], params: SamplingParams, length_normalise: bool = False
    ) -> list[list[Completion]]:
        """Sample `params.n` completions per request from the model restricted to the request's candidates.

        Each candidate is scored by the summed logprob of its tokens (+ EOS) at the sampling temperature,
        computed exactly as the trainer recomputes it (planact.rl.logprobs), and drawn from the softmax
        of those scores over the set; temperature 0 takes the best; `params.row_seeds` gives each
        request its own generator. length_normalise=True scores by the
        mean token logprob instead: an untrained model then no longer prefers the candidates with the
        fewest tokens (each token costs ~log(vocab) nats at initialisation). A completion's `logprobs` are the
        chosen candidate's token logprobs (what GRPO's ratio uses); `meta` holds the choice, the set's
        size, its log-probability within the set and the full ranking (for budgets of several tries).
        """
        self._calls += 1
        seed = params.seed if params.seed is not None else (self.weight_version * 1_000_003 + self._calls)
        gen = torch.Generator(device="cpu").manual_seed(int(seed))
        if params.row_seeds is not None and len(params.row_seeds) != len(requests):
            raise ValueError(f"row_seeds: {len(params.row_seeds)} seeds for {len(requests)} requests")
        temp = params.temperature if params.temperature > 0 else 1.0
        eos = self.tokenizer.eos_token_id
        out = []
        for i, (prompt, candidates) in enumerate(requests):
            if params.row_seeds is not None:  # what a request draws does not depend on the others in its batch
                gen = torch.Generator(device="cpu").manual_seed(int(params.row_seeds[i]) % 2**63)
            if not candidates:
                out.append([])
                continue
            p_ids = self.encode(prompt, params.raw_prompt)
            c_ids = [self.tokenizer.encode(c, add_special_tokens=False) + [eos] for c in candidates]
            # A long prompt (a file's context) is computed once and shared; a short one is scored in one
            # padded batch, bit-identical to the trainer's recomputation.
            score = self._score_shared if len(p_ids) >= SHARED_PREFIX_MIN else self._score
            token_lp = score(p_ids, c_ids, temp)
            scores = torch.tensor(
                [sum(lp) / (len(lp) if length_normalise else 1) for lp in token_lp], dtype=torch.float64
            )
            set_logp = torch.log_softmax(scores, -1)
            ranking = torch.argsort(scores, descending=True).tolist()
            if params.temperature > 0:
                picks = torch.multinomial(set_logp.exp().float(), params.n, replacement=True, generator=gen).tolist()
            else:
                picks = [ranking[0]] * params.n
            out.append(
                [
                    Completion(
                        prompt_ids=p_ids,
                        token_ids=c_ids[k],
                        logprobs=token_lp[k],
                        text=candidates[k],
                        finish_reason="stop",
                        weight_version=self.weight_version,
                        meta={
                            "choice": k,
                            "n_candidates": len(candidates),
                            "set_logprob": float(set_logp[k]),
                            "ranking": ranking,
                        },
                    )
                    for k in picks
                ]
            )
        return out

    @torch.no_grad()
    def _score(self, prompt_ids: list[int], cand_ids: list[list[int]], temperature: float) -> list[list[float]]:
        was_training = self.model.training
        self.model.eval()
        rows: list[list[float]] = []
        for start in range(0, len(cand_ids), self.max_batch):
            chunk = cand_ids[start : start + self.max_batch]
            batch = pad_batch([prompt_ids] * len(chunk), chunk, self.tokenizer.pad_token_id)
            lp, _ = token_logprobs(self.model, batch, temperature)
            n = len(prompt_ids)
            rows.extend(lp[i, n : n + len(c)].tolist() for i, c in enumerate(chunk))
        self.model.train(was_training)
        return rows

    @torch.no_grad()
    def score_candidates(
        self, prompt: str, candidates: list[str], temperature: float = 1.0, eos: bool = True
    ) -> list[list[float]]:
        """Token logprobs of each candidate continuation of one prompt (+ EOS), the prompt computed once.

        The prompt's keys and values are cached and shared by every candidate (a file's context of ~1,000
        tokens before a few short edits costs one pass, not one per edit); equal to scoring each
        candidate on its own to float32 rounding."""
        p_ids = self.encode(prompt)
        tail = [self.tokenizer.eos_token_id] if eos else []
        c_ids = [self.tokenizer.encode(c, add_special_tokens=False) + tail for c in candidates]
        return self._score_shared(p_ids, c_ids, temperature)

    @torch.no_grad()
    def _score_shared(self, prompt_ids: list[int], cand_ids: list[list[int]], temperature: float) -> list[list[float]]:
        import copy

        was_training = self.model.training
        self.model.eval()
        device = next(self.model.parameters()).device
        # Tokens every candidate starts with (an edited function's unchanged opening lines) join the shared
        # prefix: computed once, their logprobs copied to every candidate.
        k = _common_prefix(cand_ids)
        shared_ids = prompt_ids + cand_ids[0][:k]
        prefix = self.model(input_ids=torch.tensor([shared_ids], device=device), use_cache=True)
        common: list[float] = []
        if k:
            lg = prefix.logits[0, len(prompt_ids) - 1 : len(shared_ids) - 1, :].float()
            lg = lg / temperature if temperature > 0 else lg
            common = (
                torch.log_softmax(lg, -1)
                .gather(-1, torch.tensor(cand_ids[0][:k], device=device).unsqueeze(-1))
                .squeeze(-1)
                .tolist()
            )
        first = prefix.logits[:, -1:, :]  # predicts each candidate's first token after the shared part
        n, rows = len(shared_ids), []
        tails = [c[k:] for c in cand_ids]
        for start in range(0, len(tails), self.max_batch):
            chunk = tails[start : start + self.max_batch]
            width = max(1, max(len(c) for c in chunk))
            ids = torch.full((len(chunk), width), self.tokenizer.pad_token_id, dtype=torch.long, device=device)
            mask = torch.zeros((len(chunk), n + width), dtype=torch.long, device=device)
            mask[:, :n] = 1
            for i, c in enumerate(chunk):
                ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
                mask[i, n : n + len(c)] = 1
            cache = copy.deepcopy(prefix.past_key_values)  # the forward appends to it: one copy per chunk
            cache.batch_repeat_interleave(len(chunk))
            positions = torch.arange(n, n + width, device=device).expand(len(chunk), -1)
            out = self.model(
                input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **{self._cache_kw: cache}
            )
            logits = torch.cat([first.expand(len(chunk), -1, -1), out.logits[:, :-1, :]], dim=1).float()
            if temperature > 0:
                logits = logits / temperature
            lp = torch.log_softmax(logits, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
            rows.extend(common + lp[i, : len(c)].tolist() for i, c in enumerate(chunk))
        self.model.train(was_training)
        return rows

    def update_weights(self, state_dict: dict | None = None, version: int | None = None) -> int:
        """Load new weights (None when the trainer shares this model in-process) and bump the version."""
        if state_dict is not None:
            self.model.load_state_dict(state_dict)
        self.weight_version = version if version is not None else self.weight_version + 1
        return self.weight_version

    def health(self) -> dict:
        """Identity and weight version."""
        return {
            "engine": "hf",
            "name": self.name,
            "weight_version": self.weight_version,
            "device": str(next(self.model.parameters()).device),
        }


SHARED_PREFIX_MIN = 128  # prompt tokens from which choose() computes the prompt once for all candidates


def _common_prefix(seqs: list[list[int]]) -> int:
    """Leading tokens all `seqs` share, leaving each at least one token of its own."""
    k, shortest = 0, min(len(s) for s in seqs) - 1
    while k < shortest and all(s[k] == seqs[0][k] for s in seqs):
        k += 1
    return k


def _cache_keyword(model: torch.nn.Module) -> str:
    """The KV-cache argument's name: transformers renamed `past_key_values` to `cache` within 5.x (and warns)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft passes it through
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero out the tail beyond cumulative mass top_p (the first token always stays)."""
    sorted_p, idx = probs.sort(dim=-1, descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p
    sorted_p = sorted_p * keep
    return torch.zeros_like(probs).scatter(-1, idx, sorted_p)
