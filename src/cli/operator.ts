/**
 * Operator commands: `termada pending | approve | deny | stop | resume | audit | dashboard |
 * mission | reconcile | policy` (and, in ops.ts, status, jobs, logs…). They talk to the
 * running daemon over its Unix socket with the operator token from the state directory (only the
 * same user can read it). `termada audit verify` also works with no daemon running.
 */
import { join } from "node:path";
import { type AuditRecord, verifyAudit } from "../audit/mod.ts";
import { effectivePaths, loadConfig, resolvePaths, type TermadaPaths } from "../config/mod.ts";
import { daemonAlive, socketFetch } from "../client/mod.ts";
import type { AnchorVerifyResult } from "../governance/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import { strictArgs, table } from "./_args.ts";

export interface OperatorContext {
  out(text: string): Promise<void>;
}

export async function paths(config?: string): Promise<TermadaPaths> {
  const env = Deno.env.toObject();
  const base = resolvePaths({ env, home: env.TERMADA_HOME, configFile: config });
  const { config: cfg } = await loadConfig(base.configFile, env, {
    required: config !== undefined,
  });
  return effectivePaths(base, cfg);
}

/**
 * The credential the CLI presents: an operator JWT from `TERMADA_OPERATOR_JWT_FILE` (a file,
 * so it is not on argv or in the environment of children), else the static operator token.
 */
