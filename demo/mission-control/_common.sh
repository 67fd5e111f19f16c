# Shared by run.sh and verify_demo.sh (sourced, not run): finds Deno, prepares a throwaway
# TERMADA_HOME and work directory, starts the broken service and the isolated daemon.
# shellcheck shell=bash

DEMO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${TERMADA_ROOT:-$(cd "$DEMO_DIR/../.." && pwd)}"
SERVICE_PID=""
DAEMON_PID=""

die() {
  echo "" >&2
  echo "!!! DEMO FAILED: $*" >&2
  exit 1
}

# DENO: $DENO, else a Deno 2 on PATH, else the pinned npm build through npx.
find_deno() {
  if [[ -n "${DENO:-}" ]]; then
    :
  elif command -v deno >/dev/null 2>&1 && [[ "$(deno --version 2>/dev/null)" == "deno 2."* ]]; then
    DENO="$(command -v deno)"
  elif command -v npx >/dev/null 2>&1; then
    echo "Fetching Deno 2.9.6 through npx…"
    DENO="$(npx --yes deno@2.9.6 eval --quiet 'console.log(Deno.execPath())' | tail -n 1)"
  else
    die "no Deno: install it, set DENO=/path/to/deno, or install Node.js (npx)"
  fi
  [[ -x "$DENO" ]] || die "DENO=$DENO is not an executable"
  export DENO
}

# STATE (everything of this run), TERMADA_HOME, WORK (the service's directory), the agent token.
make_state() {
  STATE="$(mktemp -d "${TMPDIR:-/tmp}/termada-demo.XXXXXX")"
  export TERMADA_HOME="$STATE/home"
  WORK="$STATE/work"
  mkdir -p "$TERMADA_HOME" "$WORK/data"
  chmod 700 "$TERMADA_HOME"
  export NO_COLOR=1
  export TERMADA_DEMO_TOKEN="${TERMADA_DEMO_TOKEN:-demo-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}"
  # The service's world: its data, its (broken) config, and the repair script.
  printf '[{"sku":"A-1","name":"anchor","stock":12},{"sku":"B-7","name":"buoy","stock":3}]\n' \
    >"$WORK/data/items.json"
  cat >"$WORK/app.conf" <<'CONF'
# Demo inventory service. Re-read on every request.
name=inventory
# Where items.json lives (relative to this file).
data_dir=./data-v2
CONF
  cp "$DEMO_DIR/repair.sh" "$WORK/repair.sh"
  chmod +x "$WORK/repair.sh"
}

# The broken HTTP service on a free loopback port: SERVICE_URL.
start_service() {
  (cd "$ROOT" && exec "$DENO" run --config "$ROOT/deno.json" --quiet --no-prompt \
    --allow-net=127.0.0.1 --allow-read="$WORK" --allow-write="$WORK" \
    "$DEMO_DIR/service.ts" "$WORK" 0) >"$STATE/service.out" 2>&1 &
  SERVICE_PID=$!
  local i
  for ((i = 0; i < 300; i++)); do
    [[ -s "$WORK/service.port" ]] && break
    kill -0 "$SERVICE_PID" 2>/dev/null || { cat "$STATE/service.out" >&2; die "the service exited"; }
    sleep 0.1
  done
  [[ -s "$WORK/service.port" ]] || die "the service did not start in 30 s"
  SERVICE_URL="http://127.0.0.1:$(tr -d '\n' <"$WORK/service.port")/"
}

# The isolated daemon (policy: demo/mission-control/termada.yaml): MCP_URL, DASHBOARD_URL.
start_daemon() {
  (cd "$ROOT" && exec "$DENO" run --config "$ROOT/deno.json" -P=daemon --no-prompt --quiet \
    "$ROOT/mod.ts" serve --config "$DEMO_DIR/termada.yaml" \
    ${DEMO_DAEMON_PORT:+--bind "127.0.0.1:$DEMO_DAEMON_PORT"}) >"$STATE/daemon.log" 2>&1 &
  DAEMON_PID=$!
  local i
  for ((i = 0; i < 600; i++)); do
    grep -q 'Stop with Ctrl-C' "$STATE/daemon.log" 2>/dev/null && break
    kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$STATE/daemon.log" >&2; die "the daemon exited"; }
    sleep 0.1
  done
  grep -q 'Stop with Ctrl-C' "$STATE/daemon.log" || die "the daemon did not start in 60 s"
  MCP_URL="$(grep -oE 'http://127\.0\.0\.1:[0-9]+/mcp' "$STATE/daemon.log" | head -n 1)"
  DASHBOARD_URL="$(grep -oE 'http://127\.0\.0\.1:[0-9]+/\?token=[0-9a-f]+' "$STATE/daemon.log" | head -n 1)"
  [[ -n "$MCP_URL" ]] || die "no MCP URL in the daemon's banner"
}

# `termada …` against the demo daemon (TERMADA_HOME is exported).
termada() {
  (cd "$ROOT" && "$DENO" run --config "$ROOT/deno.json" -P=daemon --no-prompt --quiet \
    "$ROOT/mod.ts" "$@")
}

# The scripted agent in the background (AGENT_PID is the Deno process itself); output to $1 if
# given, else to this terminal.
start_agent() {
  local args=(run --config "$ROOT/deno.json" --quiet --no-prompt
    --allow-net=127.0.0.1 --allow-env --allow-read="$WORK" --allow-write="$WORK"
    "$DEMO_DIR/agent.ts" --mcp "$MCP_URL" --service "$SERVICE_URL" --workdir "$WORK")
  if [[ -n "${1:-}" ]]; then
    (cd "$ROOT" && exec "$DENO" "${args[@]}") >"$1" 2>&1 &
  else
    (cd "$ROOT" && exec "$DENO" "${args[@]}") &
  fi
  AGENT_PID=$!
}

stop_all() {
  local pid
  for pid in "$DAEMON_PID" "$SERVICE_PID"; do
    [[ -n "$pid" ]] && kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "$DAEMON_PID" "$SERVICE_PID"; do
    if [[ -n "$pid" ]]; then
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  DAEMON_PID=""
  SERVICE_PID=""
}
