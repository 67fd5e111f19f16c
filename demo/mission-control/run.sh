#!/usr/bin/env bash
# The Mission Control demo, interactive. Starts (on loopback, in a throwaway TERMADA_HOME) a small
# HTTP service that answers 503 because of a deliberate fault and an isolated Termada daemon whose
# policy puts the repair script behind `confirm`; then a scripted MCP agent works the mission.
# You are the operator: approve the repair here, with the printed CLI command, or in the dashboard.
#
#   ./demo/mission-control/run.sh                 # the scripted agent (no LLM)
#   ./demo/mission-control/run.sh --real-agent    # only service + daemon, for Claude Code / Codex
#                                                 # (see PROMPT.md); Ctrl-C stops everything
# DENO=/path/to/deno picks the Deno binary; DEMO_DAEMON_PORT=7799 fixes the daemon's port;
# TERMADA_DEMO_TOKEN=… fixes the agent token (both handy with --real-agent).
set -euo pipefail

# shellcheck source=_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

REAL_AGENT=""
case "${1:-}" in
  --real-agent) REAL_AGENT=1 ;;
  "") ;;
  *) echo "usage: $0 [--real-agent]" >&2 && exit 2 ;;
esac

AGENT_PID=""
STATE=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n "$AGENT_PID" ]] && kill -TERM "$AGENT_PID" 2>/dev/null || true
  stop_all
  [[ -n "$STATE" ]] && echo "Everything of this run (logs, report, audit log) is in $STATE"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v curl >/dev/null || die "curl is required (the agent's probes use it)"
find_deno
make_state
start_service
start_daemon
APPROVE="TERMADA_HOME=$TERMADA_HOME $DENO run --config $ROOT/deno.json -P=daemon --quiet $ROOT/mod.ts approve"

cat <<INFO

Termada Mission Control demo
  service     $SERVICE_URL   (answers 503: app.conf points data_dir at a missing directory)
  daemon      $MCP_URL   (agent demo-agent, policy: demo/mission-control/termada.yaml)
  dashboard   $DASHBOARD_URL
  work dir    $WORK

When the agent asks for approval, approve the repair in the dashboard (Approvals), answer y
below, or run in another terminal:
  $APPROVE <approval id>
INFO

if [[ -n "$REAL_AGENT" ]]; then
  cat <<REAL

Register this daemon with your agent (token of agent demo-agent: $TERMADA_DEMO_TOKEN):
  claude mcp add --transport http termada-demo $MCP_URL \\
    --header "Authorization: Bearer $TERMADA_DEMO_TOKEN"
  # Codex (~/.codex/config.toml), then export TERMADA_DEMO_TOKEN=$TERMADA_DEMO_TOKEN:
  #   [mcp_servers.termada-demo]
  #   url = "$MCP_URL"
  #   bearer_token_env_var = "TERMADA_DEMO_TOKEN"
Then give it the task in $DEMO_DIR/PROMPT.md with:
  SERVICE_URL=$SERVICE_URL
  WORK_DIR=$WORK
Ctrl-C stops the daemon and the service.
REAL
else
  echo ""
  start_agent
fi

running() {
  if [[ -n "$REAL_AGENT" ]]; then return 0; fi
  kill -0 "$AGENT_PID" 2>/dev/null
}

# Offer to approve from this terminal; an approval given elsewhere (dashboard, CLI) also works.
asked=""
while running; do
  pending="$(termada pending --json 2>/dev/null || true)"
  id="$(grep -oE '"approval_id": *"[^"]+"' <<<"$pending" | head -n 1 | cut -d'"' -f4 || true)"
  if [[ -n "$id" && -t 0 ]]; then
    if [[ "$id" != "$asked" ]]; then
      asked="$id"
      cmd="$(tr -s ' \n' ' ' <<<"$pending" | grep -oE '"command": \[[^]]*\]' | head -n 1 |
        sed -E 's/^"command": \[ ?//; s/ ?\]$//')"
      printf '\n>>> Approve %s %s? [y = approve, n = deny, Enter = wait] ' "$id" "$cmd"
    fi
    if read -r -t 2 answer; then
      case "$answer" in
        y | Y | yes) termada approve "$id" --reason "approved in run.sh" ;;
        n | N | no) termada deny "$id" --reason "denied in run.sh" ;;
        *) printf '>>> Still waiting (dashboard or CLI). Approve %s? [y/n] ' "$id" ;;
      esac
    fi
  else
    sleep 1
  fi
done
set +e
wait "$AGENT_PID"
rc=$?
set -e
AGENT_PID=""

if [[ "$rc" == 0 ]]; then
  echo ""
  echo "Report: $WORK/report.md"
  echo "Service now: $(curl -sS -w ' (HTTP %{http_code})' "$SERVICE_URL")"
  if [[ -t 0 ]]; then
    read -r -p "Press Enter to stop the daemon and the service (the dashboard works until then) " _ || true
  fi
else
  echo "" >&2
  echo "The agent stopped (exit $rc); logs: $STATE/daemon.log, $WORK/service.log" >&2
fi
exit "$rc"