function token(p: TermadaPaths, opts: { jwt?: boolean } = {}): string {
  const jwtFile = opts.jwt === false ? undefined : Deno.env.get("TERMADA_OPERATOR_JWT_FILE");
  if (jwtFile) {
    try {
      // A credential: like an SSH key, refused when others may read it.
      const mode = Deno.statSync(jwtFile).mode ?? 0;
      if (mode & 0o077) {
        throw new TermadaError(
          "INVALID_ARGUMENT",
          `The operator JWT "${jwtFile}" (TERMADA_OPERATOR_JWT_FILE) is readable by others`,
          { hint: `chmod 600 ${jwtFile}` },
        );
      }
      return Deno.readTextFileSync(jwtFile).trim();
    } catch (err) {
      if (err instanceof TermadaError) throw err;
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Cannot read the operator JWT "${jwtFile}" (TERMADA_OPERATOR_JWT_FILE): ${
          err instanceof Error ? err.message : String(err)
        }`,
      );
    }
  }
  try {
    return Deno.readTextFileSync(p.tokenFile).trim();
  } catch {
    throw new TermadaError("NOT_FOUND", "No operator token: the daemon has never run here", {
      hint: "Start it with termada serve",
    });
  }
}

/**
 * One operator request over the socket; a non-2xx answer becomes the daemon's typed error, and
 * no daemon at all is SERVER_UNREACHABLE. The connection closes once `read` settles.
 */
export async function request<T>(
  p: TermadaPaths,
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body: Record<string, unknown> | undefined,
  read: (r: Response) => Promise<T>,
): Promise<T> {
  const unreachable = (cause?: unknown) =>
    new TermadaError("SERVER_UNREACHABLE", "No Termada daemon is running", {
      hint: "Start it with termada serve",
      cause,
    });
  let auth: string;
  try {
    auth = token(p);
  } catch (err) {
    // No token: say first that no daemon runs, when none does.
    if (!(await daemonAlive(p.socketPath))) throw unreachable(err);
    throw err;
  }
  const s = socketFetch(p.socketPath);
  try {
    // No health probe before each request (a busy daemon could miss its timeout, and `logs -f`
    // polls): a socket that does not connect is the sign that no daemon runs.
    let r: Response;
    try {
      r = await s.fetch(`http://termada/api${path}`, {
        method,
        headers: {
          authorization: `Bearer ${auth}`,
          "x-termada-operator": `cli:${Deno.env.get("USER") ?? "operator"}`,
          "content-type": "application/json",
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw unreachable(err);
    }
    if (!r.ok) {
      const json = await r.json().catch(() => ({})) as Record<string, unknown>;
      const e = json.error as { code?: string; message?: string; hint?: string } | undefined;
      throw new TermadaError(
        (e?.code as "INVALID_ARGUMENT") ?? "INTERNAL",
        e?.message ?? `HTTP ${r.status}`,
        { hint: e?.hint },
      );
    }
    return await read(r);
  } finally {
    s.close();
  }
}

export function call(
  p: TermadaPaths,
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  body?: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  return request(p, method, path, body, async (r) => await r.json() as Record<string, unknown>);
}

const COMMON = {
  config: { type: "string" as const },
  json: { type: "boolean" as const },
  help: { type: "boolean" as const },
};

/** `termada <command> --help`. */
const USAGE = {
  pending: "Usage: termada pending [--json]\n" +
    "The approval queue: commands the policy sent to an operator.\n",
  approve: "Usage: termada approve ID [--reason TEXT] [--ticket ID] [--json]\n" +
    "Approves a pending command (one vote where the policy needs a quorum). --ticket records\n" +
    'a change ticket with the reason in the audit log: "[ticket ID] reason".\n',
  deny: "Usage: termada deny ID [--reason TEXT] [--ticket ID] [--json]\n" +
    "Denies a pending command; the agent gets the reason.\n",
  stop: "Usage: termada stop [--barrier-ms MS] [--grace-ms MS] [--json]\n" +
    "Kill switch: stops every running job, cancels pending approvals and refuses new commands\n" +
    "until the barrier ends or termada resume.\n",
  resume: "Usage: termada resume\nAdmits new commands again after termada stop.\n",
  audit: "Usage: termada audit [-n N] [--json]\n" +
    "       termada audit verify [--anchors] [--json] | audit anchor | audit resume\n" +
    "The tamper-evident audit log: the last N records; verify checks the whole hash chain\n" +
    "(works offline); anchor signs the head now; resume reopens a log stopped by a fault.\n",
  dashboard: "Usage: termada dashboard [--open]\n" +
    "Prints (or opens) the tokenized URL of the running daemon's dashboard.\n",
  mission: "Usage: termada mission list [--status S] [--json] | show ID [--json]\n" +
    "       termada mission report ID [--json] [--out FILE] | cancel ID [--reason TEXT]\n" +
    "Missions of every agent: plan, runtime-verified steps, the evidence report.\n",
} as const;

async function usage(ctx: OperatorContext, command: keyof typeof USAGE): Promise<number> {
  await ctx.out(USAGE[command]);
  return 0;
}

export async function pendingCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("pending", args, COMMON, 0);
  if (values.help) return await usage(ctx, "pending");
  const r = await call(await paths(values.config), "GET", "/approvals");
  const list = r.approvals as {
    approval_id: string;
    owner: string;
    command: string[];
    requested_at: string;
  }[];
  if (values.json) await ctx.out(JSON.stringify(list, null, 2) + "\n");
  else if (list.length === 0) await ctx.out("No approvals pending.\n");
  else {
    for (const a of list) {
      await ctx.out(
        `${a.approval_id}  ${a.owner}  ${a.requested_at}  ${JSON.stringify(a.command)}\n`,
      );
    }
  }
  return 0;
}

function decideCommand(approve: boolean) {
  return async (args: string[], ctx: OperatorContext): Promise<number> => {
    const command = approve ? "approve" : "deny";
    const { values, positionals } = strictArgs(command, args, {
      ...COMMON,
      reason: { type: "string" },
      ticket: { type: "string" },
    }, 1);
    if (values.help) return await usage(ctx, command);
    const id = positionals[0];
    if (!id) {
      throw new TermadaError(
        "INVALID_ARGUMENT",
        `Which approval? termada ${command} <id> [--reason TEXT] [--ticket ID]`,
      );
    }
    // The ticket travels in the reason, so the audit record and the agent both carry it.
    const reason = values.ticket === undefined
      ? values.reason
      : `[ticket ${values.ticket}]${values.reason === undefined ? "" : ` ${values.reason}`}`;
    const r = await call(
      await paths(values.config),
      "POST",
      `/approvals/${encodeURIComponent(id)}/${approve ? "approve" : "deny"}`,
      {
        ...(reason === undefined ? {} : { reason }),
      },
    );
    if (values.json) await ctx.out(JSON.stringify(r, null, 2) + "\n");
    else if (r.status === "pending") {
      await ctx.out(`Vote recorded on ${id}: ${r.votes} of ${r.quorum} approvals\n`);
    } else await ctx.out(`${approve ? "Approved" : "Denied"} ${id}\n`);
    return 0;
  };
}

