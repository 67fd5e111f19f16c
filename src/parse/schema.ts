/**
 * The result types of the parsers, as zod schemas (one name for the schema and its type) and
 * their JSON Schemas. Every object is strict (`additionalProperties: false`), every array and
 * string bounded, optional fields are absent rather than null — what MCP clients need to
 * validate `structuredContent` against an output schema.
 */
import { z } from "zod";
import { PARSE_LIMITS } from "./_text.ts";

const MAX_ENTRIES: number = PARSE_LIMITS.maxEntries;
const text = () => z.string().max(PARSE_LIMITS.maxField);
const short = () => z.string().max(256);
const uint = () => z.number().int().min(0);
const int = () => z.number().int();
const list = <T extends z.ZodType>(item: T, max: number = MAX_ENTRIES) => z.array(item).max(max);
/** Keys a parser does not type: each value as the tool printed it (JSON text for ip -j). */
const extra = () => z.record(short(), text());

export const ParseWarning = z.strictObject({
  message: text(),
  lines: list(uint(), PARSE_LIMITS.maxLineNumbers).optional(),
  count: uint().optional(),
});
export type ParseWarning = z.infer<typeof ParseWarning>;

// ---------------------------------------------------------------- ls -l

export const FILE_TYPES = ["file", "dir", "symlink", "char", "block", "fifo", "socket"] as const;

export const DirectoryEntry = z.strictObject({
  type: z.enum(FILE_TYPES),
  /** The mode column without its trailing marker, e.g. "drwxr-xr-x". */
  mode: z.string().max(10),
  /** Permission bits with setuid/setgid/sticky (e.g. 0o4755 → 2541). */
  mode_bits: uint().max(0o7777),
  /** `mode_bits` in octal, four digits ("0755"). */
  mode_octal: z.string().max(4),
  /** "+" after the mode: an ACL; "@": extended attributes (macOS); ".": an SELinux context. */
  acl: z.boolean().optional(),
  xattr: z.boolean().optional(),
  selinux: z.boolean().optional(),
  inode: uint().optional(),
  /** Allocated size from `-s`, in the unit ls printed (1K blocks by default). */
  blocks: z.number().min(0).optional(),
  links: uint(),
  owner: short().optional(),
  group: short().optional(),
  /** Numeric ids when run with `-n`. */
  uid: uint().optional(),
  gid: uint().optional(),
  /** Bytes; approximate when `size_text` is present (`-h`). Absent for devices. */
  size: uint().optional(),
  size_text: short().optional(),
  major: uint().optional(),
  minor: uint().optional(),
  /**
   * ISO 8601: "2019-03-04" (date only), "2026-11-30T12:34" (local time, no zone: ls prints
   * none), or with seconds and offset from `--time-style=full-iso`.
   */
  mtime: short(),
  /** The time as ls printed it. */
  mtime_text: short(),
  /** The year was not printed ("Nov 30 12:34"): it was resolved against `now`. */
  mtime_year_inferred: z.boolean().optional(),
  name: text(),
  link_target: text().optional(),
});
export type DirectoryEntry = z.infer<typeof DirectoryEntry>;

export const DirectorySection = z.strictObject({
  /** The `dir:` header (absent for a single directory). */
  path: text().optional(),
  /** The `total` line as printed, and as a number when it is one. */
  total: short().optional(),
  total_blocks: z.number().min(0).optional(),
  entries: list(DirectoryEntry),
});
export type DirectorySection = z.infer<typeof DirectorySection>;

export const DirectoryListing = z.strictObject({
  kind: z.literal("directory_listing"),
  sections: list(DirectorySection, 10_000),
  /** `ls: cannot access …` lines (stderr shares the terminal). */
  errors: list(text(), 1000).optional(),
});
export type DirectoryListing = z.infer<typeof DirectoryListing>;

// ---------------------------------------------------------------- ps

