/** Helpers for the audit tests only: temp directories, a stepping clock, segment surgery. */
import type { Clock } from "../shared/mod.ts";
import { type AuditLog, type AuditOptions } from "./log.ts";
import type { AuditActor, AuditRecord } from "./record.ts";

export const AGENT: AuditActor = { kind: "agent", id: "agent-1" };
const enc = new TextEncoder();
const dec = new TextDecoder();

/** A clock that moves one second per reading, from 2025-01-01. */
export function steppingClock(): Clock {
  let t = Date.UTC(2025, 0, 1);
  return { now: () => (t += 1000), mono: () => t };
}

/** Runs fn with a fresh audit directory path (not yet created) and removes it afterwards. */
export function withDir(fn: (dir: string) => void): void {
  const root = Deno.makeTempDirSync({ prefix: "termada-audit-" });
  try {
    fn(`${root}/audit`);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

/** Small segments (about three records each), no fsync: tests are about format, not durability. */
export function small(extra: AuditOptions = {}): AuditOptions {
  return { maxSegmentBytes: 1024, fsync: false, clock: steppingClock(), ...extra };
}

/** Appends n job.started records with distinct data. */
export function fill(log: AuditLog, n: number): AuditRecord[] {
  const out: AuditRecord[] = [];
  for (let i = 0; i < n; i++) {
    out.push(log.append(AGENT, "job.started", { i, command: ["echo", `hello ${i}`] }));
  }
  return out;
}

export function segmentPath(dir: string, n: number): string {
  return `${dir}/audit-${String(n).padStart(6, "0")}.jsonl`;
}

/** Sorted names of the segment files in dir. */
export function segmentFiles(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) => n.endsWith(".jsonl")).sort();
}

/** The lines of a segment (without the final empty piece). */
export function readLines(path: string): string[] {
  const text = dec.decode(Deno.readFileSync(path));
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

export function writeLines(path: string, lines: string[]): void {
  Deno.writeFileSync(path, enc.encode(lines.map((l) => l + "\n").join("")));
}

/** Parsed records of a segment. */
export function readRecords(path: string): AuditRecord[] {
  return readLines(path).map((l) => JSON.parse(l) as AuditRecord);
}

/** Every byte under dir, concatenated (to prove something never reached the disk). */
export function allBytes(dir: string): string {
  let out = "";
  for (const e of Deno.readDirSync(dir)) {
    if (e.isFile) out += dec.decode(Deno.readFileSync(`${dir}/${e.name}`));
  }
  return out;
}
