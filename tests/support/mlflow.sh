# Sourced by the tracking tests: a real MLflow tracking server (`mlflow server`, the PyPI package
# in the project's venv, scripts/python-requirements.txt) on loopback, the test's own: a SQLite
# store and served artifacts in a folder of the test's, a free high port. Needs fail
# (tests/support/fail.sh).
#   start_mlflow PYTHON DIR [PORT]  starts it (PORT: the one it had before, for a restart) and
#     waits until /health answers (deadline 120 s); sets mlflow_port and mlflow_uri. Exits 77
#     (skip) where PYTHON cannot import mlflow.
#   launch_mlflow PYTHON DIR [PORT], then wait_mlflow: the same in two steps, the test going on
#     while the server starts (about 20 s here).
#   stop_mlflow   stops it (TERM, then KILL after 10 s) and waits; for the EXIT trap as well.
#   mlflow_log    the end of the server's log, for a failure's context.
source "$(dirname "${BASH_SOURCE[0]}")/port.sh"
mlflow_pid= mlflow_port= mlflow_uri= mlflow_dir=

start_mlflow() {
  launch_mlflow "$@"
  wait_mlflow
}

launch_mlflow() {
  local python=$1 port=${3:-}
  mlflow_dir=$2
  "$python" -c 'import mlflow' 2> /dev/null || {
    echo "SKIP: $python has no mlflow (scripts/python-requirements.txt)"
    exit 77
  }
  if [[ -n $port ]]; then
    mlflow_port=$port
  else
    reserve_port mlflow_port || fail "no port for the mlflow server"
  fi
  mlflow_uri=http://127.0.0.1:$mlflow_port
  mkdir -p "$mlflow_dir/artifacts"
  # Its own process group, so that stop_mlflow ends uvicorn's workers with it.
  setsid "$(dirname "$python")/mlflow" server --host 127.0.0.1 --port "$mlflow_port" --workers 1 \
    --backend-store-uri "sqlite:///$mlflow_dir/store.db" \
    --artifacts-destination "$mlflow_dir/artifacts" >> "$mlflow_dir/server.log" 2>&1 &
  mlflow_pid=$!
}

wait_mlflow() {
  local deadline=$((SECONDS + 120))
  while ((SECONDS < deadline)); do
    kill -0 "$mlflow_pid" 2> /dev/null || fail "mlflow server exited: $(mlflow_log)"
    curl -sf "$mlflow_uri/health" > /dev/null 2>&1 && return 0
    sleep 0.5
  done
  fail "mlflow server did not answer on $mlflow_uri within 120 s: $(mlflow_log)"
}

stop_mlflow() {
  [[ -n $mlflow_pid ]] || return 0
  kill -TERM -- "-$mlflow_pid" 2> /dev/null
  local deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)) && kill -0 "$mlflow_pid" 2> /dev/null; do sleep 0.1; done
  kill -KILL -- "-$mlflow_pid" 2> /dev/null
  wait "$mlflow_pid" 2> /dev/null
  mlflow_pid=
}

mlflow_log() { tail -n 20 "$mlflow_dir/server.log" 2> /dev/null; }
