/**
 * git: `status --porcelain[=v1]` (with `-b`, `-z`), `status -s`, `status --porcelain=v2` (with
 * `--branch`, `--show-stash`, `-z`), the long `git status` (English: run with LC_ALL=C), and
 * `log --oneline` (with `--decorate`, `--graph`).
 */
import {
  compact,
  type Line,
  ParseContext,
  ParseFailure,
  tokens,
  toUint,
  unquoteC,
} from "./_text.ts";
import type { GitBranch, GitCommit, GitLog, GitStatus, GitStatusEntry } from "./schema.ts";

/** git's global options that take a value, before the subcommand. */
const GLOBAL_VALUE = new Set(["-C", "-c", "--git-dir", "--work-tree", "--namespace"]);

/** The subcommand and its arguments (`git -C dir --no-pager status -sb` → status, [-sb]). */
export function gitSubcommand(args: readonly string[]): { sub: string; rest: string[] } {
  let i = 0;
  while (i < args.length) {
    const a = args[i]!;
    if (GLOBAL_VALUE.has(a)) {
      i += 2;
      continue;
    }
    if (a.startsWith("-")) {
      i++;
      continue;
    }
    return { sub: a, rest: args.slice(i + 1) };
  }
  return { sub: "", rest: [] };
}

type StatusFormat = GitStatus["format"];

/** The format `git status …` writes, or undefined when no parser reads it. */
export function gitStatusFormat(rest: readonly string[]): StatusFormat | undefined {
  let format: StatusFormat = "long";
  for (const a of rest) {
    if (a === "--") break;
    if (a === "--porcelain" || a === "--porcelain=v1" || a === "--porcelain=1") {
      format = "porcelain_v1";
    } else if (a === "--porcelain=v2" || a === "--porcelain=2") format = "porcelain_v2";
    else if (a === "--short" || (/^-[a-zA-Z]+$/.test(a) && a.includes("s"))) {
      if (format === "long") format = "porcelain_v1";
    } else if (a === "--long") format = "long";
    if (
      a === "-v" || a === "--verbose" || a.startsWith("--column") || a === "--help" ||
      (/^-[a-zA-Z]+$/.test(a) && a.includes("v"))
    ) return undefined;
  }
  // -z alone means the v1 porcelain format
  if (format === "long" && rest.includes("-z")) format = "porcelain_v1";
  return format;
}

export function gitStatusMatches(args: readonly string[]): boolean {
  const { sub, rest } = gitSubcommand(args);
  return sub === "status" && gitStatusFormat(rest) !== undefined;
}

export function gitLogMatches(args: readonly string[]): boolean {
  const { sub, rest } = gitSubcommand(args);
  if (sub !== "log") return false;
  const oneline = rest.includes("--oneline") || rest.includes("--pretty=oneline") ||
    rest.includes("--format=oneline");
  const other = rest.some((a) =>
    a === "-p" || a === "--patch" || a === "-u" || a.startsWith("--stat") || a === "--shortstat" ||
    a === "--numstat" || a === "--name-only" || a === "--name-status" || a === "--summary" ||
    (a.startsWith("--format=") && a !== "--format=oneline") ||
    (a.startsWith("--pretty=") && a !== "--pretty=oneline") || a === "--help"
  );
  return oneline && !other;
}

// ------------------------------------------------------------------------- status

interface Acc {
  entries: GitStatusEntry[];
  branch?: GitBranch;
  stash?: number;
}

export function parseGitStatus(ctx: ParseContext, argv: readonly string[]): GitStatus {
  const { rest } = gitSubcommand(argv.slice(1));
  let format = gitStatusFormat(rest) ?? "long";
  const first = ctx.lines.find((l) => l.text !== "")?.text ?? "";
  // the content decides when argv did not (e.g. an explicit parser on a bare `git status`)
  if (format === "long") {
    if (first.startsWith("# ") || /^[12u] [A-Z.]{2} /.test(first) || /^[?!] /.test(first)) {
      format = "porcelain_v2";
    } else if (first.startsWith("## ") || /^[ MADRCUT?!]{2} /.test(first)) {
      format = "porcelain_v1";
    }
  }
  const acc: Acc = { entries: [] };
  const z = rest.includes("-z") || (ctx.lines.length <= 1 && first.includes("\0"));
  if (format === "porcelain_v2") readV2(ctx, acc, z);
  else if (format === "porcelain_v1") readV1(ctx, acc, z);
  else readLong(ctx, acc);
  if (acc.entries.length === 0 && acc.branch === undefined && ctx.unparsedCount > 0) {
    throw new ParseFailure(`No line looks like git status (${format})`, ctx.firstUnparsed);
  }
  if (ctx.lines.length === 0 && format === "long") {
    throw new ParseFailure("The output is empty");
  }
  return summarise(format, acc);
}

