/**
 * The `file.patch` adapter: applies a unified diff to text files under allowed roots.
 *
 * prepare resolves every path (no `..`; absolute paths only inside a root; the nearest existing
 * ancestor's realpath must stay inside the root, so a symlinked directory cannot lead out; the
 * target itself must not be a symlink), reads each file, locates every hunk exactly (±100 lines of
 * offset, see DIFF_LIMITS) and records the before and after SHA-256. Nothing is written.
 *
 * Plan size: the plan keeps the parsed hunks and where they apply, not the before contents (a
 * file may be 16 MiB; a row's JSON at most 1 MiB). Applied exactly at recorded positions, the
 * reversed hunks rebuild the before content from the after content byte for byte, and the
 * before-hash checks it. A patch whose plan still exceeds 1 MiB as JSON is refused when the run is
 * stored (TOO_LARGE), before anything is written.
 *
 * execute checks every file first (after-hash: skip; before-hash: apply; anything else:
 * RESOURCE_CHANGED, nothing written), then writes each file atomically (writeFileAtomic). A write
 * failing after an earlier file was written is a `partial` failure: the runner compensates.
 * compensate is all or nothing too: it restores only when every file has its after- or
 * before-hash. Directories created for new files are left in place.
 */
import { basename, dirname, isAbsolute, join, normalize, relative, sep } from "node:path";
import { z } from "zod";
import { randomHex, writeFileAtomic } from "../shared/mod.ts";
import {
  applyAt,
  countChanges,
  DIFF_LIMITS,
  type Hunk,
  locateHunks,
  parseUnifiedDiff,
  reverseHunks,
  splitLines,
} from "./diff.ts";
import {
  type Adapter,
  AdapterError,
  type Compensation,
  type Prepared,
  type Reconciled,
  sha256Hex,
  utf8Bytes,
  type Verification,
} from "./sdk.ts";

export const FILE_PATCH_LIMITS = {
  /** The patch text, UTF-8 bytes. */
  patchBytes: 1024 * 1024,
  /** One file, before or after. */
  fileBytes: 16 * 1024 * 1024,
  /** Files named in the summary (the count is exact). */
  summaryFiles: 10,
  ...DIFF_LIMITS,
} as const;

export const FilePatchInput = z.object({
  patch: z.string().min(1).max(FILE_PATCH_LIMITS.patchBytes).refine(
    (p) => utf8Bytes(p) <= FILE_PATCH_LIMITS.patchBytes,
    `must be at most ${FILE_PATCH_LIMITS.patchBytes} bytes`,
  ),
  /** The directory relative paths resolve against: an allowed root or inside one. */
  root: z.string().min(1).max(4096).optional(),
});
export type FilePatchInput = z.output<typeof FilePatchInput>;

export type FileChangeKind = "create" | "modify" | "delete";

export type PlannedFile = {
  /** Absolute, with every existing directory resolved to its realpath. */
  path: string;
  /** The path as the patch names it. */
  shown: string;
  kind: FileChangeKind;
  /** null: absent. */
  before_sha256: string | null;
  after_sha256: string | null;
  /** Permission bits to write with. */
  mode: number;
  hunks: Hunk[];
  /** Where each hunk applies in the before content. */
  at: number[];
};

export type FilePatchPlan = {
  /** The realpath of the root the paths were checked against. */
  root: string;
  files: PlannedFile[];
  added: number;
  removed: number;
};

export type FilePatchReceipt = {
  files: { path: string; action: "written" | "deleted" | "already" }[];
};

export interface FilePatchOptions {
  /** Directories patches may touch (absolute). The first is the default root. */
  roots: string[];
}

const decoder = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

function within(root: string, p: string): boolean {
  const r = relative(root, p);
  return r === "" || (r !== ".." && !r.startsWith(".." + sep) && !isAbsolute(r));
}

function outside(shown: string, why: string): AdapterError {
  return new AdapterError("PATH_OUTSIDE_ROOT", `Cannot patch "${shown}": ${why}`, {
    hint: "Patch only files under the allowed roots",
  });
}

