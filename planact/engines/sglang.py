"""SGLang engine: a `sglang.launch_server` process per engine replica, spoken to over its native API.

The replica's Ray actor (RoleWorker) owns the server: it picks a free port itself, waits for
/health_generate, relaunches the server if it dies (up to max_restarts), and stops it with the actor.
Generation goes through POST /generate with `input_ids` and `return_logprob`, so training gets exact
token ids and logprobs; new weights arrive through /update_weights_from_disk from a checkpoint the
trainer wrote to a shared folder. Nothing here imports sglang: the server is a separate program
(install it with the `sglang` extra on the GPU nodes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from planact.engine_config import SGLangConfig
from planact.engines.base import Completion, SamplingParams, encode_prompt
from planact.engines.remote import HTTPClient, RemoteError, RetryPolicy, Usage
from schedulemesh import free_port

FINISH = {"stop": "stop", "length": "length", "abort": "abort"}


# Servers are forked from one long-lived thread: PR_SET_PDEATHSIG fires when the *forking thread* exits.
_LAUNCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sglang-launcher")


def _die_with_parent() -> None:
    # A SIGKILLed engine actor cannot stop its server; on Linux the kernel sends it SIGTERM instead.
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class SGLangServer:
    """Launch, health-wait, relaunch and stop one SGLang server process."""

    def __init__(self, model_path: str, cfg: SGLangConfig, log_path: str | Path):
        self.model_path = str(model_path)
        self.cfg = cfg
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.restarts = 0
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watch: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server."""
        return f"http://{self.cfg.host}:{self.port}"

    def command(self, port: int) -> list[str]:
        """The launch command line for `port`."""
        base = list(self.cfg.launch_command) or [sys.executable, "-m", "sglang.launch_server"]
        cmd = base + [
            "--model-path",
            self.model_path,
            "--tp",
            str(self.cfg.tp),
            "--host",
            self.cfg.host,
            "--port",
            str(port),
        ]
        if self.cfg.mem_fraction_static is not None:
            cmd += ["--mem-fraction-static", str(self.cfg.mem_fraction_static)]
        return cmd + list(self.cfg.extra_args)

    def start(self) -> SGLangServer:
        """Launch and wait until /health_generate answers; a port lost to a race is replaced by a new one."""
        with self._lock:
            self._launch_until_ready(None)
        if self._watch is None:
            self._watch = threading.Thread(target=self._watchdog, name="sglang-watchdog", daemon=True)
            self._watch.start()
        return self

    def _launch_until_ready(self, port: int | None) -> None:
        for _ in range(3):  # another process may grab the free port between our probe and the server's bind
            self.port = port or free_port(self.cfg.host)
            port = None
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(self.log_path, "ab")
            self.proc = _LAUNCHER.submit(
                subprocess.Popen,
                self.command(self.port),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # stop() reaches children
                preexec_fn=_die_with_parent,
            ).result()
            log.close()
            outcome = self._wait_ready()
            if outcome == "ready":
                return
            if outcome != "port":
                raise RuntimeError(
                    f"sglang server exited during start-up (code {self.proc.returncode}); "
                    f"last log lines:\n{self._log_tail()}"
                )
        raise RuntimeError(f"sglang server could not bind a free port on {self.cfg.host} after 3 tries")

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + self.cfg.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return "port" if "address already in use" in self._log_tail().lower() else "exited"
            try:
                if httpx.get(f"{self.url}/health_generate", timeout=5).status_code == 200:
                    return "ready"
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self._kill()
        raise TimeoutError(
            f"sglang server not healthy within {self.cfg.startup_timeout_s:g}s; last log lines:\n{self._log_tail()}"
        )

    def _watchdog(self) -> None:
        while not self._stopping.wait(1.0):
            with self._lock:
                if self._stopping.is_set() or self.proc is None or self.proc.poll() is None:
                    continue
                if self.restarts >= self.cfg.max_restarts:
                    continue  # requests fail with connection errors; the engine reports it
                self.restarts += 1
                try:
                    self._launch_until_ready(self.port)  # same port first: clients keep their URL
                except Exception:  # the next pass tries again until max_restarts
                    pass

    def alive(self) -> bool:
        """True while the server process runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM the server's process group, SIGKILL what is left after timeout_s."""
        self._stopping.set()
        with self._lock:
            if self.proc is None or self.proc.poll() is not None:
                return
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout_s)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                self._kill()

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def _log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