/**
 * `termada reconcile [--json]` lists actions whose outcome is unknown; `termada reconcile ID
 * --succeeded|--failed --note TEXT` settles one (docs/GOVERNANCE.md).
 */
export async function reconcileCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("reconcile", args, {
    ...COMMON,
    succeeded: { type: "boolean" },
    failed: { type: "boolean" },
    note: { type: "string" },
    help: { type: "boolean" },
  }, 1);
  if (values.help) {
    await ctx.out(
      "Usage: termada reconcile [--json]\n" +
        "       termada reconcile ACTION --succeeded|--failed --note TEXT\n" +
        "Actions whose outcome the daemon could not know (it restarted mid-action), and\n" +
        "settling one: its budgets count it as said; the audit log keeps who and why.\n",
    );
    return 0;
  }
  const p = await paths(values.config);
  const id = positionals[0];
  if (id === undefined) {
    const r = await call(p, "GET", "/actions?state=outcome_unknown");
    const list = r.actions as { id: string; kind: string; owner: string; summary: string[] }[];
    if (values.json) await ctx.out(JSON.stringify(list, null, 2) + "\n");
    else if (list.length === 0) await ctx.out("No action has an unknown outcome.\n");
    else {
      await ctx.out(
        table(
          ["ACTION", "KIND", "AGENT", "WHAT"],
          list.map((a) => [a.id, a.kind, a.owner, a.summary.join(" ").slice(0, 60)]),
        ) + "\n",
      );
    }
    return 0;
  }
  if (values.succeeded === values.failed) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      "Say what happened: --succeeded or --failed (termada reconcile --help)",
    );
  }
  if (!values.note) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      "Say how you know: --note TEXT (termada reconcile --help)",
    );
  }
  const r = await call(p, "POST", `/actions/${encodeURIComponent(id)}/reconcile`, {
    state: values.succeeded ? "succeeded" : "failed",
    note: values.note,
  });
  if (values.json) await ctx.out(JSON.stringify(r, null, 2) + "\n");
  else await ctx.out(`Reconciled ${id}: ${r.state}\n`);
  return 0;
}

/** `termada policy reload`: re-reads the config file's policies, agents and identity settings. */
export async function policyCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("policy", args, {
    ...COMMON,
    help: { type: "boolean" },
  }, 1);
  if (values.help || positionals[0] !== "reload") {
    await ctx.out(
      "Usage: termada policy reload [--json]\n" +
        "Re-reads the config file and applies its policies, agents, JWT trust and identity\n" +
        "mode without a restart (all or nothing); other sections need a restart.\n",
    );
    return values.help ? 0 : 2;
  }
  const r = await call(await paths(values.config), "POST", "/policy/reload", {});
  if (values.json) await ctx.out(JSON.stringify(r, null, 2) + "\n");
  else {
    const restart = r.restart_needed as string[];
    await ctx.out(
      `Reloaded ${r.path}: ${(r.policies as string[]).length} policies, ${
        (r.agents as string[]).length
      } agents` +
        (restart.length > 0 ? `; needs a restart to apply: ${restart.join(", ")}` : "") + "\n",
    );
  }
  return 0;
}

export const approveCommand = decideCommand(true);
export const denyCommand = decideCommand(false);

