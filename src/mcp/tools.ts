/**
 * The MCP tool table: each tool is a thin adapter — the engine's input schema in, one engine
 * call, a structured result out plus a one-line-header text rendering a model reads well. The
 * names and fields are the public contract of TOOLS.md.
 */
import { z } from "zod";
import type { CallOptions, Engine, JobView } from "../engine/mod.ts";
import { schema } from "../engine/mod.ts";
import { MISSION_LIMITS, type MissionService } from "../mission/mod.ts";
import { MISSION_TOOLS } from "./mission_tools.ts";

export interface ToolContext {
  engine: Engine;
  /** Mission Control; absent in an engine-only server (the mission tools say NOT_SUPPORTED). */
  missions?: MissionService;
  /** The calling agent: owner of every session and job it touches. */
  agent: string;
  call: CallOptions;
  version: string;
}

export interface ToolDef {
  name: string;
  title: string;
  description: string;
  input: z.ZodType;
  output: z.ZodType;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean };
  run(ctx: ToolContext, args: unknown): Promise<Record<string, unknown>>;
  render(result: Record<string, unknown>): string;
}

const Gap = z.object({ from_offset: z.number(), to_offset: z.number(), dropped_bytes: z.number() });

const JobOut = z.object({
  job_id: z.string(),
  session_id: z.string(),
  command: z.array(z.string()),
  status: z.string(),
  exit_code: z.number().optional(),
  signal: z.string().optional(),
  reason: z.string().optional(),
  output: z.string(),
  tail: z.string().optional(),
  omitted_bytes: z.number().optional(),
  next_cursor: z.string(),
  has_more: z.boolean(),
  gap: Gap.optional(),
  awaiting_input: z.boolean().optional(),
  prompt: z.string().optional(),
  input_detection: z.enum(["kernel", "heuristic"]).optional(),
  approval_id: z.string().optional(),
  cwd: z.string().optional(),
  duration_ms: z.number(),
  waited_ms: z.number().optional(),
  matched: z.enum(["exit", "pattern", "prompt", "idle", "timeout"]).optional(),
  match: z.string().optional(),
});

const SessionOut = z.object({
  session_id: z.string(),
  target: z.string(),
  shell: z.string(),
  cwd: z.string(),
  workspace: z.string().optional(),
  state: z.enum(["ready", "busy", "operator"]),
  current_job_id: z.string().optional(),
  cols: z.number(),
  rows: z.number(),
  created_at: z.string(),
  output_paused: z.boolean().optional(),
});

/** The one-line header of a job result: status, exit code, job, session, duration. */
export function jobHeader(v: JobView): string {
  const parts: string[] = [v.status];
  if (v.exit_code !== undefined) parts[0] += ` ${v.exit_code}`;
  if (v.signal) parts.push(`signal ${v.signal}`);
  parts.push(v.job_id, v.session_id, `${v.duration_ms} ms`);
  if (v.cwd) parts.push(`cwd ${v.cwd}`);
  if (v.matched) parts.push(`matched ${v.matched}${v.match ? ` ${JSON.stringify(v.match)}` : ""}`);
  return parts.join(" · ");
}

export function renderJob(r: Record<string, unknown>): string {
  const v = r as unknown as JobView;
  const lines = [jobHeader(v)];
  if (v.reason) lines.push(`reason: ${v.reason}`);
  if (v.gap) lines.push(`[gap: ${v.gap.dropped_bytes} bytes no longer retained]`);
  if (v.output) lines.push(v.output.replace(/\n$/, ""));
  if (v.tail !== undefined) {
    lines.push(`[… ${v.omitted_bytes} bytes omitted; page them with exec_poll from next_cursor …]`);
    lines.push(v.tail.replace(/\n$/, ""));
  }
  if (v.status === "pending_approval") {
    lines.push(
      `[waiting for an operator to approve ${
        v.approval_id ?? ""
      }: check later with exec_poll/exec_wait ${v.job_id}]`,
    );
  } else if (v.awaiting_input) {
    lines.push(
      `[waiting for input at prompt ${JSON.stringify(v.prompt ?? "")}: answer with exec_write]`,
    );
  } else if (v.status === "running") {
    lines.push(`[still running: exec_poll/exec_wait ${v.job_id} from cursor ${v.next_cursor}]`);
  } else if (v.has_more) {
    lines.push(`[more output: exec_poll ${v.job_id} from cursor ${v.next_cursor}]`);
  }
  return lines.join("\n");
}

const jobTool = (
  name: string,
  title: string,
  description: string,
  input: z.ZodType,
  run: (ctx: ToolContext, args: unknown) => Promise<JobView>,
  annotations?: ToolDef["annotations"],
): ToolDef => ({
  name,
  title,
  description,
  input,
  output: JobOut,
  annotations,
  run: async (ctx, args) => ({ ...(await run(ctx, args)) }),
  render: renderJob,
});

