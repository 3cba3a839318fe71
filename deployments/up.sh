#!/usr/bin/env bash
# One command: a Prefect API (yours, or a local server started here), the `planact` process work pool,
# every deployment in prefect.yaml, and a worker serving them (foreground; Ctrl-C stops it).
#   deployments/up.sh                      # local server on 127.0.0.1:4200, UI at http://127.0.0.1:4200
#   PREFECT_API_URL=http://host:4200/api deployments/up.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PLANACT_ROOT="$PWD"
PY="${PLANACT_PYTHON:-.venv/bin/python}"
PREFECT="$(dirname "$PY")/prefect"
export PREFECT_SERVER_ANALYTICS_ENABLED=false

if [[ -z "${PREFECT_API_URL:-}" ]]; then
  export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
  export PREFECT_API_URL="http://127.0.0.1:${PREFECT_PORT:-4200}/api"
  if ! curl -sf "$PREFECT_API_URL/health" >/dev/null; then
    echo "starting a Prefect server ($PREFECT_API_URL, home $PREFECT_HOME, log .prefect/server.log)"
    mkdir -p .prefect
    # planact's server settings (flows/runtime.py SERVER_ENV: task-run events recorded in batches), unless set
    eval "$("$PY" -c 'import os, shlex; from flows.runtime import SERVER_ENV
print("\n".join(f"export {k}={shlex.quote(os.environ.get(k, v))}" for k, v in SERVER_ENV.items()))')"
    nohup "$PREFECT" server start --host 127.0.0.1 --port "${PREFECT_PORT:-4200}" > .prefect/server.log 2>&1 &
    for _ in $(seq 120); do curl -sf "$PREFECT_API_URL/health" >/dev/null && break; sleep 1; done
  fi
fi
"$PREFECT" work-pool inspect planact >/dev/null 2>&1 || "$PREFECT" work-pool create planact --type process
"$PREFECT" deploy --all --no-prompt
echo "deployed; UI: ${PREFECT_API_URL%/api}  -  run one: $PREFECT deployment run 'plan-act-training/plan-act-train'"
exec "$PREFECT" worker start --pool planact
