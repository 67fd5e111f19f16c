/**
 * The snapshot tools (TOOLS.md "Snapshots"): an agent takes a bounded, content-addressed copy of
 * a directory before risky work and lists its own. Restoring is an operator's decision
 * (`termada snapshot restore`, the dashboard), never an agent's.
 */
import {
  SnapshotCreateInput,
  SnapshotCreateResult,
  SnapshotList,
  SnapshotListInput,
} from "../wire/mod.ts";
import { tool, type ToolDef } from "./tools.ts";

const size = (n: number) =>
  n < 1024
    ? `${n} B`
    : n < 1 << 20
    ? `${(n / 1024).toFixed(1)} KiB`
    : `${(n / (1 << 20)).toFixed(1)} MiB`;

export const SNAPSHOT_TOOLS: readonly ToolDef[] = [
  tool({
    name: "snapshot_create",
    title: "Snapshot a directory",
    description:
      "Take a snapshot of a directory of this machine (default: the session's cwd) before risky changes: files, links, modes and mtimes, content-addressed and deduplicated. node_modules is left out (excludes replace that list), .git too unless include_git. At most 10 000 entries and 256 MiB by default. An operator can restore it (atomically per file, undoable); agents cannot.",
    input: SnapshotCreateInput,
    output: SnapshotCreateResult,
    run: (c, a) => c.agents.snapshots().create(c.agent, a),
    render: (r) =>
      `${r.snapshot_id} · ${r.dir} · ${r.files} files, ${r.dirs} dirs, ${r.symlinks} links · ${
        size(r.bytes)
      }${r.skipped ? ` · ${r.skipped} skipped` : ""}`,
  }),
  tool({
    name: "snapshot_list",
    title: "List your snapshots",
    description:
      "Your snapshots, newest first (those you took and those your policy took before your commands), optionally of one directory.",
    input: SnapshotListInput,
    output: SnapshotList,
    run: (c, a) => c.agents.snapshots().list(c.agent, a),
    render: (r) =>
      r.snapshots.length === 0
        ? "no snapshots"
        : r.snapshots.map((s) =>
          `${s.snapshot_id} · ${s.created_at} · ${s.dir} · ${s.files} files · ${size(s.bytes)}${
            s.label ? ` · ${s.label}` : ""
          }`
        ).join("\n"),
    annotations: { readOnlyHint: true },
  }),
];
