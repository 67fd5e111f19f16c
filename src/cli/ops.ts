/**
 * Day-to-day operator commands over the daemon's control plane: `termada status | jobs |
 * sessions | logs | kill | daemon stop`. Like the other operator commands they go through the
 * Unix socket with the operator token (src/cli/operator.ts owns that request path, and with it
 * the "No Termada daemon is running" error); this file only shapes arguments and output.
 */
import type {
  DaemonStatus,
  JobOutputPage,
  OperatorJob,
  OperatorKillResult,
  OperatorSession,
} from "../wire/mod.ts";
import { ACTIVE_JOB_STATUSES } from "../wire/mod.ts";
import { daemonAlive } from "../client/mod.ts";
import { TermadaError } from "../shared/mod.ts";
import { strictArgs, table } from "./_args.ts";
import { call, type OperatorContext, paths, request } from "./operator.ts";

const COMMON = { config: { type: "string" as const }, help: { type: "boolean" as const } };
const JSON_FLAG = { json: { type: "boolean" as const } };

/** How many jobs `termada jobs --all` asks for (and `status` counts over). */
const JOBS_LIMIT = 200;
/** `logs -f` polls the job's cursor with this backoff while nothing new arrives. */
const POLL_MIN_MS = 50;
const POLL_MAX_MS = 1000;
/** How long `daemon stop` waits for the socket to stop answering. */
const STOP_WAIT_MS = 15_000;

const USAGE = {
  status: "Usage: termada status [--json]\n" +
    "The running daemon: version, pid, port, uptime, sessions, active jobs, pending\n" +
    "approvals, the kill switch, the audit log's health and the session boundary.\n",
  jobs: "Usage: termada jobs [--all] [-f] [--json]\n" +
    "Every agent's jobs: the active ones, or with --all the last 200 including finished ones.\n" +
    "-f re-lists whenever a job starts or changes, until Ctrl-C or stdin closes.\n",
  sessions: "Usage: termada sessions [--json]\nEvery agent's terminal sessions.\n",
  logs: "Usage: termada logs JOB [-f]\n" +
    "Prints a job's output (any agent's). -f follows it until the job ends, then exits 0\n" +
    "whatever the job's outcome (termada jobs --all shows it).\n",
  kill: "Usage: termada kill JOB [--grace-ms MS] [--json]\n" +
    "Stops one job of any agent (SIGTERM, then SIGKILL after the grace) and prints its status.\n",
  daemon: "Usage: termada daemon stop\n" +
    "Stops the running daemon gracefully (every job ends, the stop is audited) and waits\n" +
    "until it is gone.\n",
} as const;

const json = (v: unknown) => JSON.stringify(v, null, 2) + "\n";

/** "3d4h", "2h5m", "4m12s", "9s". */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const [d, h, m] = [Math.floor(s / 86400), Math.floor(s / 3600) % 24, Math.floor(s / 60) % 60];
  if (d > 0) return `${d}d${h}h`;
  if (h > 0) return `${h}h${m}m`;
  if (m > 0) return `${m}m${s % 60}s`;
  return `${s}s`;
}

function isActive(j: { status: string }): boolean {
  return (ACTIVE_JOB_STATUSES as readonly string[]).includes(j.status);
}

/** When the daemon started, from its info file (absent for another daemon's pid). */
function startedAt(infoFile: string, pid: number): number | undefined {
  try {
    const info = JSON.parse(Deno.readTextFileSync(infoFile)) as {
      pid?: number;
      started_at?: string;
    };
    const t = info.pid === pid && info.started_at ? Date.parse(info.started_at) : NaN;
    return Number.isFinite(t) ? t : undefined;
  } catch {
    return undefined; // no info file: the uptime is left out
  }
}