function summarise(format: StatusFormat, acc: Acc): GitStatus {
  const staged: string[] = [];
  const unstaged: string[] = [];
  const unmerged: string[] = [];
  const untracked: string[] = [];
  const ignored: string[] = [];
  for (const e of acc.entries) {
    if (e.kind === "untracked") untracked.push(e.path);
    else if (e.kind === "ignored") ignored.push(e.path);
    else if (e.kind === "unmerged") unmerged.push(e.path);
    else {
      if (e.index !== "." && e.index !== " ") staged.push(e.path);
      if (e.worktree !== "." && e.worktree !== " ") unstaged.push(e.path);
    }
  }
  return compact({
    kind: "git_status" as const,
    format,
    branch: acc.branch,
    entries: acc.entries,
    staged,
    unstaged,
    unmerged,
    untracked,
    ignored,
    clean: staged.length + unstaged.length + unmerged.length + untracked.length === 0,
    stash: acc.stash,
  });
}

/** Records of the output: lines, or NUL-separated fields with `-z`. */
function records(ctx: ParseContext, z: boolean): Line[] {
  if (!z) return ctx.lines;
  // -z: NUL ends each record; the line structure is meaningless (numbers are record indexes)
  const joined = ctx.lines.map((l) => l.text).join("\n");
  return joined.split("\0").filter((r) => r !== "").map((text, i) => ({ n: i + 1, text }));
}

const UNMERGED = new Set(["DD", "AU", "UD", "UA", "DU", "AA", "UU"]);

function readV1(ctx: ParseContext, acc: Acc, z: boolean): void {
  const recs = records(ctx, z);
  for (let i = 0; i < recs.length; i++) {
    const r = recs[i]!;
    const t = r.text;
    if (t === "") continue;
    if (t.startsWith("## ")) {
      acc.branch = v1Branch(ctx, t.slice(3));
      continue;
    }
    if (t.length < 4 || t[2] !== " ") {
      ctx.unparsed(r);
      continue;
    }
    const x = t[0]!;
    const y = t[1]!;
    if (!" MTADRCU?!".includes(x) || !" MTADRCU?!".includes(y)) {
      ctx.unparsed(r);
      continue;
    }
    let path = t.slice(3);
    let orig: string | undefined;
    if (x === "R" || x === "C" || y === "R" || y === "C") {
      if (z) {
        orig = recs[++i]?.text;
      } else {
        const arrow = splitArrow(path);
        if (arrow !== undefined) [orig, path] = arrow;
      }
    }
    const xy = x + y;
    const kind: GitStatusEntry["kind"] = xy === "??"
      ? "untracked"
      : xy === "!!"
      ? "ignored"
      : UNMERGED.has(xy)
      ? "unmerged"
      : x === "R" || y === "R"
      ? "renamed"
      : x === "C" || y === "C"
      ? "copied"
      : "changed";
    push(
      ctx,
      acc,
      compact({
        kind,
        index: x === " " ? "." : x,
        worktree: y === " " ? "." : y,
        path: ctx.clip(z ? path : unquoteC(path)),
        orig_path: orig === undefined ? undefined : ctx.clip(z ? orig : unquoteC(orig)),
      }),
    );
  }
}

/** `ren -> "renamed file"` → [orig, path], minding quotes. */
function splitArrow(s: string): [string, string] | undefined {
  if (s.startsWith('"')) {
    let i = 1;
    while (i < s.length && s[i] !== '"') i += s[i] === "\\" ? 2 : 1;
    if (s.slice(i + 1, i + 5) === " -> ") return [s.slice(0, i + 1), s.slice(i + 5)];
    return undefined;
  }
  const a = s.indexOf(" -> ");
  return a < 0 ? undefined : [s.slice(0, a), s.slice(a + 4)];
}

