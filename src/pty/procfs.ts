/**
 * Reads `/proc` through libc (Deno's file APIs demand full permissions for `/proc`). Linux only.
 * Every function returns `undefined` when the process is gone or the file is unreadable: a
 * process can exit between any two reads, so absence is normal, not an error.
 */
import { cstr, decodeCString, LINUX, sys } from "../../ffi/mod.ts";

const decoder = new TextDecoder();
const readBuf = new Uint8Array(16384);

/** Reads a small /proc file (≤ 16 KiB) synchronously. */
export function readProcFile(path: string): string | undefined {
  const libc = sys();
  const fd = libc.open(cstr(path), LINUX.O_RDONLY | LINUX.O_CLOEXEC, 0);
  if (fd < 0) return undefined;
  try {
    let total = 0;
    while (total < readBuf.length) {
      const n = Number(libc.read(fd, readBuf.subarray(total), BigInt(readBuf.length - total)));
      if (n <= 0) break;
      total += n;
    }
    return decoder.decode(readBuf.subarray(0, total));
  } finally {
    libc.close(fd);
  }
}

export interface ProcStat {
  pid: number;
  comm: string;
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  ttyNr: number;
  tpgid: number;
  /** Threads in its process (1: the pid is the process's only thread, so its leader). */
  threads: number;
  /** Start time in clock ticks since boot: with the pid, identifies a process across exec. */
  startTime: number;
}

/** Fields of /proc/<pid>/stat (comm may contain spaces and parentheses: parse from the last ')'). */
export function procStat(pid: number): ProcStat | undefined {
  const text = readProcFile(`/proc/${pid}/stat`);
  if (text === undefined) return undefined;
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < 0) return undefined;
  const rest = text.slice(close + 2).split(" ");
  return {
    pid,
    comm: text.slice(open + 1, close),
    state: rest[0] ?? "?",
    ppid: Number(rest[1]),
    pgrp: Number(rest[2]),
    session: Number(rest[3]),
    ttyNr: Number(rest[4]),
    tpgid: Number(rest[5]),
    threads: Number(rest[17]),
    startTime: Number(rest[19]),
  };
}

/** Direct children of a process (all its threads' children). */
export function childrenOf(pid: number): number[] {
  const text = readProcFile(`/proc/${pid}/task/${pid}/children`);
  if (!text) return [];
  return text.trim().split(/\s+/).filter(Boolean).map(Number);
}

/** Every descendant of `pid` (not including it), breadth first; bounded to 4096 processes. */
export function descendantsOf(pid: number): number[] {
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0 && out.length < 4096) {
    const p = queue.shift()!;
    for (const c of childrenOf(p)) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

/** The system call a process is blocked in: number and first argument (x86_64/aarch64). */
export function currentSyscall(pid: number): { nr: number; arg0: number } | undefined {
  const text = readProcFile(`/proc/${pid}/syscall`);
  if (text === undefined) return undefined;
  const parts = text.trim().split(" ");
  const nr = Number(parts[0]);
  if (!Number.isInteger(nr)) return undefined; // "running" or "-1 …"
  return { nr, arg0: Number.parseInt(parts[1] ?? "", 16) };
}

const linkBuf = new Uint8Array(4096);
/** readlink(2) of a /proc path, e.g. `/proc/<pid>/fd/0`. */
export function readLink(path: string): string | undefined {
  const n = Number(sys().readlink(cstr(path), linkBuf, BigInt(linkBuf.length - 1)));
  if (n < 0) return undefined;
  linkBuf[n] = 0;
  return decodeCString(linkBuf.subarray(0, n + 1));
}

/** Number of open file descriptors of this process (probes fds 0…maxFd with fcntl). */
export function countOpenFds(maxFd = 4096): number {
  const libc = sys();
  let n = 0;
  for (let fd = 0; fd < maxFd; fd++) {
    if (libc.fcntl(fd, LINUX.F_GETFL, 0) !== -1) n++;
  }
  return n;
}

/** Every pid on the system (the numeric entries of /proc), read through libc. */
export function allPids(): number[] {
  return numericEntries("/proc");
}

/** The numeric entries of a /proc directory (`/proc`, `/proc/<pid>/task`), through libc. */
export function numericEntries(path: string): number[] {
  const libc = sys();
  const dir = libc.opendir(cstr(path));
  if (dir === null) return [];
  const out: number[] = [];
  try {
    for (;;) {
      const ent = libc.readdir(dir);
      if (ent === null) break;
      const name = Deno.UnsafePointerView.getCString(ent, LINUX.DIRENT_NAME_OFFSET);
      const c = name.charCodeAt(0);
      if (c >= 48 && c <= 57) out.push(Number(name));
    }
  } finally {
    libc.closedir(dir);
  }
  return out;
}

/** Every process whose session id is `sid` (a terminal session's processes, orphans included). */
export function pidsInSession(sid: number): number[] {
  return allPids().filter((p) => p !== sid && procStat(p)?.session === sid);
}