export const TOOLS: readonly ToolDef[] = [
  jobTool(
    "exec_run",
    "Run a command",
    "Run a command in a persistent terminal session and wait (bounded) for it. `command` is an argv array: several words are passed exactly; ONE word is a shell command line (pipes, &&, cd, export persist). Returns when the command ends, waits for input, or `timeout_ms` (default 30000) passes — then status is `running` and the job keeps going: continue with exec_poll/exec_wait using `next_cursor`. Long output comes as head + tail with `omitted_bytes`.",
    schema.ExecRunInput,
    (c, a) => c.engine.run(c.agent, a, c.call),
  ),
  {
    name: "exec_start",
    title: "Start a command",
    description:
      "Start a command without waiting (same input as exec_run). Use for servers, long builds and watchers; follow with exec_poll / exec_wait. `mode: background` runs it argv-exact on its own terminal beside the session.",
    input: schema.ExecStartInput,
    output: z.object({
      job_id: z.string(),
      session_id: z.string(),
      status: z.string(),
      mode: z.string(),
      approval_id: z.string().optional(),
    }),
    run: async (c, a) => ({ ...(await c.engine.start(c.agent, a)) }),
    render: (r) =>
      r.status === "pending_approval"
        ? `pending_approval · ${r.job_id} · ${r.session_id} · waiting for an operator (${r.approval_id})`
        : `${r.status} · ${r.job_id} · ${r.session_id} · started (${r.mode})`,
  },
  jobTool(
    "exec_poll",
    "Read job output",
    "Read a job's output from a cursor (omit it to start at the beginning). `wait_ms` (≤ 30000) long-polls for new output. Keep passing `next_cursor`; `has_more` is false once everything was read and the job ended. `gap` says bytes were dropped by retention.",
    schema.ExecPollInput,
    (c, a) => c.engine.poll(c.agent, a, c.call),
    { readOnlyHint: true },
  ),
  jobTool(
    "exec_wait",
    "Wait for a job",
    "Wait until a job exits, prints a regex `pattern`, waits at a `prompt` for input, or goes `idle_ms` without output — whichever comes first — or `timeout_ms` passes (never kills). `matched` says which. Output is returned from `cursor` (default: start).",
    schema.ExecWaitInput,
    (c, a) => c.engine.wait(c.agent, a, c.call),
    { readOnlyHint: true },
  ),
  {
    name: "exec_write",
    title: "Answer a prompt",
    description:
      "Type input into a job that is waiting for it (status awaiting_input). A newline (Enter) is appended unless `append_newline` is false. Set `secret: true` for passwords: the value is redacted from all output and never logged.",
    input: schema.ExecWriteInput,
    output: z.object({ ok: z.boolean(), job_id: z.string(), status: z.string() }),
    run: async (c, a) => ({ ...(await c.engine.write(c.agent, a)) }),
    render: (r) => `input written · ${r.job_id} · now ${r.status}`,
  },
  {
    name: "exec_signal",
    title: "Signal a job",
    description:
      "Send a signal to what a job runs in the foreground: INT (Ctrl-C), TERM, KILL, HUP, QUIT, TSTP, CONT.",
    input: schema.ExecSignalInput,
    output: z.object({ ok: z.boolean(), job_id: z.string(), status: z.string() }),
    run: (c, a) => Promise.resolve({ ...c.engine.signal(c.agent, a) }),
    render: (r) => `${r.ok ? "signal sent" : "nobody to signal"} · ${r.job_id} · ${r.status}`,
    annotations: { destructiveHint: true },
  },
  jobTool(
    "exec_kill",
    "Kill a job",
    "Stop a job for good: INT, then TERM, then KILL (`grace_ms` apart, default 2000) to its process group and every process it started. Returns the final status.",
    schema.ExecKillInput,
    (c, a) => c.engine.kill(c.agent, a),
    { destructiveHint: true },
  ),
  {
    name: "exec_list",
    title: "List jobs",
    description: "Your jobs, newest first. `filter`: active, recent (default), all.",
    input: schema.ExecListInput,
    output: z.object({
      jobs: z.array(z.object({
        job_id: z.string(),
        session_id: z.string(),
        command: z.array(z.string()),
        mode: z.string(),
        status: z.string(),
        exit_code: z.number().optional(),
        signal: z.string().optional(),
        started_at: z.string(),
        duration_ms: z.number(),
        cwd: z.string().optional(),
      })),
    }),
    run: (c, a) => Promise.resolve({ ...c.engine.listJobs(c.agent, a) }),
    render: (r) => {
      const jobs = r.jobs as {
        job_id: string;
        status: string;
        exit_code?: number;
        command: string[];
      }[];
      if (jobs.length === 0) return "no jobs";
      return jobs.map((j) =>
        `${j.job_id} · ${j.status}${j.exit_code === undefined ? "" : ` ${j.exit_code}`} · ${
          j.command.join(" ").slice(0, 120)
        }`
      ).join("\n");
    },
    annotations: { readOnlyHint: true },
  },
  {
    name: "session_create",
    title: "Create a session",
    description:
      "Open a new persistent terminal session (bash by default; zsh, sh). Pass its `session_id` to exec_run to run commands there; without one, your default session is used.",
    input: schema.SessionCreateInput,
    output: SessionOut,
    run: async (c, a) => ({ ...(await c.engine.createSession(c.agent, a)) }),
    render: (r) => `session ${r.session_id} · ${r.shell} · cwd ${r.cwd}`,
  },
  {
    name: "session_list",
    title: "List sessions",
    description: "Your open sessions with their cwd, state and current job.",
    input: z.object({}),
    output: z.object({ sessions: z.array(SessionOut) }),
    run: (c) => Promise.resolve({ sessions: c.engine.listSessions(c.agent) }),
    render: (r) => {
      const list = r.sessions as {
        session_id: string;
        shell: string;
        state: string;
        cwd: string;
        current_job_id?: string;
      }[];
      if (list.length === 0) return "no sessions (exec_run creates your default session)";
      return list.map((s) =>
        `${s.session_id} · ${s.shell} · ${s.state}${
          s.current_job_id ? ` (${s.current_job_id})` : ""
        } · ${s.cwd}`
      ).join("\n");
    },
    annotations: { readOnlyHint: true },
  },
  {
    name: "session_close",
    title: "Close a session",
    description: "Close a session; a job still running in it ends as killed.",
    input: schema.SessionIdInput,
    output: z.object({ ok: z.boolean(), session_id: z.string() }),
    run: async (c, a) => ({ ...(await c.engine.closeSession(c.agent, a)) }),
    render: (r) => `closed ${r.session_id}`,
    annotations: { destructiveHint: true },
  },
  {
    name: "session_screen",
    title: "Read the screen",
    description:
      "The rendered terminal screen of a session (lines, cursor, title) — for full-screen programs like top, vim or less.",
    input: schema.SessionIdInput,
    output: z.object({
      session_id: z.string(),
      lines: z.array(z.string()),
      cursor: z.object({ x: z.number(), y: z.number() }),
      cols: z.number(),
      rows: z.number(),
      title: z.string(),
      alternate: z.boolean(),
    }),
    run: async (c, a) => ({ ...(await c.engine.screen(c.agent, a)) }),
    render: (r) => {
      const lines = (r.lines as string[]).map((l) => l.replace(/\s+$/, ""));
      while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
      const cur = r.cursor as { x: number; y: number };
      return [
        `screen ${r.session_id} · ${r.cols}x${r.rows} · cursor ${cur.x},${cur.y}${
          r.title ? ` · ${r.title}` : ""
        }`,
        ...lines,
      ].join("\n");
    },
    annotations: { readOnlyHint: true },
  },
  {
    name: "capabilities",
    title: "What this Termada can do",
    description: "Version, platform, shells, limits and features of this Termada daemon.",
    input: z.object({}),
    output: z.object({
      version: z.string(),
      platform: z.string(),
      shells: z.array(z.string()),
      tools: z.array(z.string()),
      limits: z.record(z.string(), z.number()),
      features: z.record(z.string(), z.boolean()),
      agent: z.string(),
    }),
    run: (c) => Promise.resolve(capabilities(c)),
    render: (r) => JSON.stringify(r, null, 2),
    annotations: { readOnlyHint: true },
  },
  ...MISSION_TOOLS,
];

