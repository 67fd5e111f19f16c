import assert from "node:assert/strict";
import { failed, fixture, parsed } from "./_testing.ts";
import { gitStatusFormat, gitSubcommand } from "./git.ts";

const STAGED = ["a", "b", "renamed file"];
const UNSTAGED = ["a", "c", "with space"];
const UNTRACKED = [".gitignore", "newdir/", "untracked1"];

Deno.test("git status --porcelain=v1 -b (real repo: staged, unstaged, renamed, untracked, conflict)", () => {
  const { parsed: p, warnings } = parsed(
    "git_status",
    ["git status --porcelain=v1 -b"],
    fixture("git_status_porcelain_v1_b.txt"),
  );
  assert.equal(warnings, undefined);
  assert.equal(p.format, "porcelain_v1");
  assert.deepEqual(p.branch, { head: "main", upstream: "origin/main", ahead: 2 });
  assert.deepEqual([p.staged, p.unstaged, p.unmerged, p.untracked], [
    STAGED,
    UNSTAGED,
    ["conf"],
    UNTRACKED,
  ]);
  const ren = p.entries.find((e) => e.kind === "renamed")!;
  assert.deepEqual([ren.path, ren.orig_path, ren.index, ren.worktree], [
    "renamed file",
    "ren",
    "R",
    ".",
  ]);
  assert.equal(p.clean, false);
});

Deno.test("git status --porcelain -z (real) reads NUL records", () => {
  const { parsed: p } = parsed(
    "git_status",
    ["git", "status", "--porcelain", "-z"],
    fixture("git_status_porcelain_v1_z.bin"),
  );
  assert.deepEqual([p.staged, p.unstaged, p.untracked], [STAGED, UNSTAGED, UNTRACKED]);
  assert.equal(p.entries.find((e) => e.kind === "renamed")!.orig_path, "ren");
});

Deno.test("git status --porcelain=v2 --branch --ignored (real) reads every entry type", () => {
  const { parsed: p, warnings } = parsed("git_status", [
    "git status --porcelain=v2 --branch --ignored",
  ], fixture("git_status_porcelain_v2_ignored.txt"));
  assert.equal(warnings, undefined);
  assert.deepEqual(p.branch, {
    oid: "2603f4c38ef1aa6eaa7ec99ed1acef6ad7e55413",
    head: "main",
    upstream: "origin/main",
    ahead: 2,
    behind: 0,
  });
  assert.deepEqual([p.staged, p.unstaged, p.unmerged, p.untracked, p.ignored], [
    STAGED,
    UNSTAGED,
    ["conf"],
    UNTRACKED,
    ["debug.log"],
  ]);
  const ren = p.entries.find((e) => e.kind === "renamed")!;
  assert.deepEqual([ren.path, ren.orig_path, ren.score], ["renamed file", "ren", "R100"]);
  const u = p.entries.find((e) => e.kind === "unmerged")!;
  assert.equal(u.modes?.length, 4);
  assert.equal(u.hashes?.length, 3);
});

Deno.test("git status --porcelain=v2: clean, diverged, detached, initial (real)", () => {
  const clean = parsed(
    "git_status",
    ["git status --porcelain=v2 --branch"],
    fixture("git_status_porcelain_v2_clean.txt"),
  ).parsed;
  assert.deepEqual([clean.clean, clean.branch?.ahead, clean.branch?.behind], [true, 0, 0]);
  const div = parsed(
    "git_status",
    ["git status --porcelain=v2 --branch"],
    fixture("git_status_porcelain_v2_diverged.txt"),
  ).parsed;
  assert.deepEqual([div.branch?.ahead, div.branch?.behind], [1, 1]);
  const det = parsed(
    "git_status",
    ["git status --porcelain=v2 --branch"],
    fixture("git_status_porcelain_v2_detached.txt"),
  ).parsed;
  assert.equal(det.branch?.detached, true);
  const init = parsed(
    "git_status",
    ["git status --porcelain=v2 --branch"],
    fixture("git_status_porcelain_v2_initial.txt"),
  ).parsed;
  assert.deepEqual([init.branch?.initial, init.untracked], [true, ["f"]]);
});

Deno.test("plain git status (real, LC_ALL=C): branch, ahead, staged/unstaged/unmerged/untracked", () => {
  const { parsed: p, warnings } = parsed(
    "git_status",
    ["git status"],
    fixture("git_status_plain.txt"),
  );
  assert.equal(warnings, undefined);
  assert.equal(p.format, "long");
  assert.deepEqual(p.branch, { head: "main", upstream: "origin/main", ahead: 2, behind: 0 });
  assert.deepEqual([p.staged, p.unstaged.sort(), p.unmerged, p.untracked], [STAGED, UNSTAGED, [
    "conf",
  ], UNTRACKED]);
  assert.equal(p.entries.find((e) => e.path === "a")!.worktree, "M");
  assert.equal(p.entries.find((e) => e.path === "with space")!.worktree, "D");
});