/** `main...origin/main [ahead 2, behind 1]`, `No commits yet on main`, `HEAD (no branch)`. */
function v1Branch(ctx: ParseContext, s: string): GitBranch {
  if (s.startsWith("No commits yet on ") || s.startsWith("Initial commit on ")) {
    return { head: ctx.short(s.slice(18)), initial: true };
  }
  if (s.startsWith("HEAD (no branch)")) return { detached: true };
  const b: GitBranch = {};
  let rest = s;
  const bracket = rest.indexOf(" [");
  if (bracket >= 0 && rest.endsWith("]")) {
    for (const part of rest.slice(bracket + 2, -1).split(", ")) {
      if (part === "gone") b.upstream_gone = true;
      else if (part.startsWith("ahead ")) b.ahead = toUint(part.slice(6));
      else if (part.startsWith("behind ")) b.behind = toUint(part.slice(7));
    }
    rest = rest.slice(0, bracket);
  }
  const dots = rest.indexOf("...");
  if (dots >= 0) {
    b.head = ctx.short(rest.slice(0, dots));
    b.upstream = ctx.short(rest.slice(dots + 3));
  } else b.head = ctx.short(rest);
  return compact(b);
}

function readV2(ctx: ParseContext, acc: Acc, z: boolean): void {
  const recs = records(ctx, z);
  const branch: GitBranch = {};
  let sawBranch = false;
  for (let i = 0; i < recs.length; i++) {
    const r = recs[i]!;
    const t = r.text;
    if (t === "") continue;
    if (t.startsWith("# ")) {
      const sp = t.indexOf(" ", 2);
      const key = sp < 0 ? t.slice(2) : t.slice(2, sp);
      const value = sp < 0 ? "" : t.slice(sp + 1);
      sawBranch = true;
      if (key === "branch.oid") {
        if (value === "(initial)") branch.initial = true;
        else branch.oid = value.slice(0, 64);
      } else if (key === "branch.head") {
        if (value === "(detached)") branch.detached = true;
        else branch.head = ctx.short(value);
      } else if (key === "branch.upstream") branch.upstream = ctx.short(value);
      else if (key === "branch.ab") {
        const [a, b] = value.split(" ");
        branch.ahead = toUint(a?.slice(1));
        branch.behind = toUint(b?.slice(1));
      } else if (key === "stash") acc.stash = toUint(value);
      else ctx.unparsed(r);
      continue;
    }
    const e = v2Entry(ctx, t, z ? undefined : null);
    if (e === undefined) {
      ctx.unparsed(r);
      continue;
    }
    if (e.kind === "renamed" || e.kind === "copied") {
      if (z) {
        const o = recs[++i]?.text;
        if (o !== undefined) e.orig_path = ctx.clip(o);
      }
    }
    push(ctx, acc, e);
  }
  if (sawBranch) acc.branch = compact(branch);
}

/**
 * One v2 entry line. `tabOrig` null: the rename source follows a TAB on the same line (quoted
 * paths); undefined: it is the next `-z` record.
 */
function v2Entry(
  ctx: ParseContext,
  t: string,
  tabOrig: null | undefined,
): GitStatusEntry | undefined {
  const type = t[0];
  const quoted = tabOrig === null;
  const path = (s: string) => ctx.clip(quoted ? unquoteC(s) : s);
  if ((type === "?" || type === "!") && t[1] === " ") {
    return {
      kind: type === "?" ? "untracked" : "ignored",
      index: type,
      worktree: type,
      path: path(t.slice(2)),
    };
  }
  const counts: Record<string, number> = { "1": 8, "2": 9, u: 10 };
  const n = type === undefined ? undefined : counts[type];
  if (n === undefined || t[1] !== " ") return undefined;
  const tok = tokens(t, n);
  if (tok.length < n) return undefined;
  const xy = tok[1]!.text;
  if (xy.length !== 2) return undefined;
  const rest = t.slice(tok[n - 1]!.end + 1);
  if (rest === "") return undefined;
  const f = tok.map((x) => x.text);
  if (type === "1") {
    return {
      kind: "changed",
      index: xy[0]!,
      worktree: xy[1]!,
      submodule: f[2]!.slice(0, 4),
      modes: f.slice(3, 6).map((m) => m.slice(0, 8)),
      hashes: f.slice(6, 8).map((h) => h.slice(0, 64)),
      path: path(rest),
    };
  }
  if (type === "2") {
    const score = f[8]!;
    let p = rest;
    let orig: string | undefined;
    if (quoted) {
      const tab = rest.indexOf("\t");
      if (tab >= 0) {
        p = rest.slice(0, tab);
        orig = rest.slice(tab + 1);
      }
    }
    return compact({
      kind: score.startsWith("C") ? "copied" as const : "renamed" as const,
      index: xy[0]!,
      worktree: xy[1]!,
      submodule: f[2]!.slice(0, 4),
      modes: f.slice(3, 6).map((m) => m.slice(0, 8)),
      hashes: f.slice(6, 8).map((h) => h.slice(0, 64)),
      score: score.slice(0, 8),
      path: path(p),
      orig_path: orig === undefined ? undefined : path(orig),
    });
  }
  return {
    kind: "unmerged",
    index: xy[0]!,
    worktree: xy[1]!,
    submodule: f[2]!.slice(0, 4),
    modes: f.slice(3, 7).map((m) => m.slice(0, 8)),
    hashes: f.slice(7, 10).map((h) => h.slice(0, 64)),
    path: path(rest),
  };
}

