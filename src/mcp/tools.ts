/**
 * The MCP tool table: each tool is a thin adapter — its wire input schema (src/wire), one call
 * into the control layer for the calling agent, its wire result, and a one-line-header text
 * rendering a model reads well. The names and fields are the public contract of TOOLS.md.
 */
import type { z } from "zod";
import type { AgentOps, CallOptions } from "../control/mod.ts";
import type { MissionService } from "../mission/mod.ts";
import { PARSERS } from "../parse/mod.ts";
import {
  Capabilities,
  CapabilitiesInput,
  Empty,
  ExecKillInput,
  ExecListInput,
  ExecPollInput,
  ExecRunInput,
  ExecSignalInput,
  ExecStartInput,
  ExecWaitInput,
  ExecWriteInput,
  JobAck,
  JobList,
  type JobResult,
  JobResult as JobResultSchema,
  JobStarted,
  LIMITS,
  MISSION_LIMITS,
  type ParsedJobResult,
  ParsedJobResult as ParsedJobResultSchema,
  Screen,
  SessionClosed,
  SessionCreateInput,
  SessionIdInput,
  SessionInfo,
  SessionList,
  SessionScreenInput,
} from "../wire/mod.ts";
import { MISSION_TOOLS } from "./mission_tools.ts";
import { REMOTE_TOOLS } from "./remote_tools.ts";
import { SNAPSHOT_TOOLS } from "./snapshot_tools.ts";
import { ADAPTER_TOOLS } from "./adapter_tools.ts";
import { TOOL_EXAMPLES } from "./examples.ts";

export interface ToolContext {
  agents: AgentOps;
  /** Mission Control; absent in a server without it (the mission tools say NOT_SUPPORTED). */
  missions?: MissionService;
  /** The calling agent: owner of every session and job it touches. */
  agent: string;
  call: CallOptions;
  version: string;
  /** Bounds reported by `capabilities`. */
  limits: Record<string, number>;
}

export interface ToolDef<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean };
  run(ctx: ToolContext, args: z.output<I>): Promise<z.output<O>> | z.output<O>;
  render(result: z.output<O>): string;
}

/** A tool with its types checked against its schemas, stored untyped in the table. */
export function tool<I extends z.ZodType, O extends z.ZodType>(def: ToolDef<I, O>): ToolDef {
  return def as unknown as ToolDef;
}

/** The one-line header of a job result: status, exit code, job, session, duration. */
export function jobHeader(v: JobResult): string {
  const parts: string[] = [v.status];
  if (v.exit_code !== undefined) parts[0] += ` ${v.exit_code}`;
  if (v.signal) parts.push(`signal ${v.signal}`);
  parts.push(v.job_id, v.session_id, `${v.duration_ms} ms`);
  if (v.cwd) parts.push(`cwd ${v.cwd}`);
  if (v.matched) parts.push(`matched ${v.matched}${v.match ? ` ${JSON.stringify(v.match)}` : ""}`);
  return parts.join(" · ");
}

/** Parsed output in the text a model reads too (many clients show it only that), bounded. */
const PARSED_TEXT_CHARS = 16_384;

export function renderJob(v: JobResult & Partial<ParsedJobResult>): string {
  const base = renderPlainJob(v);
  if (v.parse_error) return `${base}\n[parse: ${v.parse_error.message}]`;
  if (v.parsed === undefined) return base;
  const json = JSON.stringify(v.parsed);
  const shown = json.length > PARSED_TEXT_CHARS
    ? `${json.slice(0, PARSED_TEXT_CHARS)}… (structuredContent.parsed has all of it)`
    : json;
  const env = v.parse_env ? ` with LC_ALL=${v.parse_env.LC_ALL}` : "";
  const warned = v.warnings?.length ? ` · ${v.warnings.length} warning(s)` : "";
  return `${base}\n[parsed by ${v.parser}${env}${warned}]\n${shown}`;
}

