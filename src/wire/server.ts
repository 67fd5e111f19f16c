/** What a daemon tells an agent about itself (`capabilities`). */
import { z } from "zod";

export const CapabilitiesInput = z.strictObject({});

const Feature = z.object({ active: z.boolean(), reason: z.string().optional() });

/**
 * The kernel boundary around sessions on this machine (docs/SECURITY.md): what holds, and why
 * not where something does not.
 */
export const Boundary = z.object({
  mode: z.enum(["required", "auto", "off"]),
  /** Every exec of every session process is decided by the policy (seccomp notification). */
  exec_gate: Feature,
  /** The control plane's files are out of reach: `mounts` or `landlock` (see SECURITY.md). */
  hiding: Feature.extend({ how: z.enum(["mounts", "landlock"]).optional() }),
  /** Signals, ptrace and abstract sockets stay inside the session (Landlock scoping). */
  landlock: Feature.extend({ abi: z.number().int() }),
  /**
   * Each session has a devpts instance of its own: no process of it can open another terminal
   * (other sessions', the user's). Off: those are reachable as `/dev/pts/N` (docs/SECURITY.md).
   */
  terminals: Feature,
  /** Each session and one-shot job has its own cgroup: kill ends all of it. */
  cgroup: Feature,
  /** Orphans of sessions are re-parented to the daemon (PR_SET_CHILD_SUBREAPER). */
  subreaper: z.boolean(),
  /** Local sessions and jobs run as this user (`security.run_as`), or null: the daemon's own. */
  run_as: z.object({ user: z.string(), uid: z.number().int(), gid: z.number().int() }).nullable(),
});
export type Boundary = z.infer<typeof Boundary>;

export const Capabilities = z.object({
  version: z.string(),
  platform: z.string(),
  shells: z.array(z.string()),
  tools: z.array(z.string()),
  /** Named bounds (sessions per agent, output retention, page size, waits…). */
  limits: z.record(z.string(), z.number()),
  /** Named features and whether this daemon has them. */
  features: z.record(z.string(), z.boolean()),
  /** The caller's agent id. */
  agent: z.string(),
  boundary: Boundary,
  /**
   * Output parsers for `parse` (exec_run, exec_poll): what `auto` picks them for, the locale
   * they run the command with, and the JSON Schema of their `parsed` (as JSON text).
   */
  parsers: z.array(z.object({
    name: z.string(),
    description: z.string(),
    matches: z.string(),
    locale: z.string().optional(),
    result_schema_json: z.string(),
  })).max(64),
});
export type Capabilities = z.infer<typeof Capabilities>;

export const Empty = z.strictObject({});
