/**
 * MCP resources: the calling agent's own jobs and sessions as readable, subscribable URIs, and
 * the `resource_link` items tool results carry to them (docs/ENGINE.md "Resources").
 *
 * - `termada://jobs/{job_id}/output` (text/plain): the job's cleaned output, one page of at most
 *   256 KiB a read. `?cursor=c…` reads from a cursor (exec_poll's `next_cursor` works too); the
 *   result's `_meta["termada/next_cursor"]` and `_meta["termada/next_uri"]` continue it, and
 *   `_meta["termada/has_more"]` is false once the job ended and everything was read.
 * - `termada://sessions/{session_id}/screen` (text/plain): the rendered screen rows, redacted as
 *   session_screen's; size, cursor and title in `_meta`.
 * - `termada://sessions/{session_id}/recording` (application/x-asciicast): the session's
 *   asciicast v2 recording, its newest 1 MiB (a marker event says what was left out); only when
 *   the daemon records sessions.
 *
 * Another agent's id reads like an unknown one: JSON-RPC -32002 "Resource not found". A URI that
 * is none of these is -32602. Subscriptions (at most 32 a connection) send
 * `notifications/resources/updated` when a job's output grows or it ends (at most every
 * 250 ms), and when a session's terminal gets output or it closes (screen and recording, at most
 * every 500 ms). They are event-driven (the job's and the session's own listeners, no polling);
 * every listener and timer is released on unsubscribe and when the connection closes.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  type ReadResourceRequest,
  ReadResourceRequestSchema,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplate,
  type SubscribeRequest,
  SubscribeRequestSchema,
  type UnsubscribeRequest,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { AgentOps } from "../control/mod.ts";
import { logger, TermadaError, toTermadaError } from "../shared/mod.ts";
import type { McpServerOptions } from "./server.ts";

const log = logger("mcp");

/** The JSON-RPC code MCP suggests for a resource that does not exist (or is not the caller's). */
export const RESOURCE_NOT_FOUND = -32002;
/** Entries resources/list returns at most. */
export const MAX_LISTED_RESOURCES = 100;
/** Subscriptions one connection holds at most. */
export const MAX_SUBSCRIPTIONS = 32;
/** Shortest time between two updates of one job's output. */
export const OUTPUT_UPDATE_MS = 250;
/** Shortest time between two updates of one screen. */
export const SCREEN_UPDATE_MS = 500;

const TEXT = "text/plain";
const CAST = "application/x-asciicast";
const ID = "[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}";
const URI = new RegExp(`^termada://(?:jobs/(${ID})/output|sessions/(${ID})/(screen|recording))$`);
const CURSOR = /^c[0-9a-z]{1,12}$/;

export const jobOutputUri = (jobId: string, cursor?: string): string =>
  `termada://jobs/${jobId}/output${cursor === undefined ? "" : `?cursor=${cursor}`}`;
export const sessionScreenUri = (sessionId: string): string =>
  `termada://sessions/${sessionId}/screen`;
export const sessionRecordingUri = (sessionId: string): string =>
  `termada://sessions/${sessionId}/recording`;

/** A resource URI, parsed. */
export type ResourceRef =
  | { kind: "output"; jobId: string; cursor?: string }
  | { kind: "screen"; sessionId: string }
  | { kind: "recording"; sessionId: string };

/**
 * A JSON-RPC error with a message of its own (the SDK's McpError prefixes its message with
 * "MCP error <code>:", which the client's McpError then repeats).
 */
export class ResourceError extends Error {
  readonly code: number;
  readonly data: Record<string, unknown> | undefined;
  constructor(code: number, message: string, data?: Record<string, unknown>) {
    super(message);
    this.name = "ResourceError";
    this.code = code;
    this.data = data;
  }
}

const badUri = (uri: string, why: string) =>
  new ResourceError(
    ErrorCode.InvalidParams,
    `Invalid resource URI "${uri.slice(0, 200)}": ${why}`,
    {
      uri: uri.slice(0, 200),
      hint:
        "Use termada://jobs/{job_id}/output[?cursor=c…], termada://sessions/{session_id}/screen or termada://sessions/{session_id}/recording",
    },
  );

