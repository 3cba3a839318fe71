"""A stand-in for `python -m sglang.launch_server` (no GPU here): same flags, same native HTTP shapes.

    python -m tests.servers.fake_sglang --model-path P --tp 1 --host 127.0.0.1 --port N [--startup-delay S]
        [--refuse-updates-while-busy]

Implements GET /health, /health_generate, /get_model_info and POST /generate (input_ids, batched,
sampling_params, return_logprob), /update_weights_from_disk, /flush_cache, /pause_generation,
/continue_generation as SGLang documents them. Its "model" answers deterministically: the
prompt's last ids reversed, so a test can check the ids it gets back.
"""

from __future__ import annotations

import argparse
import json
import time

from tests.servers.loopback import LoopbackServer


def make_server(
    model_path: str,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_delay: float = 0.0,
    refuse_updates_while_busy: bool = False,
) -> LoopbackServer:
    """The stand-in server (not yet serving; use as a context manager in-process, or serve_forever)."""
    state = {
        "model_path": model_path,
        "weight_version": "default",
        "paused": False,
        "updates": 0,
        "ready_at": time.time() + startup_delay,
    }

    def health(body, headers):
        return (200, {}) if time.time() >= state["ready_at"] else (503, {"error": "loading"})

    def generate(body, headers):
        sp = body.get("sampling_params") or {}
        batch = (
            body["input_ids"] if body["input_ids"] and isinstance(body["input_ids"][0], list) else [body["input_ids"]]
        )
        out = []
        for ids in batch:
            k = int(sp.get("max_new_tokens", 128))
            toks = list(reversed(ids))[:k]
            finish = {"type": "length", "length": k} if len(toks) == k else {"type": "stop", "matched": None}
            meta = {
                "finish_reason": finish,
                "prompt_tokens": len(ids),
                "completion_tokens": len(toks),
                "cached_tokens": 0,
                "weight_version": state["weight_version"],
            }
            if body.get("return_logprob"):
                meta["output_token_logprobs"] = [[-0.1 * (i + 1), t, None] for i, t in enumerate(toks)]
            out.append({"text": "", "output_ids": toks, "meta_info": meta})
        return 200, out if isinstance(body["input_ids"][0], list) else out[0]

    def update(body, headers):
        state["updates"] += 1
        if refuse_updates_while_busy and not state["paused"]:
            return 400, {"success": False, "message": "cannot flush cache while requests are running"}
        state["model_path"] = body["model_path"]
        state["weight_version"] = body.get("weight_version", state["weight_version"])
        return 200, {"success": True, "message": "Succeeded to update model weights.", "num_paused_requests": 0}

    def set_paused(value):
        def handler(body, headers):
            state["paused"] = value
            return 200, {}

        return handler

    def model_info(body, headers):
        return 200, {
            "model_path": state["model_path"],
            "tokenizer_path": state["model_path"],
            "is_generation": True,
            "weight_version": state["weight_version"],
            "updates": state["updates"],
        }

    routes = {
        ("GET", "/health"): health,
        ("GET", "/health_generate"): health,
        ("POST", "/generate"): generate,
        ("POST", "/update_weights_from_disk"): update,
        ("POST", "/flush_cache"): lambda b, h: (200, {}),
        ("POST", "/pause_generation"): set_paused(True),
        ("POST", "/continue_generation"): set_paused(False),
        ("GET", "/get_model_info"): model_info,
    }
    server = LoopbackServer(routes, host=host, port=port)
    server.state = state
    return server


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mem-fraction-static", type=float)
    ap.add_argument("--startup-delay", type=float, default=0.0)
    ap.add_argument("--refuse-updates-while-busy", action="store_true")
    args, _unknown = ap.parse_known_args()
    server = make_server(args.model_path, args.host, args.port, args.startup_delay, args.refuse_updates_while_busy)
    print(json.dumps({"listening": server.url, "tp": args.tp}), flush=True)
    server.httpd.serve_forever()


if __name__ == "__main__":
    main()
