/**
 * `termada snapshot create|list|show|restore|rm`: the operator's snapshots (docs/SNAPSHOTS.md)
 * through the running daemon's operator API (`/api/snapshots…`), which audits each one — a
 * restore's intent is on disk before a file changes, and it answers with the id of the undo
 * snapshot. This file only parses the command line and prints.
 */
import { resolve } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import type {
  OperatorSnapshotCreateInput,
  SnapshotCreateResult,
  SnapshotDetail,
  SnapshotList,
  SnapshotRestoreResult,
  SnapshotView,
} from "../wire/mod.ts";
import { call, type OperatorContext, paths } from "./operator.ts";
import { type Options, strictArgs, subcommand, table } from "./_args.ts";

const COMMON = {
  config: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

const USAGE = {
  create:
    `Usage: termada snapshot create DIR [--label TEXT] [--exclude GLOB]... [--include-git] [--json]
  Takes a snapshot of DIR: files, links, modes and mtimes, content-addressed (unchanged files
  cost nothing twice). node_modules is left out unless --exclude replaces that list; .git too
  unless --include-git. At most 10 000 entries and 256 MiB.
`,
  list: `Usage: termada snapshot [list] [--dir DIR] [--json]
  Every snapshot (an operator's, an agent's, a policy's before a command, a restore's undo),
  newest first.
`,
  show: `Usage: termada snapshot show ID [--json]
  One snapshot: where, when, by whom, and its first 500 entries.
`,
  restore: `Usage: termada snapshot restore ID [--delete-extra] [--target DIR] [--json]
  Puts the snapshot's files back (each atomically; unchanged ones untouched). --delete-extra
  also removes what is there now and not in the snapshot. It first takes a snapshot of what it
  replaces: restore that one to undo (the id is printed).
`,
  rm: `Usage: termada snapshot rm ID [--json]
  Removes a snapshot and the stored contents no other snapshot shares.
`,
} as const;
type Sub = keyof typeof USAGE;

const HELP = `Usage: termada snapshot <command> [options]
  create     Snapshot a directory
  list       Every snapshot (the default)
  show       One snapshot and its entries
  restore    Restore one (undoable)
  rm         Remove one
Run termada snapshot <command> --help for one command's options.
`;

const json = (v: unknown) => JSON.stringify(v, null, 2) + "\n";

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

function idOf(sub: Sub, positionals: string[]): string {
  const id = positionals[0];
  if (!id) {
    throw new TermadaError("INVALID_ARGUMENT", `Which snapshot? termada snapshot ${sub} ID`);
  }
  return encodeURIComponent(id);
}

const line = (s: SnapshotView) =>
  `${s.snapshot_id}  ${s.dir}  ${s.files} files, ${s.dirs} dirs, ${s.symlinks} links, ${
    bytes(s.bytes)
  }${s.skipped ? `, ${s.skipped} skipped` : ""}\n`;

/** Resolves with the exit code; bad usage throws INVALID_ARGUMENT (exit 2). */
export async function snapshotCommand(args: string[], ctx: OperatorContext): Promise<number> {
  const picked = subcommand<Sub>("snapshot", args, USAGE, "list");
  if (!picked) return await out(ctx, HELP);
  const { sub, rest, explicit } = picked;
  switch (sub) {
    case "create": {
      const { values, positionals } = strictArgs("snapshot create", rest, {
        ...COMMON,
        label: { type: "string" },
        exclude: { type: "string", multiple: true },
        "include-git": { type: "boolean" },
      }, 1);
      if (values.help) return await out(ctx, USAGE.create);
      const dir = positionals[0];
      if (!dir) {
        throw new TermadaError("INVALID_ARGUMENT", "Which directory? termada snapshot create DIR");
      }
      const body: OperatorSnapshotCreateInput = {
        dir: resolve(dir),
        ...(values.label !== undefined ? { label: values.label } : {}),
        ...(values.exclude !== undefined ? { excludes: values.exclude } : {}),
        ...(values["include-git"] ? { include_git: true } : {}),
      };
      const r = await call(await paths(values.config), "POST", "/snapshots", {
        ...body,
      }) as unknown as SnapshotCreateResult;
      if (values.json) return await out(ctx, json(r));
      await ctx.out(line(r));
      for (const s of r.skipped_paths) await ctx.out(`  skipped ${s.path} (${s.skipped})\n`);
      return 0;
    }
    case "list": {
      const { values } = strictArgs("snapshot list", rest, {
        ...COMMON,
        dir: { type: "string" },
      }, 0);
      if (values.help) return await out(ctx, explicit ? USAGE.list : HELP);
      const q = values.dir ? `?dir=${encodeURIComponent(resolve(values.dir))}` : "";
      const r = await call(
        await paths(values.config),
        "GET",
        `/snapshots${q}`,
      ) as unknown as SnapshotList;
      if (values.json) return await out(ctx, json(r.snapshots));
      if (r.snapshots.length === 0) return await out(ctx, "No snapshots.\n");
      return await out(
        ctx,
        table(
          ["ID", "CREATED", "BY", "FILES", "SIZE", "DIR", "LABEL"],
          r.snapshots.map((s) => [
            s.snapshot_id,
            s.created_at,
            s.kind === "pre_restore" ? `undo of ${s.restore_of ?? "?"}` : s.created_by ?? "-",
            String(s.files),
            bytes(s.bytes),
            s.dir,
            s.label ?? "",
          ]),
        ),
      );
    }
    case "show": {
      const { values, positionals } = strictArgs("snapshot show", rest, COMMON, 1);
      if (values.help) return await out(ctx, USAGE.show);
      const r = await call(
        await paths(values.config),
        "GET",
        `/snapshots/${idOf("show", positionals)}`,
      ) as unknown as SnapshotDetail;
      if (values.json) return await out(ctx, json(r));
      const s = r.snapshot;
      await ctx.out(line(s));
      await ctx.out(
        `  created ${s.created_at} by ${s.created_by ?? "-"}${s.reason ? ` (${s.reason})` : ""}\n`,
      );
      for (const e of r.entries) {
        await ctx.out(
          `  ${e.type.padEnd(7)} ${e.path}${e.type === "symlink" ? ` -> ${e.target}` : ""}${
            e.size !== undefined ? `  ${bytes(e.size)}` : ""
          }\n`,
        );
      }
      const total = s.files + s.dirs + s.symlinks;
      if (total > r.entries.length) await ctx.out(`  … +${total - r.entries.length} more\n`);
      return 0;
    }
    case "restore": {
      const { values, positionals } = strictArgs("snapshot restore", rest, {
        ...COMMON,
        "delete-extra": { type: "boolean" },
        target: { type: "string" },
      }, 1);
      if (values.help) return await out(ctx, USAGE.restore);
      const r = await call(
        await paths(values.config),
        "POST",
        `/snapshots/${idOf("restore", positionals)}/restore`,
        {
          ...(values["delete-extra"] ? { delete_extra: true } : {}),
          ...(values.target !== undefined ? { target: resolve(values.target) } : {}),
        },
      ) as unknown as SnapshotRestoreResult;
      if (values.json) {
        await ctx.out(json(r));
        return r.failed > 0 ? 1 : 0;
      }
      await ctx.out(
        `Restored ${r.snapshot_id} into ${r.target}: ${r.restored} restored, ${r.created} created, ` +
          `${r.unchanged} unchanged, ${r.deleted} deleted, ${r.failed} failed\n` +
          `Undo with: termada snapshot restore ${r.undo_snapshot_id}\n`,
      );
      for (const f of r.failures) await ctx.out(`  failed ${f.path}: ${f.error}\n`);
      return r.failed > 0 ? 1 : 0;
    }
    case "rm": {
      const { values, positionals } = strictArgs("snapshot rm", rest, COMMON, 1);
      if (values.help) return await out(ctx, USAGE.rm);
      const id = idOf("rm", positionals);
      const r = await call(await paths(values.config), "DELETE", `/snapshots/${id}`);
      if (values.json) return await out(ctx, json(r));
      return await out(
        ctx,
        `Removed ${decodeURIComponent(id)} (${bytes(Number(r.freed_bytes))} freed)\n`,
      );
    }
  }
}

async function out(ctx: OperatorContext, text: string): Promise<number> {
  await ctx.out(text);
  return 0;
}
