"""The sglang engine and its launcher, against a stand-in server (SGLang needs a GPU; none here).

tests/servers/fake_sglang.py takes `sglang.launch_server`'s flags and speaks its native HTTP API
(/generate with input_ids + return_logprob, /update_weights_from_disk, /health_generate...). The
launcher starts it the same way it would start SGLang: a subprocess on a port it chose itself.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from planact.engine_config import SGLangConfig
from planact.engines import sglang as sg
from planact.engines.base import SamplingParams
from planact.models import build_tokenizer

from ..servers.fake_sglang import make_server
from .conftest import REPO

FAKE = [sys.executable, "-m", "tests.servers.fake_sglang"]


@pytest.fixture(autouse=True)
def importable_stand_in(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the stand-in lives under tests/


def _cfg(*extra: str, **kw) -> SGLangConfig:
    return SGLangConfig(launch_command=FAKE, extra_args=list(extra), startup_timeout_s=30, **kw)


def test_generate_sends_token_ids_and_parses_logprobs_and_finish_reasons():
    tok = build_tokenizer()
    with make_server("m") as srv:
        eng = sg.SGLangEngine(srv.url, tok, SGLangConfig())
        long, short = eng.generate(
            ["abc", "z"], SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=3, n=2, seed=7)
        )
    ids = eng.encode("abc")
    body = next(r["body"] for r in srv.requests if r["body"]["input_ids"][0] == ids)  # requests run concurrently
    assert body["input_ids"] == [ids, ids] and body["return_logprob"] is True
    assert body["sampling_params"] == {
        "max_new_tokens": 3,
        "temperature": 0.8,
        "top_p": 0.95,
        "stop_token_ids": [tok.eos_token_id],
        "sampling_seed": 7,
    }
    assert len(long) == 2 and long[0].token_ids == list(reversed(ids))[:3] and long[0].prompt_ids == ids
    assert long[0].logprobs == pytest.approx([-0.1, -0.2, -0.3]) and long[0].finish_reason == "length"
    assert short[0].finish_reason == "stop" and len(short[0].token_ids) == len(eng.encode("z"))
    assert eng.health()["usage"]["completion_tokens"] == 2 * 3 + 2 * 2


def test_weights_from_disk_pause_when_busy_and_version_check(tmp_path):
    tok = build_tokenizer()
    with make_server("m", refuse_updates_while_busy=True) as srv:
        eng = sg.SGLangEngine(srv.url, tok, SGLangConfig())
        assert eng.update_weights_from_disk(str(tmp_path / "v5"), 5) == 5
        ((c,),) = eng.generate(["a"], SamplingParams(n=1))
        paths = [r["path"] for r in srv.requests]
    assert paths[:4] == [
        "/update_weights_from_disk",
        "/pause_generation",
        "/update_weights_from_disk",
        "/continue_generation",
    ]
    assert srv.requests[0]["body"] == {"model_path": str(tmp_path / "v5"), "flush_cache": True, "weight_version": "5"}
    assert srv.state["model_path"] == str(tmp_path / "v5")
    assert c.weight_version == 5 and c.meta["served_weight_version"] == "5" and eng.version_mismatches == 0
    with pytest.raises(RuntimeError, match="from disk"):
        eng.update_weights({"w": 1}, 6)


def test_launcher_waits_for_readiness_then_stops_cleanly(tmp_path):
    server = sg.SGLangServer("tiny", _cfg("--startup-delay", "1.0", mem_fraction_static=0.5), tmp_path / "s.log")
    t0 = time.perf_counter()
    server.start()
    waited = time.perf_counter() - t0
    try:
        assert waited >= 1.0 and server.alive()
        cmd = server.command(server.port)
        assert cmd[len(FAKE) : len(FAKE) + 10] == [
            "--model-path",
            "tiny",
            "--tp",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(server.port),
            "--mem-fraction-static",
            "0.5",
        ]
        assert httpx.get(server.url + "/health_generate").status_code == 200
    finally:
        server.stop()
    assert not server.alive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=2)


def test_launcher_relaunches_after_sigkill_and_requests_resume(tmp_path):
    server = sg.SGLangServer("tiny", _cfg(), tmp_path / "s.log").start()
    eng = sg.SGLangEngine(server.url, build_tokenizer(), SGLangConfig(), server=server)
    try:
        port = server.port
        t0 = time.perf_counter()
        os.killpg(server.proc.pid, signal.SIGKILL)
        out = eng.generate(["hello"], SamplingParams(n=1))  # connection errors are retried while it relaunches
        print(f"\nsglang stand-in: SIGKILL -> relaunched and answering in {time.perf_counter() - t0:.2f}s")
        assert out[0][0].token_ids and server.restarts == 1 and server.alive() and server.port == port
        assert eng.health()["restarts"] == 1
    finally:
        eng.close()
    assert not server.alive()


def test_launcher_avoids_a_port_taken_by_someone_else(tmp_path, monkeypatch):
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    real = sg.free_port
    monkeypatch.setattr(sg, "free_port", lambda host="": next(ports, None) or real(host))
    server = sg.SGLangServer("tiny", _cfg(), tmp_path / "s.log")
    try:
        server.start()
        assert server.port != taken and server.alive()
        assert "Address already in use" in (tmp_path / "s.log").read_text()
    finally:
        server.stop()
        squatter.close()


def test_launcher_reports_a_server_that_dies_at_start(tmp_path):
    cfg = SGLangConfig(
        launch_command=[sys.executable, "-c", "import sys; print('CUDA not available'); sys.exit(3)"],
        startup_timeout_s=30,
    )
    with pytest.raises(RuntimeError, match=r"exited during start-up \(code 3\)[\s\S]*CUDA not available"):
        sg.SGLangServer("tiny", cfg, tmp_path / "s.log").start()


def test_server_dies_with_a_sigkilled_engine_process(tmp_path):
    script = (
        "import sys, time\n"
        "from planact.engine_config import SGLangConfig\n"
        "from planact.engines.sglang import SGLangServer\n"
        f"s = SGLangServer('tiny', SGLangConfig(launch_command={FAKE!r}, startup_timeout_s=30), "
        f"{str(tmp_path / 's.log')!r})\n"
        "s.start()\n"
        "print(s.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    server_pid = int(owner.stdout.readline())
    assert psutil.pid_exists(server_pid)
    owner.kill()  # SIGKILL: the engine gets no chance to stop its server
    owner.wait()
    deadline = time.time() + 10
    while time.time() < deadline and psutil.pid_exists(server_pid) and psutil.Process(server_pid).status() != "zombie":
        time.sleep(0.1)
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == "zombie"


def test_role_worker_on_sglang_trains_and_pushes_weights_through_the_shared_folder(tmp_path):
    from planact.config import load_config
    from planact.role_spec import role_spec
    from planact.workers import RoleWorker

    from .conftest import SMOKE

    cfg = load_config(
        SMOKE,
        [
            f"checkpoint.root={tmp_path}",
            "planner.engine=sglang",
            f"planner.sglang.launch_command={FAKE!r}".replace("'", '"'),
        ],
    )
    worker = RoleWorker(role_spec(cfg, "planner"), 0, with_trainer=True)
    try:
        (group,) = worker.generate(["sort the digits ="], n=2)
        assert group[0].token_ids and len(group[0].logprobs) == len(group[0].token_ids)
        samples = [
            {"prompt_ids": c.prompt_ids, "token_ids": c.token_ids, "logprobs": c.logprobs, "advantage": adv}
            for c, adv in zip(group, (1.0, -1.0))
        ]
        metrics = worker.train(samples)
        assert metrics["weight_version"] == 1.0
        exported = tmp_path / "smoke" / "weights" / "planner" / "v000001"
        assert (exported / "config.json").is_file()  # the trainer wrote an HF checkpoint ...
        info = worker.engine.http.request("GET", "/get_model_info")
        assert info["model_path"] == str(exported) and info["weight_version"] == "1"  # ... the server loaded it
        assert worker.get_weights() == (str(exported), 1)  # what other replicas are pointed at
    finally:
        worker.on_stop()
    assert not worker.engine.server.alive()