Deno.test("plain git status variants (real): clean, behind, diverged, detached, no commits", () => {
  const clean = parsed("git_status", ["git status"], fixture("git_status_plain_clean.txt")).parsed;
  assert.deepEqual([clean.clean, clean.branch], [true, {
    head: "main",
    upstream: "origin/main",
    ahead: 0,
    behind: 0,
  }]);
  const behind =
    parsed("git_status", ["git status"], fixture("git_status_plain_behind.txt")).parsed;
  assert.deepEqual([behind.branch?.behind, behind.branch?.ahead], [1, 0]);
  const div = parsed("git_status", ["git status"], fixture("git_status_plain_diverged.txt")).parsed;
  assert.deepEqual([div.branch?.ahead, div.branch?.behind], [1, 1]);
  const det = parsed("git_status", ["git status"], fixture("git_status_plain_detached.txt")).parsed;
  assert.deepEqual(det.branch, { detached: true, detached_at: "2586d6f" });
  const init = parsed("git_status", ["git status"], fixture("git_status_plain_initial.txt")).parsed;
  assert.deepEqual([init.branch?.initial, init.untracked, init.clean], [true, ["f"], false]);
});

Deno.test("git status -sb: diverged and initial headers (real)", () => {
  const div =
    parsed("git_status", ["git status -sb"], fixture("git_status_sb_diverged.txt")).parsed;
  assert.deepEqual(div.branch, { head: "main", upstream: "origin/main", ahead: 1, behind: 1 });
  const init =
    parsed("git_status", ["git status -sb"], fixture("git_status_sb_initial.txt")).parsed;
  assert.deepEqual(init.branch, { head: "main", initial: true });
});

Deno.test("git status quotes paths with special characters; they come back unquoted", () => {
  const out = '?? "caf\\303\\251 \\"q\\".txt"\nR  "a\\tb" -> c\n';
  const { parsed: p } = parsed("git_status", ["git status --porcelain"], out);
  assert.deepEqual(p.untracked, ['café "q".txt']);
  assert.equal(p.entries[1]!.orig_path, "a\tb");
});

Deno.test("git log --oneline --decorate (real): hashes, HEAD branch, tags, refs", () => {
  const { parsed: p } = parsed(
    "git_log",
    ["git log --oneline --decorate"],
    fixture("git_log_oneline_decorate.txt"),
  );
  assert.deepEqual(p.commits.map((c) => c.subject), [
    "main edits conf",
    "change a: second",
    "initial commit",
  ]);
  assert.deepEqual([p.commits[0]!.head, p.commits[0]!.head_branch], [true, "main"]);
  assert.deepEqual([p.commits[2]!.tags, p.commits[2]!.refs], [["v1.0"], ["origin/main"]]);
  assert.equal(p.commits[1]!.decorations, undefined);
  const plain = parsed("git_log", ["git log --oneline"], fixture("git_log_oneline.txt")).parsed;
  assert.equal(plain.commits.length, 3);
});

Deno.test("git log --oneline --graph (real): graph prefixes, graph-only lines skipped", () => {
  const { parsed: p, warnings } = parsed(
    "git_log",
    ["git log --oneline --decorate --all --graph"],
    fixture("git_log_oneline_graph.txt"),
  );
  assert.equal(warnings, undefined);
  assert.deepEqual(p.commits.map((c) => c.graph), ["*", "| *", "*", "*"]);
});

Deno.test("git argv: global options, formats, refusals", () => {
  assert.deepEqual(gitSubcommand(["-C", "dir", "--no-pager", "status", "-s"]), {
    sub: "status",
    rest: ["-s"],
  });
  assert.equal(gitStatusFormat(["--porcelain=v2"]), "porcelain_v2");
  assert.equal(gitStatusFormat(["-sb"]), "porcelain_v1");
  assert.equal(gitStatusFormat([]), "long");
  assert.equal(gitStatusFormat(["-v"]), undefined);
  assert.match(failed("auto", ["git log -p"], "").parse_error.message, /No parser matches/);
});

Deno.test("git status quoting (real): v2 with TAB-separated renames, -z records, long format", () => {
  const WEIRD = "café tab\tx.txt";
  const v2 = parsed(
    "git_status",
    ["git status --porcelain=v2"],
    fixture("git_status_porcelain_v2_quoted.txt"),
  ).parsed;
  assert.deepEqual(v2.untracked, [WEIRD]);
  const ren = v2.entries.find((e) => e.kind === "renamed")!;
  assert.deepEqual([ren.path, ren.orig_path], ["new name.txt", "old name.txt"]);
  const z = parsed(
    "git_status",
    ["git status --porcelain=v2 --branch -z"],
    fixture("git_status_porcelain_v2_z.bin"),
  ).parsed;
  assert.deepEqual([z.branch?.head, z.untracked, z.unstaged], ["main", [WEIRD], ["plain"]]);
  assert.equal(z.entries.find((e) => e.kind === "renamed")!.orig_path, "old name.txt");
  const long = parsed("git_status", ["git status"], fixture("git_status_plain_quoted.txt")).parsed;
  assert.deepEqual([long.staged, long.unstaged, long.untracked], [["new name.txt"], ["plain"], [
    WEIRD,
  ]]);
  assert.equal(long.entries[0]!.orig_path, "old name.txt");
});
