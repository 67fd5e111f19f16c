/**
 * Servers, fleet runs, port forwards and files on the wire (TOOLS.md "Files, remote"): inputs
 * and results of server_list, fleet_run, port_forward*, file_read, file_write, and the
 * operator's server routes.
 */
import { z } from "zod";
import { Command, Id, oneSession, Path, sameSession, SESSION_CONFLICT } from "./common.ts";

const ServerName = z.string().min(1).max(63).regex(
  /^[a-z0-9][a-z0-9_.-]*$/,
  "is not a server name",
);
const Tag = z.string().min(1).max(64).regex(/^[A-Za-z0-9._:-]+$/, "is not a tag");

export const REMOTE_LIMITS = {
  fleetTargets: 256,
  fleetConcurrency: 5,
  fleetTimeoutMs: 600_000,
  fleetOutputBytes: 2 << 20,
  readPageBytes: 1 << 20,
  /**
   * Bytes one file_write writes. Every transport carries the largest valid request: a request
   * line or body is at most 4 MiB (src/ipc MAX_LINE_BYTES, the HTTP endpoint's body bound),
   * and a file_write at these limits is under 3.5 MiB as JSON even when every character of its
   * text must be escaped (6 bytes each). Checked by src/mcp/limits_test.ts.
   */
  writeBytes: 2 << 20,
  /** Characters (UTF-16 units) of `content`: at most 6 bytes each as JSON (`\u0001`). */
  writeTextChars: 512 << 10,
  /** base64 of writeBytes. */
  writeBase64Chars: Math.ceil((2 << 20) / 3) * 4,
} as const;

export const ServerSummary = z.object({
  name: z.string(),
  tags: z.array(z.string()),
  /** From the last connection attempt (absent: never tried since the daemon started). */
  reachable: z.boolean().optional(),
  last_error: z.string().optional(),
  checked_at: z.string().optional(),
});
export const ServerList = z.object({ servers: z.array(ServerSummary) });
export type ServerList = z.infer<typeof ServerList>;

// ── fleet ──
export const FleetRunInput = z.strictObject({
  command: Command,
  servers: z.array(ServerName).max(REMOTE_LIMITS.fleetTargets).optional(),
  tags: z.array(Tag).max(64).optional(),
  concurrency: z.number().int().min(1).max(REMOTE_LIMITS.fleetConcurrency).optional(),
  timeout_ms: z.number().int().min(1).max(REMOTE_LIMITS.fleetTimeoutMs).optional(),
});
export type FleetRunInput = z.output<typeof FleetRunInput>;

export const FleetTarget = z.object({
  server: z.string(),
  status: z.enum(["exited", "timed_out", "unreachable", "failed", "cancelled"]),
  exit_code: z.number().int().optional(),
  signal: z.string().optional(),
  output: z.string(),
  truncated: z.boolean(),
  output_bytes: z.number().int(),
  duration_ms: z.number().int(),
  error: z.string().optional(),
});
export const FleetResult = z.object({
  action_id: z.string(),
  command: z.array(z.string()),
  targets: z.array(FleetTarget),
  summary: z.object({
    total: z.number().int(),
    ok: z.number().int(),
    failed: z.number().int(),
    unreachable: z.number().int(),
  }),
  duration_ms: z.number().int(),
  approval_id: z.string().optional(),
});
export type FleetResult = z.infer<typeof FleetResult>;

// ── forwards ──
export const PortForwardInput = z.strictObject({
  server: ServerName,
  remote_host: z.string().min(1).max(253).regex(
    /^[A-Za-z0-9._:-]+$/,
    "is not a host name or address",
  ),
  remote_port: z.number().int().min(1).max(65535),
  /** Local port on 127.0.0.1 (absent or 0: a free one). */
  local_port: z.number().int().min(0).max(65535).optional(),
});
export type PortForwardInput = z.output<typeof PortForwardInput>;