export async function stopCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("stop", args, {
    ...COMMON,
    "barrier-ms": { type: "string" },
    "grace-ms": { type: "string" },
  }, 0);
  if (values.help) return await usage(ctx, "stop");
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const r = await call(await paths(values.config), "POST", "/stop", {
    ...(values["barrier-ms"] === undefined ? {} : { barrier_ms: num(values["barrier-ms"]) }),
    ...(values["grace-ms"] === undefined ? {} : { grace_ms: num(values["grace-ms"]) }),
  });
  if (values.json) await ctx.out(JSON.stringify(r, null, 2) + "\n");
  else {
    await ctx.out(
      `Stopped ${(r.stopped_jobs as unknown[]).length} job(s), cancelled ${
        (r.cancelled_approvals as unknown[]).length
      } approval(s); new commands refused until ${r.barrier_until}.\n`,
    );
  }
  return 0;
}

export async function resumeCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("resume", args, COMMON, 0);
  if (values.help) return await usage(ctx, "resume");
  await call(await paths(values.config), "POST", "/resume", {});
  await ctx.out("Admissions resumed.\n");
  return 0;
}

/**
 * `termada audit [-n N] [--json]` (from the daemon) and `termada audit verify [--anchors]`
 * (offline; --anchors also checks the signed anchors against the log).
 */
export async function auditCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("audit", args, {
    ...COMMON,
    n: { type: "string", short: "n" },
    anchors: { type: "boolean" },
  }, 1);
  if (values.help) return await usage(ctx, "audit");
  const p = await paths(values.config);
  if (values.anchors && positionals[0] !== "verify") {
    throw new TermadaError("INVALID_ARGUMENT", 'Option "--anchors" belongs to audit verify', {
      hint: "termada audit verify --anchors",
    });
  }
  if (positionals[0] === "anchor") {
    // A signed anchor of the durable head, now (delivered to the receivers in the background).
    const a = await call(p, "POST", "/audit/anchor", {});
    if (values.json) await ctx.out(JSON.stringify(a, null, 2) + "\n");
    else await ctx.out(`Anchored seq ${a.seq} ${a.hash} (key ${a.key_id})\n`);
    return 0;
  }
  if (positionals[0] === "verify") {
    const auditDir = join(p.stateDir, "audit");
    const r = verifyAudit(auditDir);
    // Loaded only here: the other operator commands do not need the governance folder.
    const a = values.anchors
      ? await (await import("../governance/mod.ts")).verifyAnchors(p.stateDir, auditDir)
      : undefined;
    if (values.json) {
      await ctx.out(JSON.stringify(a === undefined ? r : { ...r, anchors: a }, null, 2) + "\n");
      return r.ok && (a?.ok ?? true) ? 0 : 1;
    }
    if (r.ok) {
      await ctx.out(
        `${r.records} records verified in ${r.segments} segment(s); head seq ${r.head.seq} ${r.head.hash}\n` +
          (r.tornTail
            ? `note: a torn last line (${r.tornTail.bytes} bytes) from a crash during an append\n`
            : ""),
      );
    } else {
      const b = r.firstBroken!;
      await ctx.out(
        `BROKEN at seq ${b.seq ?? "-"} (${b.segment} line ${b.line}): ${b.reason}\n` +
          `${r.records} records verified before it. Keep the directory as it is for inspection; ` +
          `move the damaged segment aside to let the daemon start a new chain.\n`,
      );
    }
    if (a !== undefined) await ctx.out(anchorReport(a));
    return r.ok && (a?.ok ?? true) ? 0 : 1;
  }
  if (positionals[0] === "resume") {
    const r = await call(p, "POST", "/audit/resume", {});
    if (values.json) await ctx.out(JSON.stringify(r, null, 2) + "\n");
    else if (r.resumed) {
      await ctx.out(
        `Audit log resumed after: ${r.failure}\n${r.verified_records} records verified first.\n`,
      );
    } else await ctx.out("The audit log is healthy: nothing to resume.\n");
    return 0;
  }
  if (positionals.length > 0) {
    throw new TermadaError("INVALID_ARGUMENT", `Unknown audit command "${positionals[0]}"`, {
      hint:
        "termada audit [-n N] [--json] | termada audit verify [--anchors] | termada audit anchor | termada audit resume",
    });
  }
  const r = await call(p, "GET", `/audit?n=${encodeURIComponent(values.n ?? "50")}`);
  const records = r.records as AuditRecord[];
  if (values.json) await ctx.out(JSON.stringify(records, null, 2) + "\n");
  else {
    for (const rec of records) {
      await ctx.out(
        `${rec.seq}\t${rec.time}\t${rec.actor.kind}:${rec.actor.id}\t${rec.event}\t${
          JSON.stringify(rec.data)
        }\n`,
      );
    }
  }
  return 0;
}

