#!/usr/bin/env bash
# The Mission Control demo, non-interactively, with every outcome checked (CI runs this).
# Starts the broken service and an isolated daemon, runs the scripted agent, approves the guarded
# repair through the CLI as an operator would, then checks the report, the service and the audit
# log. Prints DEMO OK, or stops at the first deviation and says which check failed.
#
#   bash demo/mission-control/verify_demo.sh      # DENO=/path/to/deno to pick the binary
#   DEMO_TIMEOUT=120 KEEP_DEMO_STATE=1 bash demo/mission-control/verify_demo.sh
set -euo pipefail

# shellcheck source=_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

TIMEOUT="${DEMO_TIMEOUT:-120}"
AGENT_PID=""
WATCHDOG_PID=""
STATE=""
OK=0

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n "$WATCHDOG_PID" ]] && kill "$WATCHDOG_PID" 2>/dev/null || true
  [[ -n "$AGENT_PID" ]] && kill -TERM "$AGENT_PID" 2>/dev/null || true
  stop_all
  if [[ "$OK" != 1 && -n "$STATE" ]]; then
    echo "--- daemon.log (tail) ---" >&2
    tail -n 30 "$STATE/daemon.log" >&2 2>/dev/null || true
    echo "--- service.log (tail) ---" >&2
    tail -n 10 "$STATE/work/service.log" >&2 2>/dev/null || true
    echo "State kept for inspection: $STATE" >&2
  elif [[ -n "$STATE" && -z "${KEEP_DEMO_STATE:-}" ]]; then
    rm -rf "$STATE"
  elif [[ -n "$STATE" ]]; then
    echo "State kept: $STATE"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'die "interrupted"' INT
trap 'die "timed out after ${TIMEOUT} s"' TERM

check() { echo "  ✔ $*"; }

# A hard limit on the whole run: the watchdog sends this script SIGTERM.
(
  for ((i = 0; i < TIMEOUT; i++)); do
    sleep 1
    kill -0 $$ 2>/dev/null || exit 0
  done
  kill -TERM $$
) >/dev/null 2>&1 &
WATCHDOG_PID=$!

command -v curl >/dev/null || die "curl is required (the agent's probes use it)"
find_deno
make_state
echo "Deno:          $DENO"
echo "State:         $STATE"
start_service
echo "Service:       $SERVICE_URL"
code="$(curl -sS -o /dev/null -w '%{http_code}' "$SERVICE_URL")"
[[ "$code" == 503 ]] || die "the service should start broken (HTTP 503), got HTTP $code"
check "the service starts broken: HTTP 503"
start_daemon
echo "MCP:           $MCP_URL"
echo "Dashboard:     $DASHBOARD_URL"

start_agent "$STATE/agent.out"

# The operator: wait for the repair to be parked, then approve it with the CLI.
APPROVAL=""
while kill -0 "$AGENT_PID" 2>/dev/null; do
  pending="$(termada pending --json)" || die "termada pending failed"
  APPROVAL="$(grep -oE '"approval_id": *"[^"]+"' <<<"$pending" | head -n 1 | cut -d'"' -f4 || true)"
  if [[ -n "$APPROVAL" ]]; then
    grep -q 'repair.sh' <<<"$pending" || die "the pending approval is not the repair: $pending"
    check "the repair is parked for approval: $APPROVAL"
    termada approve "$APPROVAL" --reason "verify_demo.sh: repair reviewed" \
      || die "termada approve $APPROVAL failed"
    check "approved with: termada approve $APPROVAL"
    break
  fi
  sleep 0.3
done

set +e
wait "$AGENT_PID"
agent_rc=$?
set -e
AGENT_PID=""
echo "--- agent output ---"
cat "$STATE/agent.out"
echo "--------------------"
[[ "$agent_rc" == 0 ]] || die "the agent exited $agent_rc (its output above says why)"
[[ -n "$APPROVAL" ]] || die "the agent ended without the repair ever waiting for approval"
check "the agent finished its mission (exit 0)"

REPORT="$WORK/report.md"
[[ -s "$REPORT" ]] || die "no report at $REPORT"
grep -qF "Bring the demo service back" "$REPORT" || die "the report does not quote the goal"
grep -qE '^- Status: \*\*succeeded\*\*' "$REPORT" || die "the report's outcome is not succeeded"
# One step's block of "Plan and evidence": its line and the indented evidence lines under it.
step_block() { awk -v s="- **$1** " 'index($0, s) == 1 { on = 1; print; next } on && /^  / { print; next } { on = 0 }' "$REPORT"; }
sha_of() { (sha256sum 2>/dev/null || shasum -a 256) | cut -d' ' -f1; }
# has TEXT FIXED-STRING...: every string occurs in TEXT (here-strings: no SIGPIPE under pipefail).
has() {
  local text="$1" s
  shift
  for s in "$@"; do grep -qF -- "$s" <<<"$text" || return 1; done
}
for s in s1 s2 s3 s4; do
  block="$(step_block "$s")"
  has "$(head -n 1 <<<"$block" | tr -d '*')" passed "verified by runtime" \
    || die "report: step $s is not passed and verified by runtime: $(head -n 1 <<<"$block")"
  has "$block" "exited, exit code 0" || die "report: step $s has no exit-0 evidence: $block"
done
has "$(step_block s3)" "approval \`$APPROVAL\`: approved by \`operator:" \
  || die "report: step s3 does not show approval $APPROVAL and its approver: $(step_block s3)"
# Each probe exits 0 only when its status line is exactly the expected one (grep -x), and the
# runtime's hash of the job's recorded output is the hash of that line alone.
for probe in "s1 503 curl -sS" "s4 200 curl -fsS"; do
  read -r s code cmd <<<"$probe"
  has "$(step_block "$s")" "$cmd" "| grep -x 'HTTP $code'" \
    || die "report: step $s's evidence is not the HTTP $code probe: $(step_block "$s")"
  has "$(step_block "$s")" "sha256 \`$(printf 'HTTP %s\n' "$code" | sha_of)\`" \
    || die "report: step $s's recorded output is not exactly 'HTTP $code': $(step_block "$s")"
done
has "$(grep -E '^\| [0-9]+ \| ' "$REPORT" || true)" "| approval.resolved |" "| mission.status |" \
  || die "report: audit anchors missing"
check "report.md: goal, succeeded, s1-s4 verified by runtime with exit 0, approval $APPROVAL and its approver, HTTP 200"

sha="$(grep -oE '"sha256": *"[0-9a-f]{64}"' "$WORK/report.json" | cut -d'"' -f4)"
actual="$(sha_of <"$REPORT")"
[[ "$sha" == "$actual" ]] || die "report.md's sha256 is $actual, the runtime said $sha"
check "report.md sha256 $sha"

code="$(curl -sS -o /dev/null -w '%{http_code}' "$SERVICE_URL")"
[[ "$code" == 200 ]] || die "the service should answer HTTP 200 now, got HTTP $code"
check "the service answers HTTP 200"
grep -q '^data_dir=./data$' "$WORK/app.conf" || die "app.conf was not repaired: $(cat "$WORK/app.conf")"

termada audit verify || die "termada audit verify failed"
check "termada audit verify"
audit="$(termada audit -n 1000 --json)" || die "termada audit failed"
has "$audit" '"event": "mission.reported"' "$sha" \
  || die "the report's sha256 is not in the audit log (termada audit)"
grep -qF "$sha" "$TERMADA_HOME"/audit/audit-*.jsonl || die "the report's sha256 is in no audit segment"
check "the report's sha256 is in the audit log (mission.reported)"

OK=1
echo ""
echo "DEMO OK"
