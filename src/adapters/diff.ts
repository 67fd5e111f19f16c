/**
 * A unified-diff parser and exact applier (our own, after the format GNU diff and git emit).
 *
 * Lines are kept with their terminator ("\n"; a "\r" before it is part of the text), so "\ No
 * newline at end of file" is simply a last line without one and applying a hunk is a comparison
 * of strings. Hunks apply exactly (no fuzz); a hunk may sit up to `offsetLines` lines away from
 * where its header says, after earlier hunks' offsets, never overlapping an earlier hunk.
 *
 * Parsed: `--- a/x` / `+++ b/x` headers (a tab and timestamp after the path are dropped, `a/` and
 * `b/` prefixes are stripped, `/dev/null` means created or deleted), `@@ -l,s +l,s @@` hunks with
 * context, `-` and `+` lines (an empty line counts as an empty context line: some tools strip the
 * space). Lines outside files (`diff --git`, `index`, mode lines) are ignored; binary patches and
 * quoted paths are refused.
 */
import { AdapterError } from "./sdk.ts";

export const DIFF_LIMITS = {
  /** Files in one patch. */
  files: 64,
  /** Hunks in one patch, all files together. */
  hunks: 10_000,
  /** How far (lines) a hunk may sit from where its header says. */
  offsetLines: 100,
} as const;

/** One hunk; each line is its op (" ", "-", "+") then its text with its terminator, if any. */
export interface Hunk {
  oldStart: number;
  oldCount: number;
  newStart: number;
  newCount: number;
  lines: string[];
}