/** Parses a resource URI; -32602 unless it is one of the three shapes. */
export function parseResourceUri(uri: unknown): ResourceRef {
  if (typeof uri !== "string") throw badUri(String(uri), "it must be a string");
  if (uri.length > 512) throw badUri(uri, "it is longer than 512 characters");
  const q = uri.indexOf("?");
  const path = q < 0 ? uri : uri.slice(0, q);
  const m = URI.exec(path);
  if (!m) throw badUri(uri, "not a Termada resource");
  if (m[1] !== undefined) {
    if (q < 0) return { kind: "output", jobId: m[1] };
    const params = new URLSearchParams(uri.slice(q + 1));
    const keys = [...params.keys()];
    const cursor = params.get("cursor");
    if (keys.length !== 1 || keys[0] !== "cursor" || cursor === null || !CURSOR.test(cursor)) {
      throw badUri(uri, 'its only query may be "cursor=" with a cursor from an earlier read');
    }
    return { kind: "output", jobId: m[1], cursor };
  }
  if (q >= 0) throw badUri(uri, "a session resource takes no query");
  return { kind: m[3] as "screen" | "recording", sessionId: m[2]! };
}

/** A failure of the control layer as the JSON-RPC error a resources/* request answers with. */
function rpcError(uri: string, err: unknown): Error {
  if (err instanceof ResourceError) return err;
  const e = toTermadaError(err);
  const data = { uri, code: e.code, ...(e.hint === undefined ? {} : { hint: e.hint }) };
  switch (e.code) {
    case "NOT_FOUND":
    case "NOT_SUPPORTED":
      return new ResourceError(RESOURCE_NOT_FOUND, `Resource not found: ${e.message}`, data);
    case "INVALID_ARGUMENT":
      return new ResourceError(ErrorCode.InvalidParams, e.message, data);
    default:
      if (e.code === "INTERNAL") log.error("resource read failed", { uri, error: err });
      return new ResourceError(
        ErrorCode.InternalError,
        `Cannot read resource "${uri}": ${e.message}`,
        {
          ...data,
          retriable: e.retriable,
        },
      );
  }
}

/** The screen rows as text: trailing blanks and empty bottom rows trimmed. */
function screenText(lines: readonly string[]): string {
  const rows = lines.map((l) => l.replace(/\s+$/, ""));
  while (rows.length > 0 && rows[rows.length - 1] === "") rows.pop();
  return rows.join("\n");
}

/** Reads a recording's joined cast, bounded (the caller's bound plus room for the markers). */
async function readCast(body: ReadableStream<Uint8Array>, limit: number): Promise<string> {
  const dec = new TextDecoder();
  let text = "";
  let bytes = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      bytes += value.length;
      if (bytes > limit) {
        throw new TermadaError("INTERNAL", `The recording joined to more than ${limit} bytes`);
      }
      text += dec.decode(value, { stream: true });
    }
  } catch (err) {
    await reader.cancel().catch(() => {/* already failed: nothing left to release */});
    throw err;
  } finally {
    reader.releaseLock();
  }
  return text + dec.decode();
}

/** resources/read for `owner`: one content item, owner-checked (see the module comment). */
export async function readResource(
  agents: AgentOps,
  owner: string,
  uri: string,
): Promise<ReadResourceResult> {
  const ref = parseResourceUri(uri);
  try {
    switch (ref.kind) {
      case "output": {
        const page = agents.outputPage(owner, ref.jobId, ref.cursor);
        return {
          contents: [{ uri, mimeType: TEXT, text: page.output }],
          _meta: {
            "termada/status": page.status,
            ...(page.exit_code === undefined ? {} : { "termada/exit_code": page.exit_code }),
            "termada/next_cursor": page.next_cursor,
            "termada/next_uri": jobOutputUri(ref.jobId, page.next_cursor),
            "termada/has_more": page.has_more,
            ...(page.gap ? { "termada/gap": page.gap } : {}),
          },
        };
      }
      case "screen": {
        const s = await agents.screen(owner, { session_id: ref.sessionId });
        return {
          contents: [{ uri, mimeType: TEXT, text: screenText(s.lines) }],
          _meta: {
            "termada/cols": s.cols,
            "termada/rows": s.rows,
            "termada/cursor": s.cursor,
            "termada/title": s.title,
            "termada/alternate": s.alternate,
          },
        };
      }
      case "recording": {
        const cast = await agents.recording(owner, ref.sessionId);
        // The cast's own bound is on recorded bytes; its markers and shifted times add a little.
        const text = await readCast(cast.body, 2 * AgentOps.RECORDING_MAX_BYTES);
        return {
          contents: [{ uri, mimeType: CAST, text }],
          _meta: {
            "termada/live": cast.info.live,
            "termada/parts": cast.parts,
            "termada/omitted_bytes": cast.omittedBytes,
          },
        };
      }
    }
  } catch (err) {
    throw rpcError(uri, err);
  }
}