export async function statusCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("status", args, { ...COMMON, ...JSON_FLAG }, 0);
  if (values.help) return await usage(ctx, "status");
  const p = await paths(values.config);
  const s = await call(p, "GET", "/status") as unknown as DaemonStatus;
  const jobs = (await call(p, "GET", `/jobs?limit=${JOBS_LIMIT}`)).jobs as OperatorJob[];
  const active = jobs.filter(isActive).length;
  const since = startedAt(p.infoFile, s.pid);
  const uptime = since === undefined ? undefined : Date.now() - since;
  if (values.json) {
    await ctx.out(json({
      ...s,
      active_jobs: active,
      ...(uptime === undefined ? {} : { uptime_ms: uptime }),
    }));
    return 0;
  }
  const gate = s.boundary.exec_gate;
  const rows: [string, string][] = [
    ["Sessions", String(s.sessions)],
    ["Active jobs", String(active)],
    ["Pending approvals", String(s.pending_approvals)],
    [
      "Admissions",
      s.stopped ? `stopped until ${s.barrier_until ?? "resumed"} (termada resume)` : "open",
    ],
    [
      "Audit log",
      s.audit_healthy ? "healthy" : "STOPPED after a write fault (termada audit resume)",
    ],
    ["Exec gate", gate.active ? "on" : `off${gate.reason ? ` (${gate.reason})` : ""}`],
  ];
  await ctx.out(
    `termada ${s.version}  pid ${s.pid}` + (s.port === undefined ? "" : `  port ${s.port}`) +
      (uptime === undefined ? "" : `  up ${formatDuration(uptime)}`) + "\n" +
      rows.map(([k, v]) => `${(k + ":").padEnd(19)}${v}\n`).join(""),
  );
  return 0;
}

function jobsTable(jobs: OperatorJob[]): string {
  if (jobs.length === 0) return "No jobs.\n";
  return table(
    ["ID", "AGENT", "STATUS", "SESSION", "STARTED", "COMMAND"],
    jobs.map((j) => [
      j.job_id,
      j.owner,
      j.exit_code === undefined ? j.status : `${j.status} (${j.exit_code})`,
      j.session_id,
      j.started_at,
      j.command.join(" ").slice(0, 80),
    ]),
  );
}

export async function jobsCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("jobs", args, {
    ...COMMON,
    ...JSON_FLAG,
    all: { type: "boolean" },
    follow: { type: "boolean", short: "f" },
  }, 0);
  if (values.help) return await usage(ctx, "jobs");
  const p = await paths(values.config);
  const list = async () => {
    const jobs = (await call(p, "GET", `/jobs?limit=${JOBS_LIMIT}`)).jobs as OperatorJob[];
    const shown = values.all ? jobs : jobs.filter(isActive);
    await ctx.out(values.json ? JSON.stringify(shown) + "\n" : jobsTable(shown));
  };
  await list();
  if (!values.follow) return 0;
  return await followJobs(p, ctx, list, values.json === true);
}

/**
 * Re-lists on every `job.*` event of the daemon's event stream (debounced: the stream's replay
 * and a burst of events make one listing) until stdin closes or the stream ends.
 */
async function followJobs(
  p: Awaited<ReturnType<typeof paths>>,
  ctx: OperatorContext,
  list: () => Promise<void>,
  asJson: boolean,
): Promise<number> {
  const abort = new AbortController();
  const stdin = Deno.stdin.readable.getReader();
  const stdinDone = (async () => {
    try {
      while (!(await stdin.read()).done) {
        // input is ignored: only its end matters
      }
    } catch {
      // stdin unreadable: follow until Ctrl-C or the daemon stops
      return;
    }
    abort.abort();
  })();
  const tty = Deno.stdout.isTerminal();
  let pending: Promise<void> | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const relist = () => {
    if (timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      pending = (pending ?? Promise.resolve()).then(async () => {
        if (abort.signal.aborted) return;
        if (!asJson) await ctx.out(tty ? "\x1b[H\x1b[2J" : `\n-- ${new Date().toISOString()}\n`);
        await list();
      });
    }, 100);
  };
  let ended = "";
  try {
    await request(p, "GET", "/events", undefined, async (r) => {
      const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
      abort.signal.addEventListener("abort", () => void reader.cancel().catch(() => {}));
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let end: number;
        while ((end = buf.indexOf("\n\n")) >= 0) {
          const event = /^event: (.*)$/m.exec(buf.slice(0, end))?.[1];
          buf = buf.slice(end + 2);
          if (event?.startsWith("job.")) relist();
        }
      }
    });
    if (!abort.signal.aborted) ended = "The daemon closed the event stream";
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    await stdin.cancel().catch(() => {});
    await stdinDone;
    await pending?.catch(() => {});
  }
  if (ended) throw new TermadaError("SERVER_UNREACHABLE", ended);
  return 0;
}