export const ProcessEntry = z.strictObject({
  user: short().optional(),
  pid: uint(),
  ppid: uint().optional(),
  cpu_percent: z.number().min(0).optional(),
  mem_percent: z.number().min(0).optional(),
  /** ps -ef `C`: integer CPU utilisation. */
  cpu: uint().optional(),
  vsz_kib: uint().optional(),
  rss_kib: uint().optional(),
  tty: short().optional(),
  stat: short().optional(),
  /** START / STIME as printed ("00:32", "Dec01", "2023"). */
  start: short().optional(),
  /** TIME as printed, and in seconds. */
  time: short().optional(),
  cpu_time_seconds: uint().optional(),
  elapsed: short().optional(),
  nice: short().optional(),
  priority: short().optional(),
  /** The full command line (COMMAND/CMD/ARGS) or the name (COMM). */
  command: text().optional(),
  /** `[kthreadd]`: a kernel thread. */
  kernel_thread: z.boolean().optional(),
  /** Columns without a typed field, by header. */
  extra: extra().optional(),
});
export type ProcessEntry = z.infer<typeof ProcessEntry>;

export const ProcessList = z.strictObject({
  kind: z.literal("process_list"),
  columns: list(short(), 64),
  processes: list(ProcessEntry),
});
export type ProcessList = z.infer<typeof ProcessList>;

// ---------------------------------------------------------------- df

export const FilesystemEntry = z.strictObject({
  filesystem: text(),
  type: short().optional(),
  /** Bytes (approximate with `-h`/`-H`). */
  size: uint().optional(),
  used: uint().optional(),
  available: uint().optional(),
  use_percent: uint().max(100).optional(),
  inodes: uint().optional(),
  inodes_used: uint().optional(),
  inodes_free: uint().optional(),
  inodes_use_percent: uint().max(100).optional(),
  mounted_on: text(),
});
export type FilesystemEntry = z.infer<typeof FilesystemEntry>;

export const FilesystemList = z.strictObject({
  kind: z.literal("filesystem_list"),
  /** Bytes per block of the size columns; absent when they were human-readable. */
  block_size: uint().optional(),
  /** Sizes came rounded (`-h`, `-H`, macOS `Gi` units). */
  approximate: z.boolean(),
  filesystems: list(FilesystemEntry),
});
export type FilesystemList = z.infer<typeof FilesystemList>;

// ---------------------------------------------------------------- du

export const DiskUsageEntry = z.strictObject({
  /** Bytes (approximate with `-h`/`--si`), from the unit du was told to use. */
  size: uint(),
  size_text: short(),
  path: text(),
  /** The `-c` grand total line. */
  total: z.boolean().optional(),
});
export type DiskUsageEntry = z.infer<typeof DiskUsageEntry>;

export const DiskUsage = z.strictObject({
  kind: z.literal("disk_usage"),
  /** Bytes per unit of `size_text` (1024 by default), absent for human sizes. */
  unit: uint().optional(),
  approximate: z.boolean(),
  entries: list(DiskUsageEntry),
});
export type DiskUsage = z.infer<typeof DiskUsage>;

// ---------------------------------------------------------------- free

export const MemoryRow = z.strictObject({
  total: uint().optional(),
  used: uint().optional(),
  free: uint().optional(),
  shared: uint().optional(),
  buff_cache: uint().optional(),
  buffers: uint().optional(),
  cache: uint().optional(),
  available: uint().optional(),
});
export type MemoryRow = z.infer<typeof MemoryRow>;

export const MemoryUsage = z.strictObject({
  kind: z.literal("memory_usage"),
  /** Every value is bytes; approximate with `-h` or a unit coarser than bytes. */
  approximate: z.boolean(),
  /** Bytes per printed unit (1024 by default), absent with `-h`. */
  unit: uint().optional(),
  mem: MemoryRow.optional(),
  swap: MemoryRow.optional(),
  total: MemoryRow.optional(),
  low: MemoryRow.optional(),
  high: MemoryRow.optional(),
  /** procps < 3.3.10: the `-/+ buffers/cache:` line (used, free). */
  buffers_cache: MemoryRow.optional(),
});
export type MemoryUsage = z.infer<typeof MemoryUsage>;

// ---------------------------------------------------------------- curl -I

