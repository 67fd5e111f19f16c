/** Relative-path rules, the exclude matcher and the store's on-disk layout. */
import { SNAPSHOT_LIMITS } from "./schema.ts";

const encoder = new TextEncoder();

export function utf8Length(s: string): number {
  return encoder.encode(s).length;
}

/**
 * Why `rel` cannot name an entry below a target directory, or undefined when it can: it must
 * be `/`-separated segments, none empty, `.` or `..`, no NUL, not absolute, within the bound.
 */
export function badRelPath(rel: string): string | undefined {
  if (rel === "") return "it is empty";
  if (rel.includes("\0")) return "it contains NUL";
  if (rel.startsWith("/")) return "it is absolute";
  if (utf8Length(rel) > SNAPSHOT_LIMITS.pathBytes) return "it is too long";
  for (const seg of rel.split("/")) {
    if (seg === "" || seg === "." || seg === "..") return `it has a "${seg}" segment`;
  }
  return undefined;
}

/** The parent of a relative path ("" for a top-level entry). */
export function relParent(rel: string): string {
  const i = rel.lastIndexOf("/");
  return i < 0 ? "" : rel.slice(0, i);
}

/** Compiled excludes: `matches(rel)` is true when the entry or one of its parents is excluded. */
export interface Excludes {
  matches(rel: string): boolean;
}

function segmentRegex(glob: string): RegExp {
  let src = "";
  for (const ch of glob) {
    if (ch === "*") src += "[^/]*";
    else if (ch === "?") src += "[^/]";
    else src += ch.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${src}$`);
}

/**
 * A pattern without `/` matches any one segment at any depth (`node_modules`, `*.log`); one with
 * `/` is anchored at the top and matches the leading segments (`build/out` covers
 * `build/out/x`). Patterns were validated by the schema.
 */
export function compileExcludes(patterns: readonly string[]): Excludes {
  const floating: RegExp[] = [];
  const anchored: RegExp[][] = [];
  for (const p of patterns) {
    const segs = p.split("/").map(segmentRegex);
    if (segs.length === 1) floating.push(segs[0]!);
    else anchored.push(segs);
  }
  return {
    matches(rel: string): boolean {
      const segs = rel.split("/");
      if (segs.some((s) => floating.some((re) => re.test(s)))) return true;
      return anchored.some((pat) =>
        pat.length <= segs.length && pat.every((re, i) => re.test(segs[i]!))
      );
    },
  };
}

/** Where things live under a store root (see docs/SNAPSHOTS.md). */
export class Layout {
  constructor(readonly root: string) {}
  get objects(): string {
    return `${this.root}/objects`;
  }
  get tmp(): string {
    return `${this.root}/objects/tmp`;
  }
  get manifests(): string {
    return `${this.root}/manifests`;
  }
  get lock(): string {
    return `${this.root}/lock`;
  }
  object(sha256: string): string {
    return `${this.root}/objects/${sha256.slice(0, 2)}/${sha256}`;
  }
  manifest(id: string): string {
    return `${this.root}/manifests/${id}.jsonl`;
  }
}
