/** Helpers for the snapshot tests: temp dirs, tree builders and a comparable tree listing. */
import { createHash } from "node:crypto";

/** Runs `fn` with a fresh temp dir holding `root` (the store) and `work` (the tree). */
export async function withDirs(
  fn: (d: { base: string; root: string; work: string }) => Promise<void>,
): Promise<void> {
  const base = await Deno.realPath(await Deno.makeTempDir({ prefix: "snap_test_" }));
  try {
    await Deno.mkdir(`${base}/work`);
    await fn({ base, root: `${base}/store`, work: `${base}/work` });
  } finally {
    await makeWritable(base);
    await Deno.remove(base, { recursive: true });
  }
}

async function makeWritable(dir: string): Promise<void> {
  await Deno.chmod(dir, 0o700).catch(() => {/* vanished */});
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory && !e.isSymlink) await makeWritable(`${dir}/${e.name}`);
  }
}

export type Spec = Record<string, string | Uint8Array | { link: string } | { dir: true }>;

/** Writes `spec` under `dir`: strings/bytes are files, `{link}` symlinks, `{dir}` empty dirs. */
export async function writeTree(dir: string, spec: Spec): Promise<void> {
  for (const [rel, v] of Object.entries(spec)) {
    const abs = `${dir}/${rel}`;
    await Deno.mkdir(abs.slice(0, abs.lastIndexOf("/")), { recursive: true });
    if (typeof v === "string") await Deno.writeTextFile(abs, v);
    else if (v instanceof Uint8Array) await Deno.writeFile(abs, v);
    else if ("link" in v) await Deno.symlink(v.link, abs);
    else await Deno.mkdir(abs, { recursive: true });
  }
}

/**
 * One line per entry below `dir` (sorted): type, path, mode, and the sha256 of a file, the
 * target of a link; with `mtimes` also file and directory mtimes.
 */
export async function listTree(dir: string, mtimes = false): Promise<string[]> {
  const out: string[] = [];
  const visit = async (rel: string) => {
    for await (const e of Deno.readDir(rel === "" ? dir : `${dir}/${rel}`)) {
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      const abs = `${dir}/${r}`;
      const st = await Deno.lstat(abs);
      const mode = ((st.mode ?? 0) & 0o7777).toString(8);
      const t = mtimes ? ` ${st.mtime?.getTime()}` : "";
      if (st.isSymlink) out.push(`l ${r} -> ${await Deno.readLink(abs)}`);
      else if (st.isDirectory) {
        out.push(`d ${r} ${mode}${t}`);
        await visit(r);
      } else if (st.isFile) {
        const sha = createHash("sha256").update(await Deno.readFile(abs)).digest("hex");
        out.push(`f ${r} ${mode} ${sha.slice(0, 12)}${t}`);
      } else out.push(`? ${r}`);
    }
  };
  await visit("");
  return out.sort();
}

/** Every file below `dir` (relative paths), for looking at the store. */
export async function filesBelow(dir: string): Promise<string[]> {
  const out: string[] = [];
  const visit = async (rel: string) => {
    let it: AsyncIterable<Deno.DirEntry>;
    try {
      it = Deno.readDir(rel === "" ? dir : `${dir}/${rel}`);
      for await (const e of it) {
        const r = rel === "" ? e.name : `${rel}/${e.name}`;
        if (e.isDirectory) await visit(r);
        else out.push(r);
      }
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
  };
  await visit("");
  return out.sort();
}

/** Object files in the store. */
export async function objectsIn(root: string): Promise<string[]> {
  return (await filesBelow(`${root}/objects`)).filter((p) => /^[0-9a-f]{2}\/[0-9a-f]{64}$/.test(p));
}

/** A clock that advances one second per reading. */
export function steppingClock(start = Date.UTC(2025, 0, 1)): { now(): number; mono(): number } {
  let t = start;
  return { now: () => (t += 1000), mono: () => performance.now() };
}

export function bytes(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}