/** The text of `termada audit verify --anchors` after the chain's own line. */
function anchorReport(a: AnchorVerifyResult): string {
  const SHOWN = 20;
  let text = `anchors: ${a.anchors} (key ${a.key_id}): ${a.checked} match the log, ` +
    `${a.pruned} not checkable (pruned), ${a.failures.length} failed; ${a.receipts} receipt(s)\n`;
  if (a.last_anchor !== null) {
    const after = a.audit.head.seq - a.last_anchor.seq;
    text += `last anchor: seq ${a.last_anchor.seq} at ${a.last_anchor.time}` +
      (after > 0 ? `; the ${after} record(s) after it are not anchored yet` : "") + "\n";
  }
  for (const f of a.failures.slice(0, SHOWN)) {
    text += `ANCHOR FAILED at seq ${f.seq ?? "-"} (line ${f.line}): ${f.reason}\n`;
  }
  if (a.failures.length > SHOWN) text += `… and ${a.failures.length - SHOWN} more (--json)\n`;
  if (a.torn_tail !== undefined) {
    text +=
      `note: a torn last anchor line (${a.torn_tail.bytes} bytes) from a crash during a write\n`;
  }
  if (a.failures.length > 0) {
    text += "Keep the audit and anchors directories as they are; compare with the receivers' " +
      "copies of the anchors.\n";
  }
  return text;
}

/** `termada dashboard [--open]`: the tokenized local URL of the running daemon's dashboard. */
/** How long the one-time page that opens the dashboard stays on disk. */
const OPEN_PAGE_MS = 5000;

export async function dashboardCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("dashboard", args, { ...COMMON, open: { type: "boolean" } }, 0);
  if (values.help) return await usage(ctx, "dashboard");
  const p = await paths(values.config);
  const status = await call(p, "GET", "/status");
  const port = status.port as number | undefined;
  if (!port) throw new TermadaError("INTERNAL", "The daemon did not say which port it serves");
  // The dashboard's own token: an operator JWT never goes into a URL.
  const url = `http://127.0.0.1:${port}/?token=${token(p, { jwt: false })}`;
  await ctx.out(url + "\n");
  if (values.open) {
    // Never the URL itself on a command line: argv is readable by every process (`ps`),
    // sessions included, and the opener or a fresh browser keeps it there. The browser gets a
    // private file (0600, in the state dir sessions cannot reach) that goes on to the URL; it is
    // removed once the browser had time to read it.
    const page = join(p.runtimeDir, `open-dashboard-${crypto.randomUUID()}.html`);
    await Deno.writeTextFile(
      page,
      `<!doctype html><meta charset="utf-8"><title>Termada</title>` +
        `<script>location.replace(${JSON.stringify(url)})</script>`,
      { mode: 0o600, createNew: true },
    );
    try {
      for (const opener of ["xdg-open", "open"]) {
        try {
          const child = new Deno.Command(opener, {
            args: [`file://${page}`],
            stdout: "null",
            stderr: "null",
          }).spawn();
          await child.status;
          await new Promise((r) => setTimeout(r, OPEN_PAGE_MS));
          return 0;
        } catch {
          // not installed here: try the next one
        }
      }
    } finally {
      await Deno.remove(page).catch(() => {});
    }
    await Deno.stderr.write(
      new TextEncoder().encode("termada: no browser opener found; open the URL above\n"),
    );
  }
  return 0;
}