export const HttpResponseHeader = z.strictObject({
  status_line: text(),
  http_version: z.string().max(16),
  status_code: uint().max(999),
  reason: short().optional(),
  /** In order, as sent, names as sent. */
  headers: list(z.tuple([short(), text()]), 10_000),
  /**
   * Lower-cased name → value; repeated headers joined with ", " (set-cookie with "\n", as its
   * values may hold commas).
   */
  header_map: z.record(short(), z.string().max(PARSE_LIMITS.maxField * 16)),
});
export type HttpResponseHeader = z.infer<typeof HttpResponseHeader>;

export const HttpResponses = z.strictObject({
  kind: z.literal("http_responses"),
  /** One per response: redirects (`-L`), `100 Continue`, proxy CONNECT replies. */
  responses: list(HttpResponseHeader, 1000),
});
export type HttpResponses = z.infer<typeof HttpResponses>;

// ---------------------------------------------------------------- git status

export const GitBranch = z.strictObject({
  /** Branch name; absent when detached or unknown. */
  head: short().optional(),
  oid: z.string().max(64).optional(),
  upstream: short().optional(),
  ahead: uint().optional(),
  behind: uint().optional(),
  detached: z.boolean().optional(),
  /** What HEAD is detached at/from ("2586d6f"), in the long format. */
  detached_at: short().optional(),
  /** No commits yet. */
  initial: z.boolean().optional(),
  /** The upstream branch is gone. */
  upstream_gone: z.boolean().optional(),
});
export type GitBranch = z.infer<typeof GitBranch>;

export const GIT_ENTRY_KINDS = [
  "changed",
  "renamed",
  "copied",
  "unmerged",
  "untracked",
  "ignored",
] as const;

export const GitStatusEntry = z.strictObject({
  kind: z.enum(GIT_ENTRY_KINDS),
  /** Index (staged) and worktree status letters as porcelain writes them ("." = unchanged). */
  index: z.string().length(1),
  worktree: z.string().length(1),
  path: text(),
  /** The source of a rename or copy. */
  orig_path: text().optional(),
  /** v2: "N..." or "S<c><m><u>" for submodules. */
  submodule: z.string().max(4).optional(),
  /** v2: octal modes (head, index, worktree; stage 1–3 for unmerged). */
  modes: list(z.string().max(8), 4).optional(),
  /** v2: object names (head, index; stage 1–3 for unmerged). */
  hashes: list(z.string().max(64), 3).optional(),
  /** v2: rename/copy similarity, e.g. "R100". */
  score: z.string().max(8).optional(),
});
export type GitStatusEntry = z.infer<typeof GitStatusEntry>;

export const GitStatus = z.strictObject({
  kind: z.literal("git_status"),
  format: z.enum(["porcelain_v1", "porcelain_v2", "long"]),
  branch: GitBranch.optional(),
  entries: list(GitStatusEntry),
  /** Paths by area, derived from `entries`. */
  staged: list(text()),
  unstaged: list(text()),
  unmerged: list(text()),
  untracked: list(text()),
  ignored: list(text()),
  /** Nothing staged, unstaged, unmerged or untracked. */
  clean: z.boolean(),
  /** v2 `# stash N`. */
  stash: uint().optional(),
});
export type GitStatus = z.infer<typeof GitStatus>;

// ---------------------------------------------------------------- git log --oneline

export const GitCommit = z.strictObject({
  hash: z.string().max(64),
  /** `--decorate` refs as printed ("HEAD -> main", "tag: v1.0", "origin/main"). */
  decorations: list(short(), 1000).optional(),
  /** Derived: the branch HEAD points to, tags, other refs. */
  head: z.boolean().optional(),
  head_branch: short().optional(),
  tags: list(short(), 1000).optional(),
  refs: list(short(), 1000).optional(),
  subject: text(),
  /** `--graph`: the graph characters before the hash. */
  graph: z.string().max(256).optional(),
});
export type GitCommit = z.infer<typeof GitCommit>;

export const GitLog = z.strictObject({
  kind: z.literal("git_log"),
  commits: list(GitCommit),
});
export type GitLog = z.infer<typeof GitLog>;

// ---------------------------------------------------------------- ip -j

export const IpAddrInfo = z.strictObject({
  family: short().optional(),
  local: short().optional(),
  address: short().optional(),
  prefixlen: uint().optional(),
  broadcast: short().optional(),
  scope: short().optional(),
  label: short().optional(),
  dynamic: z.boolean().optional(),
  noprefixroute: z.boolean().optional(),
  valid_life_time: uint().optional(),
  preferred_life_time: uint().optional(),
  extra: extra().optional(),
});
export type IpAddrInfo = z.infer<typeof IpAddrInfo>;