function push(ctx: ParseContext, acc: Acc, e: GitStatusEntry): void {
  if (ctx.room(acc.entries)) acc.entries.push(e);
}

/** Long-format change words → the porcelain letter. */
const WORDS: Record<string, string> = {
  modified: "M",
  "new file": "A",
  deleted: "D",
  renamed: "R",
  copied: "C",
  typechange: "T",
};

const UNMERGED_WORDS: Record<string, string> = {
  "both modified": "UU",
  "both added": "AA",
  "both deleted": "DD",
  "added by us": "AU",
  "added by them": "UA",
  "deleted by us": "DU",
  "deleted by them": "UD",
};

type Area = "staged" | "unstaged" | "unmerged" | "untracked" | "ignored";

const AREAS: Record<string, Area> = {
  "Changes to be committed:": "staged",
  "Changes not staged for commit:": "unstaged",
  "Unmerged paths:": "unmerged",
  "Untracked files:": "untracked",
  "Ignored files:": "ignored",
};

/** The long `git status` (C locale). Lines it knows as advice are skipped, not flagged. */
function readLong(ctx: ParseContext, acc: Acc): void {
  const branch: GitBranch = {};
  let sawBranch = false;
  let area: Area | undefined;
  const byPath = new Map<string, GitStatusEntry>();
  const lines = ctx.lines;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const t = line.text;
    if (t.trim() === "") {
      area = undefined;
      continue;
    }
    if (t in AREAS) {
      area = AREAS[t];
      continue;
    }
    if (t.startsWith("  (") && t.endsWith(")")) continue; // advice
    if (t.startsWith("\t") && area !== undefined) {
      const item = t.slice(1);
      if (area === "untracked" || area === "ignored") {
        push(ctx, acc, {
          kind: area,
          index: area === "untracked" ? "?" : "!",
          worktree: area === "untracked" ? "?" : "!",
          path: ctx.clip(unquoteC(item)),
        });
        continue;
      }
      const colon = item.indexOf(":");
      const word = colon < 0 ? "" : item.slice(0, colon);
      let path = colon < 0 ? "" : item.slice(colon + 1).trim();
      // submodules: "modified:   sub (new commits)"
      const note = path.endsWith(")") ? path.lastIndexOf(" (") : -1;
      if (
        note > 0 &&
        /^\((?:new commits|modified content|untracked content)/.test(path.slice(note + 1))
      ) {
        path = path.slice(0, note);
      }
      if (area === "unmerged") {
        const xy = UNMERGED_WORDS[word];
        if (xy === undefined || path === "") {
          ctx.unparsed(line);
          continue;
        }
        push(ctx, acc, {
          kind: "unmerged",
          index: xy[0]!,
          worktree: xy[1]!,
          path: ctx.clip(unquoteC(path)),
        });
        continue;
      }
      const letter = WORDS[word];
      if (letter === undefined || path === "") {
        ctx.unparsed(line);
        continue;
      }
      let orig: string | undefined;
      if (letter === "R" || letter === "C") {
        const arrow = splitArrow(path);
        if (arrow !== undefined) [orig, path] = arrow;
      }
      const p = unquoteC(path);
      let e = byPath.get(p);
      if (e === undefined) {
        e = compact({
          kind: letter === "R"
            ? "renamed" as const
            : letter === "C"
            ? "copied" as const
            : "changed" as const,
          index: ".",
          worktree: ".",
          path: ctx.clip(p),
          orig_path: orig === undefined ? undefined : ctx.clip(unquoteC(orig)),
        });
        byPath.set(p, e);
        push(ctx, acc, e);
      }
      if (area === "staged") e.index = letter;
      else e.worktree = letter;
      continue;
    }
    if (longBranchLine(ctx, t, lines[i + 1]?.text, branch)) {
      sawBranch = true;
      continue;
    }
    if (KNOWN_LONG.some((k) => t.startsWith(k))) continue;
    ctx.unparsed(line);
  }
  if (sawBranch) acc.branch = compact(branch);
}

/** Lines of the long format that carry no data here. */
const KNOWN_LONG = [
  "nothing to commit",
  "nothing added to commit",
  "no changes added to commit",
  "You have unmerged paths.",
  "All conflicts fixed but you are still merging.",
  "You are currently ",
  "Last command",
  "Next command",
  "No commands",
  "interactive rebase in progress",
  "Your stash currently has",
  "It took ",
  "and have ",
  "You are in a sparse checkout",
];

