"""Build a role's engine from its config: hf in-process, sglang as a launched server, or an API engine."""

from __future__ import annotations

from pathlib import Path

from planact.config import API_ENGINES, RoleConfig


def needs_local_model(rc: RoleConfig, with_trainer: bool) -> bool:
    """The hf engine generates with the local model; any trainer trains one. sglang and APIs serve elsewhere."""
    return rc.engine == "hf" or (with_trainer and rc.engine not in API_ENGINES)


def make_engine(rc: RoleConfig, name: str, model_path: str, model=None, tokenizer=None, log_dir: Path | None = None):
    """The engine of one replica (sglang starts its server here and stops it with engine.close())."""
    if rc.engine == "hf":
        from planact.engines.hf import HFEngine

        return HFEngine(model, tokenizer, name=name)
    if rc.engine == "sglang":
        from planact.engines.sglang import SGLangEngine, SGLangServer

        server = SGLangServer(model_path, rc.sglang, Path(log_dir or ".") / f"sglang-{name}.log").start()
        return SGLangEngine(server.url, tokenizer, rc.sglang, name=name, server=server)
    from planact.engines.api import AnthropicEngine, OpenAIEngine

    if rc.engine == "openai":
        return OpenAIEngine(rc.openai, name=name)
    return AnthropicEngine(rc.anthropic, name=name)