export const IpInterface = z.strictObject({
  ifindex: uint().optional(),
  ifname: short().optional(),
  link: short().optional(),
  flags: list(short(), 256).optional(),
  mtu: uint().optional(),
  qdisc: short().optional(),
  master: short().optional(),
  operstate: short().optional(),
  linkmode: short().optional(),
  group: short().optional(),
  txqlen: uint().optional(),
  link_type: short().optional(),
  address: short().optional(),
  broadcast: short().optional(),
  addr_info: list(IpAddrInfo, 10_000).optional(),
  extra: extra().optional(),
});
export type IpInterface = z.infer<typeof IpInterface>;

export const IpAddrList = z.strictObject({
  kind: z.literal("ip_addr"),
  interfaces: list(IpInterface),
});
export type IpAddrList = z.infer<typeof IpAddrList>;

export const IpLinkList = z.strictObject({
  kind: z.literal("ip_link"),
  interfaces: list(IpInterface),
});
export type IpLinkList = z.infer<typeof IpLinkList>;

export const IpRoute = z.strictObject({
  type: short().optional(),
  dst: short().optional(),
  gateway: short().optional(),
  dev: short().optional(),
  protocol: short().optional(),
  scope: short().optional(),
  prefsrc: short().optional(),
  metric: uint().optional(),
  table: short().optional(),
  pref: short().optional(),
  flags: list(short(), 256).optional(),
  extra: extra().optional(),
});
export type IpRoute = z.infer<typeof IpRoute>;

export const IpRouteList = z.strictObject({
  kind: z.literal("ip_route"),
  routes: list(IpRoute),
});
export type IpRouteList = z.infer<typeof IpRouteList>;

// ---------------------------------------------------------------- ss

export const SocketProcess = z.strictObject({
  name: text(),
  pid: uint().optional(),
  fd: uint().optional(),
});
export type SocketProcess = z.infer<typeof SocketProcess>;

export const SocketAddress = z.strictObject({
  /** As printed ("127.0.0.53%lo:53", "[::]:80", "*:*"). */
  text: short(),
  /** Host without brackets and interface ("::", "127.0.0.53", "*"). */
  address: short(),
  /** "%lo" scope. */
  interface: short().optional(),
  /** Port as printed ("80", "*", "ssh" without -n) and as a number when it is one. */
  port: short(),
  port_number: uint().max(65535).optional(),
});
export type SocketAddress = z.infer<typeof SocketAddress>;

export const SocketEntry = z.strictObject({
  netid: short().optional(),
  state: short(),
  recv_q: uint(),
  send_q: uint(),
  local: SocketAddress,
  peer: SocketAddress,
  processes: list(SocketProcess, 1000).optional(),
  /** The rest of the line when it is not `users:(…)` (e.g. `-e`: "uid:0 ino:1234 …"). */
  extra: text().optional(),
});
export type SocketEntry = z.infer<typeof SocketEntry>;

export const SocketList = z.strictObject({
  kind: z.literal("socket_list"),
  sockets: list(SocketEntry),
});
export type SocketList = z.infer<typeof SocketList>;

// ---------------------------------------------------------------- systemctl status

export const JournalLine = z.strictObject({
  line: text(),
  /** "Jun 12 14:03:11" (the journal's short format prints no year). */
  time: short().optional(),
  host: short().optional(),
  /** "systemd", "sshd" — the syslog identifier. */
  identifier: short().optional(),
  pid: uint().optional(),
  message: text().optional(),
});
export type JournalLine = z.infer<typeof JournalLine>;

export const CgroupProcess = z.strictObject({
  pid: uint(),
  command: text(),
});
export type CgroupProcess = z.infer<typeof CgroupProcess>;

