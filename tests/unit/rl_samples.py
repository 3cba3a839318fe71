"""A round of GRPO samples of uneven lengths, made up but shaped as an engine returns them (trainer tests)."""

from __future__ import annotations

import random


def random_samples(n: int, seed: int = 0, max_prompt: int = 12, max_response: int = 9) -> list[dict]:
    """n samples: prompt and response ids, one engine logprob per response token, an advantage."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        p, t = rng.randint(3, max_prompt), rng.randint(1, max_response)
        out.append(
            {
                "prompt_ids": [rng.randint(4, 20) for _ in range(p)],
                "token_ids": [rng.randint(4, 20) for _ in range(t)],
                "logprobs": [-rng.uniform(0.5, 3.0) for _ in range(t)],
                "advantage": rng.choice([-1.0, 0.5, 1.0]),
                "sample_id": i,
            }
        )
    return out