async function realDir(p: string): Promise<string | null> {
  try {
    const real = await Deno.realPath(p);
    return (await Deno.stat(real)).isDirectory ? real : "";
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return null;
    throw err;
  }
}

/** The file's real location: every existing ancestor resolved, checked to stay in a root. */
async function resolveIn(roots: string[], lexical: string, shown: string): Promise<string> {
  let dir = dirname(lexical);
  const missing: string[] = [];
  for (;;) {
    const real = await realDir(dir);
    if (real === "") throw outside(shown, `"${dir}" is not a directory`);
    if (real !== null) {
      const final = join(real, ...missing, basename(lexical));
      if (!roots.some((r) => within(r, final))) {
        throw outside(shown, "it resolves outside the allowed roots");
      }
      return final;
    }
    missing.unshift(basename(dir));
    const up = dirname(dir);
    if (up === dir) throw outside(shown, "no directory of it exists");
    dir = up;
  }
}

type Current = { bytes: Uint8Array | null; sha: string | null };

/** The file as it is now (absent: bytes and sha null). Too large files get an impossible hash. */
async function current(path: string): Promise<Current> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return { bytes: null, sha: null };
    throw err;
  }
  if (!info.isFile || info.size > FILE_PATCH_LIMITS.fileBytes) return { bytes: null, sha: "other" };
  const bytes = await Deno.readFile(path);
  return { bytes, sha: await sha256Hex(bytes) };
}

function decode(shown: string, bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new AdapterError("PATCH_DOES_NOT_APPLY", `Cannot patch "${shown}": it is not UTF-8 text`);
  }
}

const linesOf = (shown: string, bytes: Uint8Array | null) =>
  bytes === null ? [] : splitLines(decode(shown, bytes));

async function write(path: string, bytes: Uint8Array, mode: number): Promise<void> {
  await Deno.mkdir(dirname(path), { recursive: true });
  await writeFileAtomic(path, bytes, {
    tmp: join(dirname(path), `.${basename(path)}.termada-${randomHex(6)}.tmp`),
    mode,
  });
}

/** The content a file must have in `side`, rebuilt from the other side's `bytes`. */
function rebuild(f: PlannedFile, bytes: Uint8Array | null, side: "after" | "before"): Uint8Array {
  const lines = linesOf(f.shown, bytes);
  if (side === "after") return encoder.encode(applyAt(lines, f.hunks, f.at).join(""));
  const back = reverseHunks(f.hunks, f.at);
  return encoder.encode(applyAt(lines, back.hunks, back.at).join(""));
}

function commonDir(paths: string[]): string {
  let common = dirname(paths[0]!);
  while (!paths.every((p) => within(common, p))) common = dirname(common);
  return common;
}