const TEMPLATES: ResourceTemplate[] = [
  {
    uriTemplate: "termada://jobs/{job_id}/output",
    name: "job-output",
    title: "Job output",
    description:
      'The cleaned output of one of your jobs, 256 KiB a read. Add "?cursor=c…" (a next_cursor) to read on; _meta["termada/next_uri"] continues, _meta["termada/has_more"] is false once the job ended and all was read. Subscribe to hear when it grows or ends.',
    mimeType: TEXT,
  },
  {
    uriTemplate: "termada://sessions/{session_id}/screen",
    name: "session-screen",
    title: "Session screen",
    description:
      "The rendered terminal screen of one of your sessions (as session_screen shows it). Subscribe to hear when it changes.",
    mimeType: TEXT,
  },
  {
    uriTemplate: "termada://sessions/{session_id}/recording",
    name: "session-recording",
    title: "Session recording",
    description:
      "The asciicast v2 recording of one of your sessions (its newest 1 MiB), open or closed.",
    mimeType: CAST,
  },
];

/** resources/list: the caller's open sessions and recent jobs, newest first, bounded. */
export function listResources(agents: AgentOps, owner: string): Resource[] {
  const entries: { at: string; resource: Resource }[] = [];
  const recordings = agents.recordingsEnabled;
  for (const s of agents.listSessions(owner)) {
    entries.push({
      at: s.created_at,
      resource: {
        uri: sessionScreenUri(s.session_id),
        name: `${s.session_id} screen`,
        title: `Screen of ${s.session_id} (${s.shell}, ${s.cwd})`,
        mimeType: TEXT,
      },
    });
    if (recordings) {
      entries.push({
        at: s.created_at,
        resource: {
          uri: sessionRecordingUri(s.session_id),
          name: `${s.session_id} recording`,
          title: `Recording of ${s.session_id}`,
          mimeType: CAST,
        },
      });
    }
  }
  const { jobs } = agents.listJobs(owner, { filter: "recent", limit: MAX_LISTED_RESOURCES });
  for (const j of jobs) {
    entries.push({
      at: j.started_at,
      resource: {
        uri: jobOutputUri(j.job_id),
        name: `${j.job_id} output`,
        title: `Output of ${j.job_id}: ${j.command.join(" ").slice(0, 80)} (${j.status})`,
        mimeType: TEXT,
      },
    });
  }
  // Stable: a session's screen stays before its recording.
  entries.sort((a, b) => b.at.localeCompare(a.at));
  return entries.slice(0, MAX_LISTED_RESOURCES).map((e) => e.resource);
}

/**
 * Calls `fire` at most once every `ms`: the first change soon, later ones folded into one call
 * at the end of the interval. `flush` fires now (an end); `stop` clears the timer.
 */
class Throttle {
  readonly #ms: number;
  readonly #fire: () => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #last = -Infinity;

  constructor(ms: number, fire: () => void) {
    this.#ms = ms;
    this.#fire = fire;
  }

  poke(): void {
    if (this.#timer !== undefined) return;
    const wait = Math.max(0, this.#last + this.#ms - performance.now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#last = performance.now();
      this.#fire();
    }, wait);
  }