class SGLangEngine:
    """The engine protocol over SGLang's native /generate (token ids in, token ids and logprobs out)."""

    kind = "sglang"

    def __init__(
        self, base_url: str, tokenizer, cfg: SGLangConfig, name: str = "sglang", server: SGLangServer | None = None
    ):
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.name = name
        self.server = server
        self.weight_version = 0
        self.version_mismatches = 0
        self.usage = Usage()
        # A relaunching server refuses connections for a while: retry those, slowly, for about a minute.
        retry = RetryPolicy(max_retries=8, backoff_base_s=0.5, backoff_max_s=10.0)
        self.http = HTTPClient(
            base_url, name, timeout_s=cfg.request_timeout_s, retry=retry, concurrency=cfg.concurrency, usage=self.usage
        )
        self._pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix=name)

    def encode(self, prompt: str, raw: bool = False) -> list[int]:
        """The prompt's ids as the model reads them (planact.engines.base.encode_prompt)."""
        return encode_prompt(self.tokenizer, prompt, raw)

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions per prompt; one batched /generate request per prompt, run concurrently."""
        return list(self._pool.map(lambda p: self._one(p, params), prompts))

    def _post(self, path: str, body: dict):
        if self.server is not None and self.server.port and self.http.base_url != self.server.url:
            self.http.set_base_url(self.server.url)  # relaunched on another port
        return self.http.request("POST", path, body)

    def _one(self, prompt: str, params: SamplingParams) -> list[Completion]:
        ids = self.encode(prompt, params.raw_prompt)
        sampling = {
            "max_new_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop_token_ids": [self.tokenizer.eos_token_id],
        }
        if params.seed is not None:
            sampling["sampling_seed"] = params.seed
        # A batch of n copies of the prompt: SGLang answers in order, one item per copy.
        out = self._post(
            "/generate", {"input_ids": [ids] * params.n, "sampling_params": sampling, "return_logprob": True}
        )
        items = out if isinstance(out, list) else [out]
        if len(items) != params.n:
            raise RemoteError(f"{self.name}: /generate returned {len(items)} items for {params.n} samples")
        return [self._completion(ids, item) for item in items]

    def _completion(self, prompt_ids: list[int], item: dict) -> Completion:
        meta = item.get("meta_info") or {}
        triples = meta.get("output_token_logprobs") or []
        token_ids = list(item.get("output_ids") or [t[1] for t in triples])
        logprobs = [float(t[0]) for t in triples]
        finish = FINISH.get(((meta.get("finish_reason") or {}).get("type")) or "", "stop")
        version = meta.get("weight_version")
        if version is not None and str(version) != str(self.weight_version):
            self.version_mismatches += 1  # served by weights other than the ones we installed last
        self.usage.add(meta.get("prompt_tokens", 0), meta.get("completion_tokens", len(token_ids)))
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        return Completion(
            prompt_ids=prompt_ids,
            token_ids=token_ids,
            logprobs=logprobs,
            text=text,
            finish_reason=finish,
            weight_version=self.weight_version,
            meta={"served_weight_version": version, "cached_tokens": meta.get("cached_tokens")},
        )

    def update_weights(self, state_dict: dict | None = None, version: int | None = None) -> int:
        """In-process tensors cannot reach a server: use update_weights_from_disk."""
        if state_dict is not None:
            raise RuntimeError(f"{self.name}: the sglang engine takes weights from disk (update_weights_from_disk)")
        self.weight_version = version if version is not None else self.weight_version + 1
        return self.weight_version

    def update_weights_from_disk(self, path: str, version: int) -> int:
        """Load an HF checkpoint folder into the server; pause generation if requests block the flush."""
        body = {"model_path": str(path), "flush_cache": True, "weight_version": str(version)}
        try:
            out = self._post("/update_weights_from_disk", body)
        except RemoteError as exc:
            if exc.status != 400:
                raise
            out = None
        if not (out or {}).get("success", False):
            # Running requests keep the cache busy: pause, load, resume.
            self._post("/pause_generation", {})
            try:
                out = self._post("/update_weights_from_disk", body)
            finally:
                self._post("/continue_generation", {})
            if not out.get("success", False):
                raise RemoteError(f"{self.name}: update_weights_from_disk({path}) failed: {out.get('message')}")
        self.weight_version = version
        return version

    def health(self) -> dict:
        """Server liveness, restarts, weight version and token counts."""
        info = {
            "engine": self.kind,
            "name": self.name,
            "weight_version": self.weight_version,
            "version_mismatches": self.version_mismatches,
            "usage": self.usage.as_dict(),
        }
        if self.server is not None:
            info.update(url=self.server.url, alive=self.server.alive(), restarts=self.server.restarts)
        return info

    def close(self) -> None:
        """Stop the server this engine launched."""
        if self.server is not None:
            self.server.stop()