export interface FileDiff {
  /** null: the file is created. */
  oldPath: string | null;
  /** null: the file is deleted. */
  newPath: string | null;
  hunks: Hunk[];
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

function refuse(message: string): AdapterError {
  return new AdapterError("PATCH_DOES_NOT_APPLY", message);
}

function headerPath(raw: string, prefix: "a/" | "b/"): string | null {
  const tab = raw.indexOf("\t");
  const p = (tab === -1 ? raw : raw.slice(0, tab)).replace(/\r$/, "");
  if (p === "/dev/null") return null;
  if (p.startsWith('"')) {
    throw new AdapterError(
      "PATCH_DOES_NOT_APPLY",
      `Cannot parse patch: quoted path ${p} is not supported`,
    );
  }
  if (p === "") throw refuse("Cannot parse patch: a file header has no path");
  return p.startsWith(prefix) ? p.slice(2) : p;
}

/** Splits a file's text into lines that keep their "\n" (the last may have none). */
export function splitLines(text: string): string[] {
  const out: string[] = [];
  let at = 0;
  while (at < text.length) {
    const nl = text.indexOf("\n", at);
    const end = nl === -1 ? text.length : nl + 1;
    out.push(text.slice(at, end));
    at = end;
  }
  return out;
}

/** Parses a unified diff into files and hunks, checking every hunk's line counts. */
export function parseUnifiedDiff(text: string): FileDiff[] {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const files: FileDiff[] = [];
  let hunkCount = 0;
  let i = 0;
  while (i < lines.length) {
    const l = lines[i]!;
    if (l.startsWith("Binary files ") || l.startsWith("GIT binary patch")) {
      throw new AdapterError(
        "PATCH_DOES_NOT_APPLY",
        "Cannot parse patch: binary patches are not supported",
      );
    }
    if (l.startsWith("@@")) {
      throw refuse(`Cannot parse patch: line ${i + 1} is a hunk outside a file`);
    }
    if (!(l.startsWith("--- ") && lines[i + 1]?.startsWith("+++ "))) {
      i++;
      continue;
    }
    const file: FileDiff = {
      oldPath: headerPath(l.slice(4), "a/"),
      newPath: headerPath(lines[i + 1]!.slice(4), "b/"),
      hunks: [],
    };
    const name = file.newPath ?? file.oldPath ?? "/dev/null";
    if (file.oldPath === null && file.newPath === null) {
      throw refuse("Cannot parse patch: a file goes from /dev/null to /dev/null");
    }
    i += 2;
    while (i < lines.length && lines[i]!.startsWith("@@")) {
      const m = HUNK_HEADER.exec(lines[i]!);
      const n = file.hunks.length + 1;
      if (m === null) throw refuse(`Cannot parse patch for "${name}": hunk ${n} has a bad header`);
      if (++hunkCount > DIFF_LIMITS.hunks) {
        throw new AdapterError(
          "TOO_LARGE",
          `Cannot parse patch: it has more than ${DIFF_LIMITS.hunks} hunks`,
        );
      }
      const hunk: Hunk = {
        oldStart: Number(m[1]),
        oldCount: m[2] === undefined ? 1 : Number(m[2]),
        newStart: Number(m[3]),
        newCount: m[4] === undefined ? 1 : Number(m[4]),
        lines: [],
      };
      i++;
      let oldLeft = hunk.oldCount;
      let newLeft = hunk.newCount;
      while (oldLeft > 0 || newLeft > 0) {
        const hl = lines[i];
        if (hl === undefined || hl.startsWith("\\")) {
          throw refuse(
            `Cannot parse patch for "${name}": hunk ${n} is shorter than its header says`,
          );
        }
        const op = hl === "" ? " " : hl[0]!;
        if (op === " ") {
          oldLeft--;
          newLeft--;
        } else if (op === "-") oldLeft--;
        else if (op === "+") newLeft--;
        else {
          throw refuse(
            `Cannot parse patch for "${name}": hunk ${n} has a line starting with "${op}"`,
          );
        }
        if (oldLeft < 0 || newLeft < 0) {
          throw refuse(
            `Cannot parse patch for "${name}": hunk ${n} is longer than its header says`,
          );
        }
        hunk.lines.push(op + hl.slice(1) + "\n");
        i++;
        if (lines[i]?.startsWith("\\")) {
          const last = hunk.lines.length - 1;
          hunk.lines[last] = hunk.lines[last]!.slice(0, -1);
          i++;
        }
      }
      const next = lines[i];
      const header = next?.startsWith("--- ") && lines[i + 1]?.startsWith("+++ ");
      if (next !== undefined && !header && /^[ +-]/.test(next)) {
        throw refuse(`Cannot parse patch for "${name}": hunk ${n} is longer than its header says`);
      }
      file.hunks.push(hunk);
    }
    if (file.hunks.length === 0) {
      throw refuse(
        `Cannot parse patch for "${name}": it has no hunks (renames and mode changes are not supported)`,
      );
    }
    files.push(file);
    if (files.length > DIFF_LIMITS.files) {
      throw new AdapterError(
        "TOO_LARGE",
        `Cannot parse patch: it changes more than ${DIFF_LIMITS.files} files`,
      );
    }
  }
  if (files.length === 0) throw refuse("Cannot parse patch: it has no file headers (--- / +++)");
  return files;
}

const oldSide = (h: Hunk) => h.lines.filter((l) => l[0] !== "+");
const newLen = (h: Hunk) => h.lines.reduce((n, l) => n + (l[0] === "-" ? 0 : 1), 0);

/**
 * Where each hunk applies in `lines` (0-based index of its first old line), searching up to
 * `offsetLines` either side of where its header (and earlier hunks' offsets) put it. Throws
 * PATCH_DOES_NOT_APPLY naming `file` and the first hunk that matches nowhere.
 */
export function locateHunks(
  file: string,
  lines: readonly string[],
  hunks: readonly Hunk[],
  offsetLines: number = DIFF_LIMITS.offsetLines,
): number[] {
  const at: number[] = [];
  let min = 0;
  let drift = 0;
  hunks.forEach((h, k) => {
    const old = oldSide(h);
    const expected = (h.oldCount === 0 ? h.oldStart : h.oldStart - 1) + drift;
    const fits = (p: number) =>
      p >= min && p + old.length <= lines.length &&
      old.every((l, j) => l.slice(1) === lines[p + j]);
    let found = -1;
    for (let d = 0; d <= offsetLines && found === -1; d++) {
      if (fits(expected + d)) found = expected + d;
      else if (d > 0 && fits(expected - d)) found = expected - d;
    }
    if (found === -1) throw refuse(`Cannot apply patch to "${file}": hunk ${k + 1} does not match`);
    at.push(found);
    drift = found - (h.oldCount === 0 ? h.oldStart : h.oldStart - 1);
    min = found + old.length;
  });
  return at;
}

/** Applies hunks at the positions `locateHunks` found (exact: the old lines are there). */
export function applyAt(
  lines: readonly string[],
  hunks: readonly Hunk[],
  at: readonly number[],
): string[] {
  const out: string[] = [];
  let cur = 0;
  hunks.forEach((h, k) => {
    const p = at[k]!;
    for (let j = cur; j < p; j++) out.push(lines[j]!);
    let o = p;
    for (const l of h.lines) {
      if (l[0] === " ") out.push(lines[o++]!);
      else if (l[0] === "-") o++;
      else out.push(l.slice(1));
    }
    cur = o;
  });
  for (let j = cur; j < lines.length; j++) out.push(lines[j]!);
  return out;
}

/** The hunks that undo `hunks`, and where they apply in the patched lines. */
export function reverseHunks(
  hunks: readonly Hunk[],
  at: readonly number[],
): { hunks: Hunk[]; at: number[] } {
  const swap: Record<string, string> = { " ": " ", "-": "+", "+": "-" };
  let shift = 0;
  const newAt: number[] = [];
  const reversed = hunks.map((h, k) => {
    newAt.push(at[k]! + shift);
    shift += newLen(h) - oldSide(h).length;
    return {
      oldStart: h.newStart,
      oldCount: h.newCount,
      newStart: h.oldStart,
      newCount: h.oldCount,
      lines: h.lines.map((l) => swap[l[0]!] + l.slice(1)),
    };
  });
  return { hunks: reversed, at: newAt };
}

/** Lines added and removed. */
export function countChanges(hunks: readonly Hunk[]): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const h of hunks) {
    for (const l of h.lines) {
      if (l[0] === "+") added++;
      else if (l[0] === "-") removed++;
    }
  }
  return { added, removed };
}