function renderPlainJob(v: JobResult): string {
  const lines = [jobHeader(v)];
  if (v.notice) lines.push(`notice: ${v.notice}`);
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

const jobTool = <I extends z.ZodType>(
  name: string,
  title: string,
  description: string,
  input: I,
  run: (ctx: ToolContext, args: z.output<I>) => Promise<JobResult>,
  annotations?: ToolDef["annotations"],
  output: z.ZodType = JobResultSchema,
): ToolDef =>
  tool({
    name,
    title,
    description,
    input,
    output,
    annotations,
    run,
    render: renderJob,
  });

/** The tools with their example call appended to the description (src/mcp/examples.ts). */
function withExamples(tools: readonly ToolDef[]): readonly ToolDef[] {
  return tools.map((t) => {
    const example = TOOL_EXAMPLES[t.name];
    if (!example) throw new TypeError(`Tool "${t.name}" has no example in TOOL_EXAMPLES`);
    return { ...t, description: `${t.description}\nExample: ${JSON.stringify(example)}` };
  });
}

export const TOOLS: readonly ToolDef[] = withExamples([
  jobTool(
    "exec_run",
    "Run a command",
    'Run a command in a persistent terminal session and wait (bounded) for it. `command` is an argv array: several words are passed exactly; ONE word is a shell command line (pipes, &&, cd, export persist). Returns when the command ends, waits for input, or `timeout_ms` (default 30000) passes — then status is `running` and the job keeps going: continue with exec_poll/exec_wait using `next_cursor`. Long output comes as head + tail with `omitted_bytes`. `session_id` (or `session`) picks the session; without it your default session is used. `env` values may name a vault entry instead of a value ({"DB_URL": {"vault": "db-url"}}, see vault_list): the daemon injects it for this command only, masked in all output. `parse: "auto"` (or a parser from capabilities: ls, ps, df, du, free, http_headers, git_status, git_log, ip_addr, ss, systemctl_status, docker_ps…) adds `parsed`: the output as typed JSON, with `parser` naming the one used.',
    ExecRunInput,
    (c, a) => c.agents.run(c.agent, a, c.call),
    undefined,
    ParsedJobResultSchema,
  ),
  tool({
    name: "exec_start",
    title: "Start a command",
    description:
      "Start a command without waiting (same input as exec_run). Use for servers, long builds and watchers; follow with exec_poll / exec_wait. `mode: background` runs it argv-exact on its own terminal beside the session.",
    input: ExecStartInput,
    output: JobStarted,
    run: (c, a) => c.agents.start(c.agent, a),
    render: (r) =>
      (r.status === "pending_approval"
        ? `pending_approval · ${r.job_id} · ${r.session_id} · waiting for an operator (${r.approval_id})`
        : `${r.status} · ${r.job_id} · ${r.session_id} · started (${r.mode})`) +
      (r.notice ? `\nnotice: ${r.notice}` : ""),
  }),
  jobTool(
    "exec_poll",
    "Read job output",
    "Read a job's output from a cursor (omit it to start at the beginning). `wait_ms` (≤ 30000) long-polls for new output. Keep passing `next_cursor`; `has_more` is false once everything was read and the job ended. `gap` says bytes were dropped by retention. `parse` (as in exec_run) parses the whole output of a job that has ended.",
    ExecPollInput,
    (c, a) => c.agents.poll(c.agent, a, c.call),
    { readOnlyHint: true },
    ParsedJobResultSchema,
  ),
  jobTool(
    "exec_wait",
    "Wait for a job",
    "Wait until a job exits, prints a regex `pattern` (JavaScript syntax without backreferences or lookaround: it runs in linear time), waits at a `prompt` for input, or goes `idle_ms` without output — whichever comes first — or `timeout_ms` passes (never kills). `matched` says which. Output is returned from `cursor` (default: start).",
    ExecWaitInput,
    (c, a) => c.agents.wait(c.agent, a, c.call),
    { readOnlyHint: true },
  ),
  tool({
    name: "exec_write",
    title: "Type into a job",
    description:
      'Type into one of your running jobs: answer a prompt (status awaiting_input) or drive a full-screen program (vi, less, top). `input` is a line (Enter appended unless `append_newline` is false); `keys` are named like tmux send-keys — ["Escape", ":wq", "Enter"], "C-c", "Up", "F2", "M-x"; other strings are typed as text, {"paste": "..."} is pasted (bracketed when the program asked). Follow with session_screen {since} to see what changed. Set `secret: true` for passwords: the value is redacted from all output and never logged. Or give `vault` (an entry name from vault_list) at a prompt: the daemon types the entry\'s value, which you never see. At a password prompt nobody gave you a value for, `human: {message}` returns a one-time `url` where a person types it (clients with URL elicitation open it for them); you never see it. What a finished job did not read is dropped, never run by the shell.',
    input: ExecWriteInput,
    output: JobAck,
    run: (c, a) => c.agents.write(c.agent, a),
    render: (r) => `input written · ${r.job_id} · now ${r.status}`,
  }),
  tool({
    name: "exec_signal",
    title: "Signal a job",
    description:
      "Send a signal to what a job runs in the foreground: INT (Ctrl-C), TERM, KILL, HUP, QUIT, TSTP, CONT.",
    input: ExecSignalInput,
    output: JobAck,
    run: (c, a) => c.agents.signal(c.agent, a),
    render: (r) => `${r.ok ? "signal sent" : "nobody to signal"} · ${r.job_id} · ${r.status}`,
    annotations: { destructiveHint: true },
  }),
  jobTool(
    "exec_kill",
    "Kill a job",
    "Stop a job for good: INT, then TERM, then KILL (`grace_ms` apart, default 2000) to its process group and every process it started. Returns the final status.",
    ExecKillInput,
    (c, a) => c.agents.kill(c.agent, a),
    { destructiveHint: true },
  ),
  tool({
    name: "exec_list",
    title: "List jobs",
    description: "Your jobs, newest first. `filter`: active, recent (default), all.",
    input: ExecListInput,
    output: JobList,
    run: (c, a) => c.agents.listJobs(c.agent, a),
    render: (r) => {
      if (r.jobs.length === 0) return "no jobs";
      return r.jobs.map((j) =>
        `${j.job_id} · ${j.status}${j.exit_code === undefined ? "" : ` ${j.exit_code}`} · ${
          j.command.join(" ").slice(0, 120)
        }`
      ).join("\n");
    },
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "session_create",
    title: "Create a session",
    description:
      'Open a new persistent terminal session (bash by default; zsh, sh). Pass its `session_id` to exec_run to run commands there; without one, your default session is used. `env` values may name a vault entry ({"vault": "name"}) on local sessions.',
    input: SessionCreateInput,
    output: SessionInfo,
    run: (c, a) => c.agents.createSession(c.agent, a),
    render: (r) => `session ${r.session_id} · ${r.shell} · cwd ${r.cwd}`,
  }),
  tool({
    name: "session_list",
    title: "List sessions",
    description: "Your open sessions with their cwd, state and current job.",
    input: Empty,
    output: SessionList,
    run: (c) => ({ sessions: c.agents.listSessions(c.agent) }),
    render: (r) => {
      if (r.sessions.length === 0) return "no sessions (exec_run creates your default session)";
      return r.sessions.map((s) =>
        `${s.session_id} · ${s.shell} · ${s.state}${
          s.current_job_id ? ` (${s.current_job_id})` : ""
        } · ${s.cwd}`
      ).join("\n");
    },
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "session_close",
    title: "Close a session",
    description: "Close a session; a job still running in it ends as killed.",
    input: SessionIdInput,
    output: SessionClosed,
    run: (c, a) => c.agents.closeSession(c.agent, a),
    render: (r) => `closed ${r.session_id}`,
    annotations: { destructiveHint: true },
  }),
  tool({
    name: "session_screen",
    title: "Read the screen",
    description:
      "The rendered terminal screen of a session (lines, cursor, title, alternate screen, modes) — for full-screen programs like top, vim or less. Pass the previous result's `next_cursor` as `since` to get only the rows that changed (`changes`), for a cheap type → read loop with exec_write keys.",
    input: SessionScreenInput,
    output: Screen,
    run: (c, a) => c.agents.screen(c.agent, a),
    render: (r) => {
      const head =
        `screen ${r.session_id} · ${r.cols}x${r.rows} · cursor ${r.cursor.x},${r.cursor.y}${
          r.title ? ` · ${r.title}` : ""
        }${r.alternate ? " · alternate" : ""} · next ${r.next_cursor}`;
      if (!r.full) {
        const changes = r.changes ?? [];
        return [
          `${head} · ${changes.length} changed row(s)`,
          ...changes.map((c) => `row ${c.row}: ${c.text.replace(/\s+$/, "")}`),
        ].join("\n");
      }
      const lines = r.lines.map((l) => l.replace(/\s+$/, ""));
      while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
      return [head, ...lines].join("\n");
    },
    annotations: { readOnlyHint: true },
  }),
  tool({
    name: "capabilities",
    title: "What this Termada can do",
    description: "Version, platform, shells, limits and features of this Termada daemon.",
    input: CapabilitiesInput,
    output: Capabilities,
    run: (c) => capabilities(c),
    render: (r) => JSON.stringify(r, null, 2),
    annotations: { readOnlyHint: true },
  }),
  ...MISSION_TOOLS,
  ...REMOTE_TOOLS,
  ...SNAPSHOT_TOOLS,
  ...ADAPTER_TOOLS,
]);

function capabilities(c: ToolContext): z.output<typeof Capabilities> {
  const shells = ["bash", "zsh", "sh"].filter((s) => onPath(s));
  const boundary = c.agents.boundary();
  return {
    version: c.version,
    platform: `${Deno.build.os}-${Deno.build.arch}`,
    shells,
    tools: TOOLS.map((t) => t.name),
    limits: {
      ...c.limits,
      page_bytes: LIMITS.pageBytes,
      run_wait_ms: LIMITS.runWaitMs,
      poll_wait_ms: LIMITS.pollWaitMs,
      input_bytes: LIMITS.inputBytes,
      pattern_chars: LIMITS.patternChars,
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
      remote_sessions: c.agents.remote !== undefined,
      policy: true,
      linear_time_patterns: true,
      missions: c.missions !== undefined,
      exec_gate: boundary.exec_gate.active,
      control_plane_hidden: boundary.hiding.active,
      kill_by_cgroup: boundary.cgroup.active,
      vault: c.agents.vaultUnlocked,
      run_as: boundary.run_as !== null,
      parse: true,
      private_terminals: boundary.terminals.active,
      "adapter.file.patch": c.agents.adapterNames.includes("file.patch"),
      "adapter.http.request": c.agents.adapterNames.includes("http.request"),
    },
    agent: c.agent,
    boundary,
    parsers: parserList ??= PARSERS.map((p) => ({
      name: p.name,
      description: p.description,
      matches: p.matches,
      ...(p.env.LC_ALL ? { locale: p.env.LC_ALL } : {}),
      result_schema_json: JSON.stringify(p.result_schema),
    })),
  };
}

let parserList: z.output<typeof Capabilities>["parsers"] | undefined;

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