/** Builds the adapter; `roots` are checked (realpath) at every prepare, not here. */
export function filePatchAdapter(
  options: FilePatchOptions,
): Adapter<FilePatchInput, FilePatchPlan, FilePatchReceipt> {
  if (options.roots.length === 0 || !options.roots.every(isAbsolute)) {
    throw new TypeError("file.patch needs at least one root, each an absolute path");
  }

  async function realRoots(): Promise<string[]> {
    const out: string[] = [];
    for (const r of options.roots) {
      const real = await realDir(r);
      if (real) out.push(real);
    }
    if (out.length === 0) throw outside(options.roots[0]!, "no allowed root exists");
    return out;
  }

  async function states(plan: FilePatchPlan): Promise<{ f: PlannedFile; now: Current }[]> {
    const out = [];
    for (const f of plan.files) {
      const dir = await realDir(dirname(f.path));
      // A directory swapped for a symlink since prepare must not lead the write out of the root.
      if (dir === "" || (dir !== null && join(dir, basename(f.path)) !== f.path)) {
        throw outside(f.shown, "its directory changed since the patch was prepared");
      }
      out.push({ f, now: await current(f.path) });
    }
    return out;
  }

  return {
    name: "file.patch",
    input: FilePatchInput,
    maxInputBytes: 1024 * 1024,

    async prepare(input): Promise<Prepared<FilePatchPlan>> {
      const roots = await realRoots();
      let base = roots[0]!;
      if (input.root !== undefined) {
        const r = isAbsolute(input.root) ? await realDir(normalize(input.root)) : null;
        if (!r || !roots.some((a) => within(a, r))) {
          throw outside(input.root, "the root is not an allowed root or inside one");
        }
        base = r;
      }
      const diffs = parseUnifiedDiff(input.patch);
      const files: PlannedFile[] = [];
      for (const d of diffs) {
        if (d.oldPath !== null && d.newPath !== null && d.oldPath !== d.newPath) {
          throw new AdapterError(
            "PATCH_DOES_NOT_APPLY",
            `Cannot patch "${d.oldPath}": renames are not supported`,
          );
        }
        const shown = (d.newPath ?? d.oldPath)!;
        const kind: FileChangeKind = d.oldPath === null
          ? "create"
          : d.newPath === null
          ? "delete"
          : "modify";
        if (shown.includes("\0")) throw outside(shown, "it contains a NUL byte");
        if (shown.split("/").includes("..")) throw outside(shown, '".." is not allowed in paths');
        const lexical = isAbsolute(shown) ? normalize(shown) : join(base, shown);
        const path = await resolveIn(roots, lexical, shown);
        if (files.some((f) => f.path === path)) {
          throw new AdapterError(
            "PATCH_DOES_NOT_APPLY",
            `Cannot patch "${shown}": the patch names it twice`,
          );
        }

        let mode = 0o644;
        let before: Uint8Array | null = null;
        try {
          const info = await Deno.lstat(path);
          if (info.isSymlink) throw outside(shown, "it is a symbolic link");
          if (!info.isFile) {
            throw new AdapterError(
              "PATCH_DOES_NOT_APPLY",
              `Cannot patch "${shown}": it is not a regular file`,
            );
          }
          if (info.size > FILE_PATCH_LIMITS.fileBytes) {
            throw new AdapterError(
              "TOO_LARGE",
              `Cannot patch "${shown}": it is larger than ${FILE_PATCH_LIMITS.fileBytes} bytes`,
            );
          }
          mode = (info.mode ?? 0o644) & 0o7777;
          before = await Deno.readFile(path);
        } catch (err) {
          if (!(err instanceof Deno.errors.NotFound)) throw err;
        }
        if (kind === "create" && before !== null) {
          throw new AdapterError(
            "PATCH_DOES_NOT_APPLY",
            `Cannot create "${shown}": it already exists`,
          );
        }
        if (kind !== "create" && before === null) {
          throw new AdapterError(
            "PATCH_DOES_NOT_APPLY",
            `Cannot patch "${shown}": it does not exist`,
          );
        }
        const lines = linesOf(shown, before);
        const at = locateHunks(shown, lines, d.hunks);
        const after = applyAt(lines, d.hunks, at);
        if (kind === "delete" && after.length > 0) {
          throw new AdapterError(
            "PATCH_DOES_NOT_APPLY",
            `Cannot delete "${shown}": the patch leaves ${after.length} of its lines`,
          );
        }
        const afterBytes = encoder.encode(after.join(""));
        if (afterBytes.byteLength > FILE_PATCH_LIMITS.fileBytes) {
          throw new AdapterError(
            "TOO_LARGE",
            `Cannot patch "${shown}": the result is larger than ${FILE_PATCH_LIMITS.fileBytes} bytes`,
          );
        }
        files.push({
          path,
          shown,
          kind,
          before_sha256: before === null ? null : await sha256Hex(before),
          after_sha256: kind === "delete" ? null : await sha256Hex(afterBytes),
          mode,
          hunks: d.hunks,
          at,
        });
      }
      const { added, removed } = countChanges(files.flatMap((f) => f.hunks));
      const names = files.slice(0, FILE_PATCH_LIMITS.summaryFiles).map((f) =>
        `${f.kind === "create" ? "+" : f.kind === "delete" ? "−" : ""}${f.shown}`
      );
      if (files.length > names.length) names.push(`… ${files.length - names.length} more`);
      const summary = `${files.length} file${
        files.length === 1 ? "" : "s"
      }, +${added} −${removed}: ${names.join(", ")}`.slice(0, 4000);
      return {
        plan: { root: base, files, added, removed },
        // The path (one file) or the directory holding them all; the gateway decides each file too.
        resource: files.length === 1 ? files[0]!.path : commonDir(files.map((f) => f.path)),
        summary,
        risk: "medium",
        reversible: true,
      };
    },

    async execute(plan): Promise<FilePatchReceipt> {
      const found = await states(plan);
      for (const { f, now } of found) {
        if (now.sha !== f.after_sha256 && now.sha !== f.before_sha256) {
          throw new AdapterError(
            "RESOURCE_CHANGED",
            `Cannot apply patch to "${f.shown}": it changed since the patch was prepared`,
            { hint: "Prepare the patch again against the current content" },
          );
        }
      }
      const receipt: FilePatchReceipt = { files: [] };
      let written = 0;
      for (const { f, now } of found) {
        if (now.sha === f.after_sha256) {
          receipt.files.push({ path: f.path, action: "already" });
          continue;
        }
        try {
          if (f.kind === "delete") {
            await Deno.remove(f.path);
            receipt.files.push({ path: f.path, action: "deleted" });
          } else {
            const bytes = rebuild(f, now.bytes, "after");
            if ((await sha256Hex(bytes)) !== f.after_sha256) {
              throw new AdapterError(
                "RESOURCE_CHANGED",
                `Cannot apply patch to "${f.shown}": the result does not have the planned hash`,
              );
            }
            await write(f.path, bytes, f.mode);
            receipt.files.push({ path: f.path, action: "written" });
          }
          written++;
        } catch (err) {
          throw new AdapterError(
            "WRITE_FAILED",
            `Cannot apply patch to "${f.shown}": ${
              err instanceof Error ? err.message : String(err)
            }`,
            { cause: err, outcome: written > 0 ? "partial" : "not_applied" },
          );
        }
      }
      return receipt;
    },

    async verify(plan): Promise<Verification> {
      const observed = [];
      let holds = true;
      for (const f of plan.files) {
        const { sha } = await current(f.path);
        if (sha !== f.after_sha256) holds = false;
        observed.push({ path: f.path, sha256: sha, expected: f.after_sha256 });
      }
      return { holds, observed: { files: observed } };
    },

    async compensate(plan): Promise<Compensation> {
      const found = await states(plan);
      const conflicts = found.filter(({ f, now }) =>
        now.sha !== f.after_sha256 && now.sha !== f.before_sha256
      ).map(({ f }) => f.path);
      if (conflicts.length > 0) {
        return { done: false, detail: { reason: "changed since the patch", conflicts } };
      }
      const restored: string[] = [];
      for (const { f, now } of found) {
        if (now.sha === f.before_sha256) continue;
        if (f.kind === "create") {
          await Deno.remove(f.path);
        } else {
          const bytes = rebuild(f, now.bytes, "before");
          if ((await sha256Hex(bytes)) !== f.before_sha256) {
            return {
              done: false,
              detail: { reason: "the rebuilt content does not match", path: f.path, restored },
            };
          }
          await write(f.path, bytes, f.mode);
        }
        restored.push(f.path);
      }
      return { done: true, detail: { restored } };
    },

    async reconcile(plan): Promise<Reconciled<FilePatchReceipt>> {
      const found = await states(plan);
      if (found.every(({ f, now }) => now.sha === f.after_sha256)) {
        return {
          status: "applied",
          receipt: { files: plan.files.map((f) => ({ path: f.path, action: "already" as const })) },
        };
      }
      // Every file before or after: executing again finishes the job (it skips files already
      // patched), so a half-applied patch counts as not applied rather than unknown.
      if (found.every(({ f, now }) => now.sha === f.before_sha256 || now.sha === f.after_sha256)) {
        return { status: "not_applied" };
      }
      return {
        status: "unknown",
        detail: found.map(({ f, now }) => ({
          path: f.path,
          state: now.sha === f.after_sha256
            ? "after"
            : now.sha === f.before_sha256
            ? "before"
            : "other",
        })),
      };
    },
  };
}
