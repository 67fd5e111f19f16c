#!/usr/bin/env bash
# The guarded fix: point the service's data_dir back at the directory that exists.
# Run in the demo's work directory (where app.conf is). Idempotent: a second run changes nothing.
# The demo's policy puts this script behind `confirm`: it runs only after an operator approves.
set -euo pipefail

conf="${1:-app.conf}"
want="./data"

[[ -f "$conf" ]] || { echo "repair: $conf not found (run me in the demo work directory)" >&2; exit 1; }
[[ -f "$want/items.json" ]] || { echo "repair: $want/items.json is missing, refusing" >&2; exit 1; }

current="$(grep -E '^[[:space:]]*data_dir[[:space:]]*=' "$conf" | tail -n 1 | cut -d= -f2- | sed 's/#.*//; s/^[[:space:]]*//; s/[[:space:]]*$//' || true)"
if [[ "$current" == "$want" ]]; then
  echo "repair: $conf already has data_dir=$want, nothing to change"
  exit 0
fi

cp "$conf" "$conf.bak"
tmp="$conf.tmp.$$"
grep -vE '^[[:space:]]*data_dir[[:space:]]*=' "$conf" >"$tmp" || true
echo "data_dir=$want" >>"$tmp"
mv "$tmp" "$conf"
echo "repair: $conf: data_dir ${current:-<unset>} -> $want (backup: $conf.bak)"
