"""tools/proc_cpu.py: a command's CPU summed by kind of process (what docs/testing.md's breakdown comes from)."""

from __future__ import annotations

import sys

from tools.proc_cpu import kind, record, report


def test_kinds_name_the_processes_the_suite_spends_on():
    venv = "/v/lib/python3.11/site-packages/ray"
    assert kind("ray::RoleWorker.generate", "ray::RoleWorker") == "ray::RoleWorker.generate"
    assert kind(f"/v/bin/python -u {venv}/dashboard/agent.py --node-ip-address=127.0.0.1", "python") == (
        "ray dashboard agent"
    )
    assert kind(f"{venv}/core/src/ray/raylet/raylet --raylet_socket_name=x", "raylet") == "ray raylet"
    assert kind("/v/bin/python -m flows.plan_act --config c.yaml", "python") == "python -m flows.plan_act"
    assert kind("/usr/bin/python3.11 -s /tmp/planact-run-ab12/0123456789ab.py", "python3.11") == "sandboxed test run"
    assert kind("", "kworker/0:1") == "kworker/0:1"  # a kernel thread has no command line
    uvicorn = "/v/bin/python -m uvicorn --app-dir /v/site-packages --factory prefect.server.api.server:create_app"
    assert kind(uvicorn, "python") == "prefect server"  # a run's own temporary server, not MLflow's
    assert kind("/v/bin/python /v/bin/mlflow server --host 127.0.0.1", "python") == "mlflow server"


def test_a_busy_child_is_counted_under_its_kind(tmp_path, capsys):
    out = tmp_path / "cpu.jsonl"
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass"
    assert record(out, [sys.executable, "-c", busy], every_s=0.1) == 0
    rows = {k: cpu for k, cpu, _ in report(out)}
    assert rows[kind(f"{sys.executable} -c x", "python")] >= 0.9  # the busy second, less the last sample's gap
    assert "CPU-s in" in capsys.readouterr().out