export const ForwardView = z.object({
  forward_id: z.string(),
  server: z.string(),
  remote_host: z.string(),
  remote_port: z.number().int(),
  local_address: z.literal("127.0.0.1"),
  local_port: z.number().int(),
  created_at: z.string(),
  connections: z.number().int(),
  total_connections: z.number().int(),
  bytes_in: z.number().int(),
  bytes_out: z.number().int(),
  state: z.enum(["open", "closed"]),
  closed_reason: z.string().optional(),
  last_error: z.string().optional(),
});
export type ForwardView = z.infer<typeof ForwardView>;
export const ForwardList = z.object({
  forwards: z.array(ForwardView.extend({ owner: z.string().optional() })),
});
export type ForwardList = z.infer<typeof ForwardList>;
export const ForwardIdInput = z.strictObject({ forward_id: Id });
export type ForwardIdInput = z.output<typeof ForwardIdInput>;

// ── files ──
export const FileReadInput = z.strictObject({
  path: Path,
  /** A session of the caller: its cwd resolves relative paths, its server is where to read. */
  session: Id.optional(),
  session_id: Id.optional(),
  offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  max_bytes: z.number().int().min(1).max(REMOTE_LIMITS.readPageBytes).optional(),
}).refine(sameSession, SESSION_CONFLICT).transform(oneSession);
export type FileReadInput = z.output<typeof FileReadInput>;

export const FileReadResult = z.object({
  path: z.string(),
  target: z.string(),
  size: z.number().int(),
  offset: z.number().int(),
  bytes: z.number().int(),
  eof: z.boolean(),
  /** "utf8" when the page is valid UTF-8 text; "base64" otherwise. */
  encoding: z.enum(["utf8", "base64"]),
  content: z.string(),
  sha256: z.string().optional(),
  next_offset: z.number().int().optional(),
});
export type FileReadResult = z.infer<typeof FileReadResult>;

export const FileWriteInput = z.strictObject({
  path: Path,
  content: z.string().max(REMOTE_LIMITS.writeTextChars).optional(),
  base64: z.string().max(REMOTE_LIMITS.writeBase64Chars).regex(
    /^[A-Za-z0-9+/]*={0,2}$/,
    "is not base64",
  ).optional(),
  /** Octal permission bits as a number (0o644 = 420) or a string like "644". */
  /** Permission bits (at most 0o1777: setuid and setgid are never set). */
  mode: z.union([z.number().int().min(0).max(0o1777), z.string().regex(/^0?[01]?[0-7]{3}$/)])
    .optional(),
  session: Id.optional(),
  session_id: Id.optional(),
}).refine(sameSession, SESSION_CONFLICT).transform(oneSession);
export type FileWriteInput = z.output<typeof FileWriteInput>;

export const FileWriteResult = z.object({
  path: z.string(),
  target: z.string(),
  size: z.number().int(),
  sha256: z.string(),
  created: z.boolean(),
  mode: z.string(),
});
export type FileWriteResult = z.infer<typeof FileWriteResult>;

// ── operator: servers ──
export const ServerAddInput = z.strictObject({
  name: ServerName,
  host: z.string().min(1).max(253),
  port: z.number().int().min(1).max(65535).optional(),
  user: z.string().min(1).max(64),
  tags: z.array(Tag).max(16).optional(),
  auth: z.string().min(1).max(64).optional(),
  host_key: z.string().min(1).max(16384).optional(),
});
export type ServerAddInput = z.output<typeof ServerAddInput>;

export const OperatorServer = ServerSummary.extend({
  host: z.string(),
  port: z.number().int(),
  user: z.string(),
  source: z.enum(["config", "live"]),
  auth: z.string().optional(),
  host_key: z.string().optional(),
});
export type OperatorServer = z.infer<typeof OperatorServer>;
export const OperatorServerList = z.object({ servers: z.array(OperatorServer) });
export type OperatorServerList = z.infer<typeof OperatorServerList>;
