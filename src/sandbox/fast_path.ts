/**
 * What the exec gate's own thread may decide without asking the daemon's thread: the policy's
 * answer for the common exec, from a snapshot of one agent's exec rules. Everything else (a rule
 * may match, a script, the loader, an unreadable or truncated exec, structured rules, stop-all,
 * a snapshot older than the last policy reload) goes to the daemon's thread, which decides as
 * before (src/control/gateway.ts `admitProgram`).
 *
 * The answers are exactly the policy's (src/daemon/policy_port.ts `decideAtExec`): with no deny
 * or confirm rule everything is allowed; otherwise a plain program whose every name fits no
 * deny or confirm rule's literal start is allowed, and verified after its exec.
 */
import { execNames, wordsStartWith } from "../shared/mod.ts";
import type { ExecAnswer, ExecEvent } from "./gate.ts";

/**
 * One agent's exec rules, as the gate thread needs them (structured-cloneable). `allowAll`: the
 * policy has no deny or confirm rule (and no structured rule). Otherwise the literal starts of
 * its deny and confirm rules, and the names rules give files by content (SHA-256 → names).
 */
export type ExecFastPath =
  | { allowAll: true }
  | { allowAll?: false; prefixes: string[]; idx: Map<string, Set<string>> };

/** The answer for `ev` from `fp` alone, or undefined when the daemon's thread must decide. */
export function fastAnswer(fp: ExecFastPath, ev: ExecEvent): ExecAnswer | undefined {
  if (fp.allowAll) return { allow: true };
  if (ev.chain || ev.interpreter || ev.loads || ev.unreadable || ev.truncated) return undefined;
  const names = execNames(fp.idx, ev.path, ev.argv[0], ev.identity?.sha256);
  const args = ev.argv.length > 1 ? ev.argv.slice(1) : NO_ARGS;
  for (const prefix of fp.prefixes) {
    for (const name of names) if (wordsStartWith(name, args, prefix)) return undefined;
  }
  return { allow: true, verify: true };
}

const NO_ARGS: readonly string[] = [];