interface MissionLine {
  mission_id: string;
  title: string;
  status: string;
  owner: string;
  pending_approvals: number;
  progress: { passed: number; total: number };
  updated_at: string;
}

/**
 * `termada mission list [--status S] | show ID | report ID [--json] [--out FILE] | cancel ID
 * [--reason TEXT]`: every agent's missions, for the operator.
 */
export async function missionCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("mission", args, {
    ...COMMON,
    status: { type: "string" },
    out: { type: "string", short: "o" },
    reason: { type: "string" },
  }, 2);
  if (values.help) return await usage(ctx, "mission");
  const p = await paths(values.config);
  const [sub = "list", id] = positionals;
  const need = (): string => {
    if (!id) {
      throw new TermadaError("INVALID_ARGUMENT", `Which mission? termada mission ${sub} <id>`);
    }
    return encodeURIComponent(id);
  };
  switch (sub) {
    case "list": {
      const q = values.status ? `?status=${encodeURIComponent(values.status)}` : "";
      const r = await call(p, "GET", `/missions${q}`);
      const list = r.missions as MissionLine[];
      if (values.json) await ctx.out(JSON.stringify(list, null, 2) + "\n");
      else if (list.length === 0) await ctx.out("No missions.\n");
      else {
        for (const m of list) {
          await ctx.out(
            `${m.mission_id}  ${
              m.status.padEnd(15)
            }  ${m.progress.passed}/${m.progress.total}  ${m.owner}  ${
              m.pending_approvals > 0 ? `(${m.pending_approvals} approval waiting)  ` : ""
            }${m.title}\n`,
          );
        }
      }
      return 0;
    }
    case "show": {
      const m = await call(p, "GET", `/missions/${need()}`);
      if (values.json) {
        await ctx.out(JSON.stringify(m, null, 2) + "\n");
        return 0;
      }
      const steps = m.steps as {
        step_id: string;
        text: string;
        status: string;
        verified: boolean;
        job_id?: string;
      }[];
      await ctx.out(
        `${m.mission_id}  ${m.status}  ${m.owner}  session ${m.session_id ?? "none"}\n${m.title}\n`,
      );
      for (const s of steps) {
        await ctx.out(
          `  ${s.step_id} ${s.status.padEnd(8)} ${
            s.verified ? `verified by runtime (${s.job_id})` : s.job_id ?? ""
          }  ${s.text}\n`,
        );
      }
      for (const a of m.pending_approvals as { approval_id: string; command: string[] }[]) {
        await ctx.out(
          `  waiting: ${a.approval_id} ${
            JSON.stringify(a.command)
          } (termada approve ${a.approval_id})\n`,
        );
      }
      return 0;
    }
    case "report": {
      const path = `/missions/${need()}/report${values.json ? "?format=json" : ""}`;
      const { text, sha256 } = await request(p, "GET", path, undefined, async (r) => ({
        text: values.json ? JSON.stringify(await r.json(), null, 2) + "\n" : await r.text(),
        sha256: r.headers.get("x-termada-report-sha256"),
      }));
      if (values.out) {
        Deno.writeTextFileSync(values.out, text, { mode: 0o600 });
        await ctx.out(
          `Wrote ${values.out}${sha256 ? ` (sha256 ${sha256}, recorded in the audit log)` : ""}\n`,
        );
      } else await ctx.out(text);
      return 0;
    }
    case "cancel": {
      const m = await call(p, "POST", `/missions/${need()}/cancel`, {
        ...(values.reason === undefined ? {} : { reason: values.reason }),
      });
      await ctx.out(`Cancelled ${m.mission_id}\n`);
      return 0;
    }
    default:
      throw new TermadaError("INVALID_ARGUMENT", `Unknown mission command "${sub}"`, {
        hint: "termada mission list | show ID | report ID [--json] [--out FILE] | cancel ID",
      });
  }
}