export async function sessionsCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values } = strictArgs("sessions", args, { ...COMMON, ...JSON_FLAG }, 0);
  if (values.help) return await usage(ctx, "sessions");
  const r = await call(await paths(values.config), "GET", "/sessions");
  const list = r.sessions as OperatorSession[];
  if (values.json) await ctx.out(json(list));
  else if (list.length === 0) await ctx.out("No sessions.\n");
  else {
    await ctx.out(table(
      ["ID", "AGENT", "STATE", "TARGET", "SHELL", "JOB", "CREATED", "CWD"],
      list.map((s) => [
        s.session_id,
        s.owner,
        s.link?.state === "reconnecting" ? `${s.state} (reconnecting)` : s.state,
        s.target,
        s.shell,
        s.current_job_id ?? "-",
        s.created_at,
        s.cwd,
      ]),
    ));
  }
  return 0;
}

function need(command: string, what: string, v: string | undefined): string {
  if (!v) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Which ${what}? termada ${command} <${what}> (termada ${command} --help)`,
    );
  }
  return v;
}

export async function logsCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("logs", args, {
    ...COMMON,
    follow: { type: "boolean", short: "f" },
  }, 1);
  if (values.help) return await usage(ctx, "logs");
  const id = encodeURIComponent(need("logs", "job", positionals[0]));
  const p = await paths(values.config);
  let cursor: string | undefined;
  let delay = POLL_MIN_MS;
  for (;;) {
    const q = cursor === undefined ? "" : `?cursor=${encodeURIComponent(cursor)}`;
    const page = await call(p, "GET", `/jobs/${id}/output${q}`) as unknown as JobOutputPage;
    if (page.gap) {
      await ctx.out(
        `[… ${page.gap.dropped_bytes} bytes no longer retained …]\n`,
      );
    }
    if (page.output) await ctx.out(page.output);
    cursor = page.next_cursor;
    if (page.has_more) {
      delay = POLL_MIN_MS;
      continue;
    }
    if (!values.follow || !isActive(page)) return 0;
    delay = page.output ? POLL_MIN_MS : Math.min(delay * 2, POLL_MAX_MS);
    await new Promise((r) => setTimeout(r, delay));
  }
}

export async function killCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("kill", args, {
    ...COMMON,
    ...JSON_FLAG,
    "grace-ms": { type: "string" },
  }, 1);
  if (values.help) return await usage(ctx, "kill");
  const id = need("kill", "job", positionals[0]);
  const grace = values["grace-ms"];
  if (grace !== undefined && !/^\d+$/.test(grace)) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Option "--grace-ms" needs milliseconds, not "${grace}"`,
    );
  }
  const r = await call(
    await paths(values.config),
    "POST",
    `/jobs/${encodeURIComponent(id)}/kill`,
    grace === undefined ? {} : { grace_ms: Number(grace) },
  ) as unknown as OperatorKillResult;
  if (values.json) await ctx.out(json(r));
  else {
    const j = r.job;
    await ctx.out(
      `${j.job_id}: ${j.status}${j.signal ? ` (${j.signal})` : ""}` +
        (j.exit_code === undefined ? "" : ` exit ${j.exit_code}`) + "\n",
    );
  }
  return 0;
}

export async function daemonCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const { values, positionals } = strictArgs("daemon", args, COMMON, 1);
  if (values.help || positionals[0] === "help") return await usage(ctx, "daemon");
  if (positionals[0] !== "stop") {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      positionals[0] === undefined
        ? "Which daemon command? termada daemon stop"
        : `Unknown daemon command "${positionals[0]}"`,
      { hint: "termada daemon stop" },
    );
  }
  const p = await paths(values.config);
  await call(p, "POST", "/daemon/stop", {});
  const deadline = Date.now() + STOP_WAIT_MS;
  while (await daemonAlive(p.socketPath)) {
    if (Date.now() > deadline) {
      throw new TermadaError(
        "INTERNAL",
        `The daemon is still answering ${STOP_WAIT_MS / 1000} s after it was asked to stop`,
        { hint: "termada status; its log says what it is waiting for" },
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await ctx.out("Stopped\n");
  return 0;
}

async function usage(ctx: OperatorContext, command: keyof typeof USAGE): Promise<number> {
  await ctx.out(USAGE[command]);
  return 0;
}