  flush(): void {
    this.stop();
    this.#last = performance.now();
    this.#fire();
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

interface Subscription {
  stop(): void;
}

/** One connection's subscriptions: each holds one listener and at most one timer. */
export class Subscriptions {
  readonly #subs = new Map<string, Subscription>();
  readonly #agents: AgentOps;
  readonly #owner: string;
  readonly #notify: (uri: string) => void;
  #closed = false;

  constructor(agents: AgentOps, owner: string, notify: (uri: string) => void) {
    this.#agents = agents;
    this.#owner = owner;
    this.#notify = notify;
  }

  get size(): number {
    return this.#subs.size;
  }

  /** Starts watching `uri` (owner-checked); subscribing again to the same URI is a no-op. */
  subscribe(uri: string): void {
    const ref = parseResourceUri(uri);
    if (this.#closed || this.#subs.has(uri)) return;
    if (this.#subs.size >= MAX_SUBSCRIPTIONS) {
      throw new ResourceError(
        ErrorCode.InvalidRequest,
        `Cannot subscribe to "${uri}": this connection holds ${MAX_SUBSCRIPTIONS} subscriptions, the most it may`,
        { uri, hint: "Unsubscribe from resources you no longer follow" },
      );
    }
    try {
      this.#subs.set(uri, this.#watch(uri, ref));
    } catch (err) {
      throw rpcError(uri, err);
    }
  }

  unsubscribe(uri: string): void {
    this.#subs.get(uri)?.stop();
    this.#subs.delete(uri);
  }

  /** Ends every subscription (the connection closed). Idempotent. */
  close(): void {
    this.#closed = true;
    for (const s of this.#subs.values()) s.stop();
    this.#subs.clear();
  }

  #watch(uri: string, ref: ResourceRef): Subscription {
    const agents = this.#agents;
    const owner = this.#owner;
    const send = () => this.#notify(uri);
    switch (ref.kind) {
      case "output": {
        const t = new Throttle(OUTPUT_UPDATE_MS, send);
        const off = agents.watchJob(owner, ref.jobId, (ended) => ended ? t.flush() : t.poke());
        return {
          stop() {
            off();
            t.stop();
          },
        };
      }
      case "screen":
      case "recording": {
        // The terminal's output is all that changes a screen or a recording: each burst is
        // an update (the rows are not rendered to compare: a read does that, if the client
        // wants one). A closed session is said at once, then nothing more.
        const t = new Throttle(SCREEN_UPDATE_MS, send);
        const off = agents.watchSession(
          owner,
          ref.sessionId,
          (closed) => closed ? t.flush() : t.poke(),
        );
        return {
          stop() {
            off();
            t.stop();
          },
        };
      }
    }
  }
}

/** Registers the resource handlers on `server` (the caller's own jobs and sessions only). */
export function registerResources(server: Server, options: McpServerOptions): void {
  const { agents, agent } = options;
  const subs = new Subscriptions(agents, agent, (uri) => {
    server.sendResourceUpdated({ uri }).catch(() => {/* the client went away: close follows */});
  });
  const previous = server.onclose;
  server.onclose = () => {
    subs.close();
    previous?.();
  };
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: agents.recordingsEnabled
      ? TEMPLATES
      : TEMPLATES.filter((t) => !t.uriTemplate.endsWith("/recording")),
  }));
  server.setRequestHandler(
    ListResourcesRequestSchema,
    () => ({ resources: listResources(agents, agent) }),
  );
  server.setRequestHandler(
    ReadResourceRequestSchema,
    (req: ReadResourceRequest) => readResource(agents, agent, req.params.uri),
  );
  server.setRequestHandler(SubscribeRequestSchema, (req: SubscribeRequest) => {
    subs.subscribe(req.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, (req: UnsubscribeRequest) => {
    subs.unsubscribe(req.params.uri);
    return {};
  });
}

/** Tools whose result names a job: their results link to its output. */
const JOB_TOOLS = new Set(["exec_run", "exec_start", "exec_poll", "exec_wait", "exec_kill"]);
/** Tools whose result names a session: their results link to its screen. */
const SCREEN_TOOLS = new Set(["session_create", "session_screen"]);

/** `resource_link` content items for a tool's result (after its text item). */
export function resourceLinks(
  tool: string,
  result: unknown,
): { type: "resource_link"; uri: string; name: string; mimeType?: string }[] {
  if (result === null || typeof result !== "object") return [];
  const r = result as { job_id?: unknown; session_id?: unknown };
  if (JOB_TOOLS.has(tool) && typeof r.job_id === "string") {
    return [{
      type: "resource_link",
      uri: jobOutputUri(r.job_id),
      name: `${r.job_id} output`,
      mimeType: TEXT,
    }];
  }
  if (SCREEN_TOOLS.has(tool) && typeof r.session_id === "string") {
    return [{
      type: "resource_link",
      uri: sessionScreenUri(r.session_id),
      name: `${r.session_id} screen`,
      mimeType: TEXT,
    }];
  }
  return [];
}