export const UnitStatus = z.strictObject({
  unit: short(),
  description: text().optional(),
  /** The leading dot: "●" active, "○" inactive, "×" failed, "↻" reloading… */
  indicator: z.string().max(4).optional(),
  loaded: short().optional(),
  unit_file: text().optional(),
  unit_file_state: short().optional(),
  preset: short().optional(),
  drop_ins: list(text(), 1000).optional(),
  active: short().optional(),
  sub_state: short().optional(),
  /** "Result: exit-code" and the like, inside the Active parentheses. */
  result: short().optional(),
  /** "Mon 2023-05-15 10:21:33 UTC" as printed, and ISO when the zone is UTC. */
  since: short().optional(),
  since_iso: short().optional(),
  since_relative: short().optional(),
  main_pid: uint().optional(),
  main_process: short().optional(),
  status: text().optional(),
  tasks: uint().optional(),
  tasks_limit: uint().optional(),
  /** "5.6M" as printed, and bytes (approximate). */
  memory: short().optional(),
  memory_bytes: uint().optional(),
  memory_peak: short().optional(),
  cpu: short().optional(),
  docs: list(text(), 1000).optional(),
  processes: list(text(), 1000).optional(),
  trigger: text().optional(),
  triggers: text().optional(),
  cgroup: text().optional(),
  cgroup_processes: list(CgroupProcess, 10_000).optional(),
  /** Other `Key: value` lines (Duration, Invocation, IP, IO…), by key. */
  properties: extra().optional(),
  logs: list(JournalLine, 10_000).optional(),
});
export type UnitStatus = z.infer<typeof UnitStatus>;

export const UnitStatusList = z.strictObject({
  kind: z.literal("unit_status"),
  units: list(UnitStatus, 10_000),
  /** "Unit x.service could not be found." and other lines systemctl writes to stderr. */
  errors: list(text(), 1000).optional(),
});
export type UnitStatusList = z.infer<typeof UnitStatusList>;

// ---------------------------------------------------------------- docker ps

export const ContainerEntry = z.strictObject({
  id: short(),
  image: text(),
  /** Without the table's quotes; `…` marks docker's truncation (absent with --no-trunc). */
  command: text().optional(),
  created: short().optional(),
  status: short().optional(),
  /** Derived from status (table) or State (JSON): running, exited, created, paused… */
  state: short().optional(),
  exit_code: int().optional(),
  health: short().optional(),
  ports: list(short(), 1000).optional(),
  names: list(short(), 1000),
  size: short().optional(),
  /** JSON format fields without a typed field (Labels, Mounts, Networks…), by key. */
  extra: extra().optional(),
});
export type ContainerEntry = z.infer<typeof ContainerEntry>;

export const ContainerList = z.strictObject({
  kind: z.literal("container_list"),
  format: z.enum(["table", "json"]),
  containers: list(ContainerEntry),
});
export type ContainerList = z.infer<typeof ContainerList>;

// ---------------------------------------------------------------- the envelope

/** Any parser's result (discriminated by `kind`). */
export const ParsedOutput = z.discriminatedUnion("kind", [
  DirectoryListing,
  ProcessList,
  FilesystemList,
  DiskUsage,
  MemoryUsage,
  HttpResponses,
  GitStatus,
  GitLog,
  IpAddrList,
  IpLinkList,
  IpRouteList,
  SocketList,
  UnitStatusList,
  ContainerList,
]);
export type ParsedOutput = z.infer<typeof ParsedOutput>;

export const ParseError = z.strictObject({
  message: text(),
  line: uint().optional(),
  unparsed_lines: uint().optional(),
});
export type ParseError = z.infer<typeof ParseError>;

export const ParseSuccess = z.strictObject({
  parser: short(),
  parsed: ParsedOutput,
  warnings: list(ParseWarning, PARSE_LIMITS.maxWarnings).optional(),
});
export type ParseSuccess = z.infer<typeof ParseSuccess>;

export const ParseFailed = z.strictObject({
  parser: short().optional(),
  parse_error: ParseError,
});
export type ParseFailed = z.infer<typeof ParseFailed>;

/** What `parseOutput` returns: a result, or an error saying why none. */
export const ParseResult = z.union([ParseSuccess, ParseFailed]);
export type ParseResult = z.infer<typeof ParseResult>;

/** JSON Schema (draft 2020-12, as zod emits it) of a result schema. */
export function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, { io: "output" }) as Record<string, unknown>;
}
