#!/usr/bin/env bash
# `make docker-smoke`: what the Docker image does, without a Docker engine (issue 8).
#
#  1. copy what the Dockerfile's build stage COPYs, and build a wheel from it (no deps);
#  2. check the wheel holds only cubequeue/… (never a top-level server/ or storage/);
#  3. install the locked dependencies (uv export of uv.lock, hash-checked) and then the wheel
#     alone in a fresh venv, as the final stage does;
#  4. start `cubequeue` with the image's ENV (CUBEQUEUE_HOST=0.0.0.0) and nothing else of
#     ours in the environment, exactly as ENTRYPOINT ["cubequeue"] would;
#  5. run the image's HEALTHCHECK, `cubequeue healthcheck`, until it exits 0;
#  6. send SIGTERM and require a clean exit (code 0) within the shutdown grace.
#
# The image listens on 5432 and 3030. When either is busy on this machine, the smoke run
# picks free ports and passes them as CUBEQUEUE_PORT / CUBEQUEUE_HTTP_PORT, and says so.
# SMOKE_PYTHON chooses the interpreter of the fresh venv (default: python3.12, as the image).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
VENV_PY="${VENV_PY:-$ROOT/.venv/bin/python}"
# The image runs python:3.12-slim, so prefer a 3.12 interpreter; otherwise the one the
# project venv was made from (a fresh venv from it does not inherit the venv's packages).
if [[ -z "${SMOKE_PYTHON:-}" ]]; then
  for candidate in python3.12 "$("$VENV_PY" -c 'import sys; print(sys._base_executable)')"; do
    if real="$("$candidate" -c 'import sys; print(sys.executable)' 2>/dev/null)"; then
      SMOKE_PYTHON="$real"
      break
    fi
  done
fi
BASE_PY="$SMOKE_PYTHON"
UV="${UV:-$ROOT/build/uv/bin/uv}"
[[ -x "$UV" ]] || UV="$(command -v uv)" || { echo "docker-smoke: uv not found (make install bootstraps it)" >&2; exit 1; }
START_TIMEOUT_S="${START_TIMEOUT_S:-20}"
STOP_TIMEOUT_S="${STOP_TIMEOUT_S:-20}"

WORK="$(mktemp -d -t cubequeue-smoke.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
step() { printf '== %s\n' "$*"; }
fail() { printf 'docker-smoke FAILED: %s\n' "$*" >&2; exit 1; }

step "copying the build stage's COPY sources (Dockerfile) to $WORK/src"
mkdir -p "$WORK/src"
# COPY lines of the first stage (before the second FROM), without --from
while read -r -a words; do
  dest="${words[-1]}"
  unset 'words[-1]'
  for src in "${words[@]:1}"; do
    (cd "$ROOT" && cp -r "$src" "$WORK/src/$dest") || fail "COPY $src $dest"
  done
done < <(awk '/^FROM /{stage++} stage==1 && /^COPY / && !/--from/' "$ROOT/Dockerfile")
find "$WORK/src" -name __pycache__ -prune -exec rm -rf {} +

step "exporting the lock and building the wheel"
if ! (cd "$WORK/src" && "$UV" export --frozen --no-dev --no-emit-project --no-header \
        --format requirements-txt --output-file "$WORK/dist/requirements.txt") >"$WORK/pip.log" 2>&1; then
  cat "$WORK/pip.log" >&2
  fail "uv export of uv.lock"
fi
if ! "$BASE_PY" -m pip wheel -q --no-deps --wheel-dir "$WORK/dist" "$WORK/src" >"$WORK/pip.log" 2>&1; then
  cat "$WORK/pip.log" >&2
  fail "building the wheel"
fi
WHEEL="$(ls "$WORK"/dist/cubequeue-*.whl)"
echo "   $(basename "$WHEEL")"

step "checking the wheel's contents"
"$VENV_PY" - "$WHEEL" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
stray = [n for n in names if not n.startswith(("cubequeue/", "cubequeue-"))]
if stray:
    sys.exit(f"files outside cubequeue/: {stray[:10]}")
for must in ("cubequeue/server/__main__.py", "cubequeue/server/cli.py",
             "cubequeue/grammar/__init__.py", "cubequeue/storage/__init__.py"):
    if must not in names:
        sys.exit(f"missing from the wheel: {must}")
entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
text = zipfile.ZipFile(sys.argv[1]).read(entry).decode()
for must in ("cubequeue = cubequeue.server.cli:main", "cubequeue = cubequeue.server.pytest_plugin"):
    if must not in text:
        sys.exit(f"entry point missing: {must}")
print(f"   {len(names)} files, all under cubequeue/")
PY

step "installing the wheel in a fresh venv ($BASE_PY)"
"$BASE_PY" -m venv "$WORK/venv"
if ! "$WORK/venv/bin/pip" install -q --disable-pip-version-check --require-hashes \
        -r "$WORK/dist/requirements.txt" >"$WORK/pip.log" 2>&1; then
  cat "$WORK/pip.log" >&2
  fail "pip install --require-hashes of the locked dependencies"
fi
if ! "$WORK/venv/bin/pip" install -q --disable-pip-version-check --no-deps "$WHEEL" >"$WORK/pip.log" 2>&1; then
  cat "$WORK/pip.log" >&2
  fail "pip install of the wheel"
fi
if (cd "$WORK" && "$WORK/venv/bin/python" -c 'import server' 2>/dev/null); then
  fail "a top-level 'server' package is importable from the installed wheel"
fi

port_free() {
  "$VENV_PY" -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try: s.bind(("0.0.0.0", int(sys.argv[1])))
except OSError: sys.exit(1)' "$1"
}
free_port() { "$VENV_PY" -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0",0)); print(s.getsockname()[1])'; }

# the image's ENV, and nothing else of ours
RUN_ENV=(PATH="$WORK/venv/bin:/usr/local/bin:/usr/bin:/bin" HOME="$WORK" LANG=C.UTF-8
         PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CUBEQUEUE_HOST=0.0.0.0)
PG_PORT=5432 HTTP_PORT=3030
if ! port_free 5432 || ! port_free 3030; then
  PG_PORT="$(free_port)"; HTTP_PORT="$(free_port)"
  echo "   NOTE: 5432 or 3030 is busy here; using CUBEQUEUE_PORT=$PG_PORT CUBEQUEUE_HTTP_PORT=$HTTP_PORT"
  RUN_ENV+=(CUBEQUEUE_PORT="$PG_PORT" CUBEQUEUE_HTTP_PORT="$HTTP_PORT")
fi

step "starting: ENTRYPOINT [\"cubequeue\"] with CUBEQUEUE_HOST=0.0.0.0"
(cd "$WORK" && exec env -i "${RUN_ENV[@]}" cubequeue >"$WORK/server.log" 2>&1) &
SERVER_PID=$!

step "HEALTHCHECK: cubequeue healthcheck"
deadline=$((SECONDS + START_TIMEOUT_S))
until (cd "$WORK" && env -i "${RUN_ENV[@]}" cubequeue healthcheck >"$WORK/health.out" 2>&1); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    cat "$WORK/server.log" >&2
    fail "the server exited before it became healthy"
  fi
  if (( SECONDS >= deadline )); then
    cat "$WORK/health.out" "$WORK/server.log" >&2
    fail "not healthy within ${START_TIMEOUT_S}s"
  fi
  sleep 0.2
done
echo "   $(cat "$WORK/health.out")"
kill -0 "$SERVER_PID" 2>/dev/null || fail "healthy, but our server is gone (another process on the port?)"

step "SIGTERM"
kill -TERM "$SERVER_PID"
deadline=$((SECONDS + STOP_TIMEOUT_S))
while kill -0 "$SERVER_PID" 2>/dev/null; do
  if (( SECONDS >= deadline )); then
    cat "$WORK/server.log" >&2
    fail "still running ${STOP_TIMEOUT_S}s after SIGTERM"
  fi
  sleep 0.1
done
set +e
wait "$SERVER_PID"
rc=$?
set -e
SERVER_PID=""
if (( rc != 0 )); then
  cat "$WORK/server.log" >&2
  fail "exit code $rc after SIGTERM (expected 0)"
fi
if grep -q "Traceback" "$WORK/server.log"; then
  cat "$WORK/server.log" >&2
  fail "a traceback in the server log"
fi
echo "docker-smoke OK: wheel installed in a fresh venv, healthy, clean exit on SIGTERM"