function longBranchLine(
  ctx: ParseContext,
  t: string,
  next: string | undefined,
  b: GitBranch,
): boolean {
  if (t.startsWith("On branch ")) {
    b.head = ctx.short(t.slice(10));
    return true;
  }
  if (t.startsWith("HEAD detached at ") || t.startsWith("HEAD detached from ")) {
    b.detached = true;
    b.detached_at = ctx.short(t.slice(t.indexOf(" ", 14) + 1));
    return true;
  }
  if (t === "No commits yet" || t === "Initial commit") {
    b.initial = true;
    return true;
  }
  if (t.startsWith("Not currently on any branch")) {
    b.detached = true;
    return true;
  }
  const quoted = (s: string) => {
    const a = s.indexOf("'");
    const z = s.indexOf("'", a + 1);
    return a >= 0 && z > a ? ctx.short(s.slice(a + 1, z)) : undefined;
  };
  if (t.startsWith("Your branch is up to date with ")) {
    b.upstream = quoted(t);
    b.ahead = 0;
    b.behind = 0;
    return true;
  }
  const by = (s: string) => {
    const at = s.lastIndexOf(" by ");
    return at < 0 ? undefined : toUint(s.slice(at + 4).split(" ")[0]);
  };
  if (t.startsWith("Your branch is ahead of ")) {
    b.upstream = quoted(t);
    b.ahead = by(t);
    b.behind = 0;
    return true;
  }
  if (t.startsWith("Your branch is behind ")) {
    b.upstream = quoted(t);
    b.behind = by(t.split(",")[0]!);
    b.ahead = 0;
    return true;
  }
  if (t.startsWith("Your branch and ") && t.includes(" have diverged")) {
    b.upstream = quoted(t);
    // "and have 1 and 1 different commits each, respectively."
    if (next !== undefined && next.startsWith("and have ")) {
      const w = next.split(" ");
      b.ahead = toUint(w[2]);
      b.behind = toUint(w[4]);
    }
    return true;
  }
  if (t.startsWith("Your branch is based on ") && t.includes("upstream is gone")) {
    b.upstream = quoted(t);
    b.upstream_gone = true;
    return true;
  }
  return false;
}

// ------------------------------------------------------------------------- log --oneline

export function parseGitLog(ctx: ParseContext, _argv: readonly string[]): GitLog {
  const commits: GitCommit[] = [];
  for (const line of ctx.lines) {
    const t = line.text;
    if (t.trim() === "") continue;
    // --graph: the graph characters come first
    let i = 0;
    while (i < t.length && i < 256 && "*|/\\_ .-".includes(t[i]!)) i++;
    const graph = t.slice(0, i);
    if (i === t.length) continue; // a graph-only line
    let j = i;
    while (j < t.length && j - i <= 64 && isHex(t.charCodeAt(j))) j++;
    const hash = t.slice(i, j);
    if (hash.length < 4 || hash.length > 64 || (j < t.length && t[j] !== " ")) {
      ctx.unparsed(line);
      continue;
    }
    let subject = t.slice(j + 1);
    let decorations: string[] | undefined;
    if (subject.startsWith("(")) {
      const close = subject.indexOf(") ");
      const end = close >= 0 ? close : subject.endsWith(")") ? subject.length - 1 : -1;
      if (end > 0) {
        decorations = subject.slice(1, end).split(", ").slice(0, 1000).map((d) => ctx.short(d));
        subject = subject.slice(end + 2);
      }
    }
    const c: GitCommit = { hash, subject: ctx.clip(subject) };
    if (graph.trim() !== "") c.graph = graph.trimEnd();
    if (decorations !== undefined) {
      c.decorations = decorations;
      const tags: string[] = [];
      const refs: string[] = [];
      for (const d of decorations) {
        if (d === "HEAD") c.head = true;
        else if (d.startsWith("HEAD -> ")) {
          c.head = true;
          c.head_branch = d.slice(8);
        } else if (d.startsWith("tag: ")) tags.push(d.slice(5));
        else refs.push(d);
      }
      if (tags.length > 0) c.tags = tags;
      if (refs.length > 0) c.refs = refs;
    }
    if (ctx.room(commits)) commits.push(c);
  }
  if (commits.length === 0 && ctx.unparsedCount > 0) {
    throw new ParseFailure("No line starts with a commit hash", ctx.firstUnparsed);
  }
  return { kind: "git_log", commits };
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66);
}