function capabilities(c: ToolContext): Record<string, unknown> {
  const shells = ["bash", "zsh", "sh"].filter((s) => onPath(s));
  return {
    version: c.version,
    platform: `${Deno.build.os}-${Deno.build.arch}`,
    shells,
    tools: TOOLS.map((t) => t.name),
    limits: {
      sessions_per_agent: c.engine.limits.sessionsPerOwner,
      sessions_total: c.engine.limits.sessionsTotal,
      background_jobs_per_agent: c.engine.limits.backgroundPerOwner,
      output_retention_bytes: c.engine.output.retentionBytes,
      page_bytes: schema.LIMITS.pageBytes,
      run_wait_ms: schema.LIMITS.runWaitMs,
      poll_wait_ms: schema.LIMITS.pollWaitMs,
      input_bytes: schema.LIMITS.inputBytes,
      ...(c.missions
        ? {
          missions_open_per_agent: MISSION_LIMITS.activePerAgent,
          mission_steps: MISSION_LIMITS.steps,
          mission_timeline_entries: MISSION_LIMITS.timeline,
        }
        : {}),
    },
    features: {
      persistent_sessions: true,
      kernel_input_detection: Deno.build.os === "linux",
      background_jobs: true,
      screen: true,
      progress_notifications: true,
      remote_sessions: false,
      policy: true,
      missions: c.missions !== undefined,
    },
    agent: c.agent,
  };
}

const pathCache = new Map<string, boolean>();
function onPath(program: string): boolean {
  const hit = pathCache.get(program);
  if (hit !== undefined) return hit;
  const dirs = (Deno.env.get("PATH") ?? "/usr/bin:/bin").split(":");
  const found = dirs.some((d) => {
    try {
      return Deno.statSync(`${d}/${program}`).isFile;
    } catch {
      return false;
    }
  });
  pathCache.set(program, found);
  return found;
}
