import assert from "node:assert/strict";
import { aliveAfterGc } from "../shared/_test_gc.ts";
import { LauncherCode } from "../sandbox/mod.ts";
import { pgrep, rejectsWith, testRuntime, until } from "./_test_util.ts";

const A = "agent-a";

Deno.test("exec_run reports exit codes 0, 1, 127 and 128+n", async (t) => {
  await using te = await testRuntime();
  const e = te.engine;
  await t.step("0 with output", async () => {
    const r = await e.run(A, { command: ["echo", "hello world"] });
    assert.equal(r.status, "exited");
    assert.equal(r.exit_code, 0);
    assert.equal(r.output, "hello world\n");
    assert.equal(r.has_more, false);
  });
  await t.step("1", async () => {
    const r = await e.run(A, { command: ["false"] });
    assert.equal(r.exit_code, 1);
  });
  await t.step("127 for a missing program", async () => {
    const r = await e.run(A, { command: ["definitely-not-a-program-xyz"] });
    assert.equal(r.exit_code, 127);
    assert.match(r.output, /not found/);
  });
  await t.step("128+9 for a program killed by SIGKILL", async () => {
    const r = await e.run(A, { command: ["sh -c 'kill -9 $$'"] });
    assert.equal(r.exit_code, 137);
    assert.equal(r.status, "exited");
  });
});

Deno.test("a session keeps cwd, env, functions and a venv between commands", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  await Deno.mkdir(`${te.dir}/proj/venv/bin`, { recursive: true });
  await Deno.writeTextFile(
    `${te.dir}/proj/venv/bin/activate`,
    'export VIRTUAL_ENV="$PWD/venv"; PATH="$VIRTUAL_ENV/bin:$PATH"; PS1="(venv) $PS1"\n',
  );
  await Deno.writeTextFile(`${te.dir}/proj/venv/bin/whoisit`, "#!/bin/sh\necho venv-tool\n");
  await Deno.chmod(`${te.dir}/proj/venv/bin/whoisit`, 0o755);
  assert.equal((await e.run(A, { command: ["cd", "proj"] })).cwd, `${te.dir}/proj`);
  await e.run(A, { command: ["export FOO=bar"] });
  await e.run(A, { command: ['greet() { echo "hi $1"; }'] });
  await e.run(A, { command: ["source venv/bin/activate"] });
  const r = await e.run(A, {
    command: ['pwd; echo "$FOO"; greet you; whoisit; echo "$VIRTUAL_ENV"'],
  });
  assert.equal(
    r.output,
    `${te.dir}/proj\nbar\nhi you\nvenv-tool\n${te.dir}/proj/venv\n`,
  );
  assert.equal(r.cwd, `${te.dir}/proj`);
});

Deno.test("per-command cwd and env do not leak into the session", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const r = await e.run(A, {
    command: ["sh", "-c", 'pwd; echo "$ONLY"'],
    cwd: "/",
    env: { ONLY: "x y" },
  });
  assert.equal(r.output, "/\nx y\n");
  const after = await e.run(A, { command: ['pwd; echo "[$ONLY]"'] });
  assert.equal(after.output, `${te.dir}\n[]\n`);
});

Deno.test("argv words are passed exactly, control characters and newlines included", async () => {
  await using te = await testRuntime();
  const words = [
    "a b",
    "it's",
    "$HOME",
    "*",
    "tab\there",
    "line1\nline2",
    "back\\slash",
    "é✓😀",
    "-n",
    "\x01\x7f",
  ];
  const r = await te.engine.run(A, { command: ["printf", "[%s]\\n", ...words] });
  assert.equal(r.exit_code, 0);
  const expected = words.map((w) => `[${w.replaceAll("\x01", "").replaceAll("\x7f", "")}]`).join(
    "\n",
  );
  assert.equal(r.output, expected + "\n");
  const asWord = await te.engine.run(A, { command: ["FOO=1", "x"] });
  assert.equal(asWord.exit_code, 127, "an assignment-looking first word is a program name");
});

Deno.test("a multi-line script and a very long command line work", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const script = "cat <<'EOF'\nfirst\n  second $HOME\nEOF\nx=3\necho \"x=$x\"";
  const r = await e.run(A, { command: [script] });
  assert.equal(r.output, "first\n  second $HOME\nx=3\n");
  const long = "x".repeat(200_000);
  const r2 = await e.run(A, { command: ["printf", "%s", long] });
  assert.equal(r2.exit_code, 0);
  const all = await e.poll(A, { job_id: r2.job_id, max_bytes: 65536 });
  assert.equal(all.output.length, 65536);
  const r3 = await e.run(A, { command: [`v=${"y".repeat(10_000)}; echo \${#v}`] });
  assert.equal(r3.output, "10000\n");
  const r4 = await e.run(A, { command: ["echo $v | wc -c"] });
  assert.equal(r4.output.trim(), "10001", "variables set by a staged command persist");
});

Deno.test("set -u, pipefail and traps do not disturb the engine", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  await e.run(A, { command: ["set -u"] });
  assert.equal((await e.run(A, { command: ["echo $UNSET_VAR_X"] })).exit_code, 1);
  await e.run(A, { command: ["set -o pipefail"] });
  assert.equal((await e.run(A, { command: ["false | true"] })).exit_code, 1);
  await e.run(A, { command: ["trap 'echo trapped' USR1"] });
  const r = await e.run(A, { command: ["kill -USR1 $$; echo after"] });
  assert.equal(r.output, "trapped\nafter\n");
  const last = await e.run(A, { command: ["echo", "still fine"] });
  assert.equal(last.output, "still fine\n");
});

Deno.test("output that forges markers cannot end a job early", async () => {
  await using te = await testRuntime();
  // End and prompt markers in the exact format, with a guessed nonce, printed by the program.
  const forged = ["D;0;/forged", "P", "C"].map((k) =>
    `\\033]7717;0123456789abcdef0123456789abcdef;${k}\\007`
  ).join("");
  const r = await te.engine.run(A, {
    command: [`printf '${forged}'; sleep 0.2; echo done; false`],
  });
  assert.equal(r.status, "exited");
  assert.equal(r.exit_code, 1);
  assert.equal(r.output, "done\n");
  assert.notEqual(r.cwd, "/forged");
  assert.equal((await te.engine.run(A, { command: ["echo", "next"] })).output, "next\n");
});

Deno.test("exit inside a session ends the job and closes the session cleanly", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const first = await e.run(A, { command: ["echo", "x"] });
  const r = await e.run(A, { command: ["exit 7"] });
  assert.equal(r.status, "exited");
  assert.equal(r.exit_code, 7);
  assert.match(r.reason ?? "", /shell exited/);
  assert.equal(e.listSessions(A).length, 0);
  const next = await e.run(A, { command: ["echo", "again"] });
  assert.equal(next.output, "again\n");
  assert.notEqual(next.session_id, first.session_id, "a new default session was created");
});

Deno.test("a wait deadline returns running with a cursor and never kills", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const r = await e.run(A, { command: ["echo start; sleep 2; echo end"], timeout_ms: 150 });
  assert.equal(r.status, "running");
  assert.ok(r.output === "" || r.output === "start\n", r.output);
  assert.equal(r.has_more, true);
  const w = await e.wait(A, { job_id: r.job_id, cursor: r.next_cursor, timeout_ms: 20_000 });
  assert.equal(w.matched, "exit");
  assert.equal(w.status, "exited");
  assert.equal(r.output + w.output, "start\nend\n");
  assert.equal(w.has_more, false);
});

Deno.test("one job per session: a second run is SESSION_BUSY with the running job id", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const s = await e.start(A, { command: ["sleep 5"] });
  const err = await rejectsWith(() => e.run(A, { command: ["echo", "x"] }), "SESSION_BUSY");
  assert.equal((err as { details?: { job_id?: string } }).details?.job_id, s.job_id);
  const bg = await e.run(A, { command: ["echo", "beside"], mode: "background" });
  assert.equal(bg.output, "beside\n");
  await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
});

Deno.test("exec_poll pages with cursors and long-polls for new output", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const s = await e.start(A, { command: ["for i in 1 2 3; do echo line$i; sleep 0.15; done"] });
  let cursor: string | undefined;
  let text = "";
  for (let i = 0; i < 50; i++) {
    const p = await e.poll(A, { job_id: s.job_id, cursor, wait_ms: 2000 });
    text += p.output;
    cursor = p.next_cursor;
    if (!p.has_more) break;
  }
  assert.equal(text, "line1\nline2\nline3\n");
  await rejectsWith(() => e.poll(A, { job_id: s.job_id, cursor: "nonsense!" }), "INVALID_ARGUMENT");
  await rejectsWith(() => e.poll(A, { job_id: s.job_id, cursor: "c999999" }), "INVALID_ARGUMENT");
});

Deno.test("exec_wait until a pattern, a prompt or idle output", async (t) => {
  await using te = await testRuntime();
  const e = te.engine;
  await t.step("pattern", async () => {
    const s = await e.start(A, {
      command: ["echo booting; sleep 0.2; echo 'server ready on :8080'; sleep 5"],
    });
    const w = await e.wait(A, {
      job_id: s.job_id,
      until: { pattern: "ready on :(\\d+)" },
      timeout_ms: 5000,
    });
    assert.equal(w.matched, "pattern");
    assert.equal(w.match, "ready on :8080");
    assert.equal(w.status, "running");
    await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
  });
  await t.step("prompt", async () => {
    const s = await e.start(A, { command: ["sleep 0.2; read -p 'Continue? ' a; echo got-$a"] });
    const w = await e.wait(A, { job_id: s.job_id, until: { prompt: true }, timeout_ms: 5000 });
    assert.equal(w.matched, "prompt");
    assert.equal(w.prompt, "Continue? ");
    await e.write(A, { job_id: s.job_id, input: "yes" });
    const done = await e.wait(A, { job_id: s.job_id, timeout_ms: 5000 });
    assert.equal(done.output, "Continue? yes\ngot-yes\n");
  });
  await t.step("idle", async () => {
    const s = await e.start(A, { command: ["echo a; sleep 5"] });
    const w = await e.wait(A, { job_id: s.job_id, until: { idle_ms: 300 }, timeout_ms: 5000 });
    assert.equal(w.matched, "idle");
    await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
  });
  await t.step("timeout and a bad pattern", async () => {
    const s = await e.start(A, { command: ["sleep 5"] });
    const w = await e.wait(A, { job_id: s.job_id, until: { pattern: "never" }, timeout_ms: 100 });
    assert.equal(w.matched, "timeout");
    await rejectsWith(
      () => e.wait(A, { job_id: s.job_id, until: { pattern: "(" }, timeout_ms: 100 }),
      "INVALID_ARGUMENT",
    );
    await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
  });
});

Deno.test("a program that prints Password: and waits is awaiting input at once", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  await e.createSession(A); // warm-up: the shell start is not what is measured
  await e.run(A, { command: ["true"] });
  const r = await e.run(A, {
    command: [
      "python3",
      "-c",
      "import sys;sys.stdout.write('Password: ');sys.stdout.flush();sys.stdin.readline()",
    ],
    timeout_ms: 10_000,
  });
  assert.equal(r.status, "awaiting_input");
  assert.equal(r.prompt, "Password: ");
  assert.equal(r.input_detection, "kernel");
  await e.write(A, { job_id: r.job_id, input: "x" });
  assert.equal((await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 })).exit_code, 0);
});

Deno.test("a secret typed at read -s never appears in any output", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const secret = "s3cr3t-Hunter-42";
  const r = await e.run(A, {
    command: ['read -s -p "Password: " pw; echo; echo "you typed: $pw"; echo "$pw" >&2'],
    timeout_ms: 5000,
  });
  assert.equal(r.status, "awaiting_input");
  await e.write(A, { job_id: r.job_id, input: secret, secret: true });
  const done = await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  assert.equal(done.exit_code, 0);
  assert.ok(!done.output.includes(secret), done.output);
  assert.match(done.output, /you typed: \[REDACTED\]/);
  const session = e.sessionOf(A, r.session_id);
  const raw = new TextDecoder().decode(session.ring.snapshot());
  assert.ok(!raw.includes(secret), "raw ring");
  const screen = await e.screen(A, { session_id: r.session_id });
  assert.ok(!screen.lines.join("\n").includes(secret), "screen");
  await e.closeSession(A, { session_id: r.session_id });
  for await (const f of Deno.readDir(`${te.dir}/recordings`)) {
    const text = await Deno.readTextFile(`${te.dir}/recordings/${f.name}`);
    assert.ok(!text.includes(secret), "recording");
    assert.match(text, /REDACTED/);
  }
});

Deno.test("a token printed in two writes with a pause, or a value drawn over, shows in no read", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const token = "ghp_" + "Q9w8E7r6T5y4U3i2O1p0".repeat(2);
  const r = await e.run(A, {
    command: [
      `printf 'export GH=${token.slice(0, 22)}'; sleep 1; printf '${token.slice(22)}\\n'; ` +
      `printf 'token=abcdef123456\\rXXXXXX\\n'`,
    ],
    timeout_ms: 300,
  });
  assert.equal(r.status, "running");
  // The reader has waited past the idle commit: the partial line went out, the token's start did not.
  const mid = await e.poll(A, { job_id: r.job_id, cursor: r.next_cursor, wait_ms: 300 });
  const done = await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 });
  const all = await e.poll(A, { job_id: r.job_id });
  assert.equal(done.exit_code, 0);
  for (const text of [r.output, r.prompt ?? "", mid.output, done.output, all.output]) {
    assert.ok(!text.includes(token.slice(4, 22)), text);
    assert.ok(!text.includes("abcdef"), text);
  }
  assert.match(all.output, /^export GH=\[REDACTED\]+\nXXXXXX\*+\n$/);
});

Deno.test("tokens in bulk output are masked in the raw ring and the recording wherever the reads cut them", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const lines: string[] = [];
  for (let i = 0; i < 3000; i++) {
    lines.push(`line ${i} ghp_${String(i).padStart(6, "0")}${"Kq7".repeat(11)} end`);
  }
  await Deno.writeTextFile(`${te.dir}/tokens.txt`, lines.join("\n") + "\n");
  const r = await e.run(A, { command: ["cat", `${te.dir}/tokens.txt`], timeout_ms: 20_000 });
  assert.equal(r.exit_code, 0);
  const leak = /ghp_\d{4}/;
  const session = e.sessionOf(A, r.session_id);
  const raw = new TextDecoder().decode(session.ring.snapshot());
  assert.ok(raw.includes("line 2999 [REDACTED] end"), "the ring holds the end of the output");
  assert.equal(leak.exec(raw)?.[0], undefined, "raw ring");
  const all = await e.poll(A, { job_id: r.job_id });
  assert.equal(leak.exec(all.output)?.[0], undefined, "job output");
  await e.closeSession(A, { session_id: r.session_id });
  for await (const f of Deno.readDir(`${te.dir}/recordings`)) {
    const text = await Deno.readTextFile(`${te.dir}/recordings/${f.name}`);
    assert.equal(leak.exec(text)?.[0], undefined, "recording");
  }
});

Deno.test("a launcher file changed since the daemon started refuses every launch, and says why", async () => {
  const dir = await Deno.makeTempDir({ prefix: "termada-pin-" });
  const file = `${dir}/launcher_main.ts`;
  await Deno.writeTextFile(file, "// the launcher\n");
  try {
    await using te = await testRuntime({
      engine: {
        sandbox: { mode: "auto", hide: [], launcherCode: () => LauncherCode.of([file]) },
      },
    });
    const e = te.engine;
    assert.equal((await e.run(A, { command: ["echo", "ok"] })).exit_code, 0);
    // What a session of the daemon's user could do to a binary or checkout it owns.
    await Deno.writeTextFile(file, "// rewritten\n");
    await rejectsWith(() => e.createSession(A), "INTERNAL");
    const err = await e.createSession(A).catch((x) => x);
    assert.match(String(err.message), /changed since the daemon started/);
    await rejectsWith(() => e.run(A, { command: ["echo", "x"], mode: "background" }), "INTERNAL");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec_write types into a running job, and is refused once it has ended", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const s = await e.start(A, { command: ["sleep 5"] });
  assert.equal((await e.write(A, { job_id: s.job_id, input: "x" })).ok, true);
  await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
  await rejectsWith(() => e.write(A, { job_id: s.job_id, input: "x" }), "NOT_AWAITING_INPUT");
});

Deno.test("Ctrl-C (exec_signal INT) stops sleep and the session stays usable", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const s = await e.start(A, { command: ["sleep 30"] });
  await e.wait(A, { job_id: s.job_id, until: { idle_ms: 100 }, timeout_ms: 2000 });
  assert.equal(e.signal(A, { job_id: s.job_id, signal: "INT" }).ok, true);
  const w = await e.wait(A, { job_id: s.job_id, timeout_ms: 5000 });
  assert.equal(w.status, "exited");
  assert.equal(w.exit_code, 130);
  assert.equal((await e.run(A, { command: ["echo", "ok"] })).output, "ok\n");
});

Deno.test("exec_kill ends a tree with background grandchildren; none survive", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const tag = `tm-kill-${crypto.randomUUID().slice(0, 8)}`;
  const s = await e.start(A, {
    command: [
      `bash -c 'trap "" INT TERM; (exec -a ${tag}-a sleep 300) & (exec -a ${tag}-b sleep 300) & setsid bash -c "exec -a ${tag}-c sleep 300" & wait'`,
    ],
  });
  const mine = () => pgrep(`^${tag}-`);
  for (let i = 0; i < 100 && mine().length < 3; i++) {
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(mine().length, 3);
  const k = await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
  assert.equal(k.status, "killed");
  assert.equal(k.signal, "KILL");
  for (let i = 0; i < 50 && mine().length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(mine(), []);
  assert.equal((await e.run(A, { command: ["echo", "alive"] })).output, "alive\n");
});

Deno.test("an operator's resize is seen by stty size", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const ses = await e.createSession(A, { cols: 100, rows: 30 });
  assert.equal(
    (await e.run(A, { command: ["stty", "size"], session: ses.session_id })).output,
    "30 100\n",
  );
  te.ops.resize({ kind: "operator", id: "test" }, ses.session_id, 132, 43);
  assert.equal(
    (await e.run(A, { command: ["stty", "size"], session: ses.session_id })).output,
    "43 132\n",
  );
});

Deno.test("progress bars and colours are cleaned", async () => {
  await using te = await testRuntime();
  const r = await te.engine.run(A, {
    command: [
      "printf '\\033[1;32mgreen\\033[0m plain\\n'; for i in 10 50 100; do printf '\\rprogress %3d%%\\033[K' $i; done; printf '\\n\\033]0;title\\007done\\n'",
    ],
  });
  assert.equal(r.output, "green plain\nprogress 100%\ndone\n");
});

Deno.test("multibyte text split across reads comes out intact", async () => {
  await using te = await testRuntime();
  const r = await te.engine.run(A, {
    command: [
      "python3",
      "-c",
      `
import os, time
data = ("héllo wörld ✓ 😀 " * 400).encode()
for i in range(0, len(data), 7):
    os.write(1, data[i:i+7])
print()
`,
    ],
  });
  assert.equal(r.exit_code, 0);
  const all = await te.engine.poll(A, { job_id: r.job_id, max_bytes: 65536 });
  assert.equal(all.output, "héllo wörld ✓ 😀 ".repeat(400) + "\n");
});

Deno.test("50 MB of output is bounded with a gap and exact paging", async () => {
  await using te = await testRuntime({ engine: { output: { retentionBytes: 8 * 1024 * 1024 } } });
  const e = te.engine;
  // 50 MB of numbered 100-byte lines so every page can be checked exactly.
  const r = await e.run(A, {
    command: ["awk 'BEGIN { for (i = 0; i < 500000; i++) printf \"%099d\\n\", i }'"],
    timeout_ms: 120_000,
  });
  assert.equal(r.status, "exited");
  assert.equal(r.omitted_bytes, 50_000_000 - 8192 - 8192);
  assert.equal(r.output.slice(0, 100), "0".repeat(99) + "\n");
  assert.ok(r.tail?.endsWith("0".repeat(93) + "499999\n"));
  // Paging on from the head: the pinned head first, then one explicit gap, then the retained
  // last 8 MiB, byte for byte.
  const expected = (from: number, to: number) => {
    let out = "";
    for (let line = Math.floor(from / 100); line * 100 < to; line++) {
      out += String(line).padStart(99, "0") + "\n";
    }
    const first = Math.floor(from / 100) * 100;
    return out.slice(from - first, to - first);
  };
  const gapTo = 50_000_000 - 8 * 1024 * 1024;
  let before = "";
  let after = "";
  let gaps = 0;
  let cursor: string | undefined = r.next_cursor;
  for (;;) {
    const p = await e.poll(A, { job_id: r.job_id, cursor });
    if (p.gap) {
      gaps++;
      assert.equal(p.gap.from_offset, 16 * 1024);
      assert.equal(p.gap.to_offset, gapTo);
      assert.equal(p.gap.dropped_bytes, gapTo - 16 * 1024);
    }
    if (gaps === 0) before += p.output;
    else after += p.output;
    cursor = p.next_cursor;
    if (!p.has_more) break;
  }
  assert.equal(gaps, 1);
  assert.equal(before, expected(8192, 16 * 1024));
  assert.equal(after.length, 8 * 1024 * 1024);
  assert.ok(after === expected(gapTo, 50_000_000), "retained bytes page exactly");
});

Deno.test("bad input gets typed errors and the engine keeps working", async (t) => {
  await using te = await testRuntime();
  const e = te.engine;
  const cases: [string, unknown][] = [
    ["empty argv", { command: [] }],
    ["empty first word", { command: [""] }],
    ["NUL byte", { command: ["echo", "a\0b"] }],
    ["oversized word", { command: ["echo", "x".repeat(300_000)] }],
    ["oversized argv", { command: Array.from({ length: 5000 }, () => "x") }],
    ["not an array", { command: "echo hi" }],
    ["bad env name", { command: ["true"], env: { "A-B": "x" } }],
    ["timeout too long", { command: ["true"], timeout_ms: 10_000_000 }],
  ];
  for (const [name, input] of cases) {
    await t.step(name, async () => {
      await rejectsWith(() => e.run(A, input), "INVALID_ARGUMENT");
    });
  }
  await t.step("unknown ids", async () => {
    await rejectsWith(() => e.poll(A, { job_id: "job_nope" }), "NOT_FOUND");
    await rejectsWith(() => e.run(A, { command: ["true"], session: "ses_nope" }), "NOT_FOUND");
    await rejectsWith(() => e.closeSession(A, { session_id: "ses_nope" }), "NOT_FOUND");
    await rejectsWith(() => e.kill(A, { job_id: "../etc" }), "INVALID_ARGUMENT");
  });
  await t.step("oversized input", async () => {
    const r = await e.run(A, { command: ["read x"], timeout_ms: 5000 });
    await rejectsWith(
      () => e.write(A, { job_id: r.job_id, input: "x".repeat(70_000) }),
      "INVALID_ARGUMENT",
    );
    await rejectsWith(() => e.write(A, { job_id: r.job_id, input: "a\0" }), "INVALID_ARGUMENT");
    await e.write(A, { job_id: r.job_id, input: "fine" });
    assert.equal((await e.wait(A, { job_id: r.job_id, timeout_ms: 5000 })).exit_code, 0);
  });
  await t.step("missing program in background mode and bad cwd", async () => {
    await rejectsWith(
      () => e.run(A, { command: ["/no/such/prog", "x"], mode: "background" }),
      "INVALID_ARGUMENT",
    );
    await rejectsWith(() => e.createSession(A, { cwd: "/no/such/dir" }), "INVALID_ARGUMENT");
  });
  assert.equal((await e.run(A, { command: ["echo", "still working"] })).output, "still working\n");
});

Deno.test("agents see only their own sessions and jobs", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const r = await e.run("alice", { command: ["echo", "mine"] });
  await rejectsWith(() => e.poll("bob", { job_id: r.job_id }), "NOT_FOUND");
  await rejectsWith(() => e.run("bob", { command: ["true"], session: r.session_id }), "NOT_FOUND");
  await rejectsWith(() => e.closeSession("bob", { session_id: r.session_id }), "NOT_FOUND");
  assert.equal(e.listSessions("bob").length, 0);
  assert.equal(e.listJobs("bob").jobs.length, 0);
  assert.equal(e.listJobs("alice").jobs[0]?.job_id, r.job_id);
});

Deno.test("session quotas: per owner and in all", async () => {
  await using te = await testRuntime({
    engine: { limits: { sessionsPerOwner: 2, sessionsTotal: 3 } },
  });
  const e = te.engine;
  await e.createSession("a");
  await e.createSession("a");
  await rejectsWith(() => e.createSession("a"), "QUOTA_EXCEEDED");
  await e.createSession("b");
  await rejectsWith(() => e.createSession("c"), "QUOTA_EXCEEDED");
  const list = e.listSessions("a");
  await e.closeSession("a", { session_id: list[0]!.session_id });
  await e.createSession("a");
});

Deno.test("session_create/list/close and a running job ends as killed on close", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const ses = await e.createSession(A, { workspace: "repo", env: { MY_VAR: "v1" } });
  assert.equal(ses.shell, "bash");
  assert.equal(ses.workspace, "repo");
  assert.equal(
    (await e.run(A, { command: ["echo $MY_VAR"], session: ses.session_id })).output,
    "v1\n",
  );
  const s = await e.start(A, { command: ["sleep 30"], session: ses.session_id });
  const listed = e.listSessions(A).find((x) => x.session_id === ses.session_id);
  assert.equal(listed?.state, "busy");
  assert.equal(listed?.current_job_id, s.job_id);
  await e.closeSession(A, { session_id: ses.session_id });
  const j = await e.poll(A, { job_id: s.job_id });
  assert.equal(j.status, "killed");
  assert.equal(e.listSessions(A).length, 0);
  const list = e.listJobs(A, { filter: "all" }).jobs;
  assert.equal(list[0]?.job_id, s.job_id);
  assert.equal(e.listJobs(A, { filter: "active" }).jobs.length, 0);
});

const HAS_ZSH = new Deno.Command("sh", { args: ["-c", "command -v zsh"] }).outputSync().success;

Deno.test("zsh and sh sessions run commands with exact boundaries", async (t) => {
  await using te = await testRuntime();
  const e = te.engine;
  for (const shell of ["zsh", "sh"] as const) {
    // zsh is not on every machine: .ci/run installs it; elsewhere its step is reported ignored.
    await t.step({
      name: shell,
      ignore: shell === "zsh" && !HAS_ZSH,
      fn: async () => {
        const ses = await e.createSession(A, { shell });
        const session = ses.session_id;
        assert.equal((await e.run(A, { command: ["echo", "a b"], session })).output, "a b\n");
        assert.equal((await e.run(A, { command: ["false"], session })).exit_code, 1);
        await e.run(A, { command: ["cd /tmp"], session });
        const r = await e.run(A, { command: ["pwd; echo $((6*7))"], session });
        assert.equal(r.output, "/tmp\n42\n");
        assert.equal(r.cwd, "/tmp");
        const s = await e.start(A, { command: ["sleep 30"], session });
        await e.wait(A, { job_id: s.job_id, until: { idle_ms: 100 }, timeout_ms: 2000 });
        e.signal(A, { job_id: s.job_id, signal: "INT" });
        const w = await e.wait(A, { job_id: s.job_id, timeout_ms: 5000 });
        assert.equal(w.exit_code, 130);
        assert.equal((await e.run(A, { command: ["printf 'x\\ny'"], session })).output, "x\ny");
      },
    });
  }
});

Deno.test("50 concurrent sessions each run commands", async () => {
  await using te = await testRuntime({ engine: { limits: { sessionsPerOwner: 64 } } });
  const e = te.engine;
  const sessions = await Promise.all(Array.from({ length: 50 }, () => e.createSession(A)));
  const results = await Promise.all(sessions.map(async (s, i) => {
    const out: string[] = [];
    for (let k = 0; k < 3; k++) {
      const r = await e.run(A, { command: ["echo", `s${i}-${k}`], session: s.session_id });
      out.push(r.output);
    }
    return out.join("");
  }));
  results.forEach((r, i) => assert.equal(r, `s${i}-0\ns${i}-1\ns${i}-2\n`));
});

Deno.test("background jobs are argv-exact and report signals", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const r = await e.run(A, { command: ["printf", "%s|", "a b", "$HOME"], mode: "background" });
  assert.equal(r.output, "a b|$HOME|");
  assert.equal(r.exit_code, 0);
  const s = await e.start(A, { command: ["sleep", "30"], mode: "background" });
  const k = await e.kill(A, { job_id: s.job_id, grace_ms: 200 });
  assert.equal(k.status, "killed");
  assert.equal(k.signal, "INT");
  assert.equal(k.exit_code, 130);
});

Deno.test("opening and closing many sessions and jobs leaks no fds and no processes", async () => {
  const { childrenOf, countOpenFds } = await import("../pty/mod.ts");
  await using te = await testRuntime({ engine: { limits: { sessionsPerOwner: 64 } } });
  const e = te.engine;
  await e.run(A, { command: ["true"] }); // the first session opens libc and loads modules
  // Let fds of earlier tests (pipes of finished subprocesses) close before counting.
  const settled = async () => {
    let last = countOpenFds();
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 25));
      const now = countOpenFds();
      if (now === last) return now;
      last = now;
    }
    return last;
  };
  const before = await settled();
  const children = childrenOf(Deno.pid).length;
  for (let round = 0; round < 3; round++) {
    const sessions = await Promise.all(Array.from({ length: 20 }, () => e.createSession(A)));
    await Promise.all(
      sessions.map((s) => e.run(A, { command: ["echo", "x"], session: s.session_id })),
    );
    const bg = await e.start(A, { command: ["sleep", "30"], mode: "background" });
    await e.kill(A, { job_id: bg.job_id, grace_ms: 100 });
    await Promise.all(sessions.map((s) => e.closeSession(A, { session_id: s.session_id })));
  }
  // Never more than before (something unrelated may have closed meanwhile, never opened).
  assert.ok(await settled() <= before, `fds: ${countOpenFds()} now, ${before} before`);
  assert.equal(childrenOf(Deno.pid).length, children);
});

Deno.test("redaction patterns from the configuration mask job output and the raw ring", async () => {
  await using te = await testRuntime({ engine: { redactPatterns: ["corp-[0-9]{6}"] } });
  const r = await te.engine.run(A, { command: ["echo", "id corp-123456 end"] });
  assert.equal(r.output, "id [REDACTED] end\n");
  const raw = new TextDecoder().decode(te.engine.sessionOf(A, r.session_id).ring.snapshot());
  assert.ok(!raw.includes("corp-123456"));
});

Deno.test("a catastrophic pattern cannot stall the daemon: waits match in linear time", async () => {
  await using te = await testRuntime();
  const e = te.engine;
  const s = await e.start(A, { command: ["printf", "%s", "a".repeat(5000)] });
  await e.wait(A, { job_id: s.job_id, timeout_ms: 10_000 });
  // With a backtracking engine this pattern over 28 characters took seconds; over 5000, forever.
  const w = await e.wait(A, {
    job_id: s.job_id,
    until: { pattern: "^(a+)+b$" },
    timeout_ms: 200,
  });
  assert.equal(w.matched, "exit");
  const hit = await e.wait(A, {
    job_id: s.job_id,
    until: { pattern: "(a|aa)+$" },
    timeout_ms: 200,
  });
  assert.equal(hit.matched, "pattern");
  assert.equal(hit.match?.length, 5000);
  // Another agent's call is served meanwhile: nothing was blocked.
  assert.equal((await e.run("b", { command: ["echo", "free"] })).output, "free\n");
  await rejectsWith(
    () => e.wait(A, { job_id: s.job_id, until: { pattern: "(a)\\1" } }),
    "INVALID_ARGUMENT",
  );
  await rejectsWith(
    () => e.wait(A, { job_id: s.job_id, until: { pattern: "(?<=a)b" } }),
    "INVALID_ARGUMENT",
  );
});

Deno.test("a background job's cgroup goes when nothing of it is left (the kernel keeps no cgroup per job ever run)", async () => {
  await using te = await testRuntime({ engine: { sandbox: { mode: "auto", hide: [] } } });
  const e = te.engine;
  const cg = te.control.sandbox.report().cgroup;
  if (Deno.uid() === 0) assert.equal(cg.active, true, JSON.stringify(cg));
  if (!cg.active || !cg.root) return; // no writable cgroup v2 here: nothing to leak
  const root = cg.root;
  // Listed with find(1): Deno refuses to read /sys itself.
  const jobCgroups = () => {
    const o = new Deno.Command("find", {
      args: [root, "-mindepth", "1", "-maxdepth", "1", "-type", "d", "-name", "job_*"],
    }).outputSync();
    return new TextDecoder().decode(o.stdout).split("\n").filter(Boolean)
      .map((p) => p.slice(root.length + 1));
  };
  const until = async (what: string, ok: () => boolean) => {
    const deadline = Date.now() + 10_000;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${jobCgroups()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  for (let i = 0; i < 5; i++) {
    const r = await e.run(A, { command: ["echo", `bg${i}`], mode: "background" });
    assert.equal(r.output, `bg${i}\n`);
  }
  await until("the ended jobs' cgroups to go", () => jobCgroups().length === 0);

  // One whose child escaped (a double fork, setsid): while that child runs it is still the
  // job's, and so is its cgroup (the job's end may also have caught it: then both are gone) …
  const left = await e.run(A, {
    command: ["(setsid sleep 31 </dev/null >/dev/null 2>&1 &); echo started"],
    mode: "background",
  });
  assert.equal(left.status, "exited");
  await new Promise((r) => setTimeout(r, 300));
  // (If the child is gone by now its cgroup may still be there, empty: the kill below or the
  // registry's release removes it.)
  if (pgrep("^sleep 31$").length > 0) assert.deepEqual(jobCgroups(), [left.job_id]);
  // … until a kill of the finished job ends it: then the cgroup goes too.
  const killed = await e.kill(A, { job_id: left.job_id, grace_ms: 200 });
  assert.deepEqual(killed.survivors ?? [], [], JSON.stringify(killed));
  await until("the killed job's cgroup to go", () => jobCgroups().length === 0);
  assert.deepEqual(pgrep("^sleep 31$"), [], "the escaped child is gone");
});

/** Session watchers that stopped, weakly: made in a function of its own (no local keeps one). */
function watchAndStop(
  te: Awaited<ReturnType<typeof testRuntime>>,
  sessionId: string,
  n: number,
): WeakRef<object>[] {
  const refs: WeakRef<object>[] = [];
  for (let i = 0; i < n; i++) {
    const payload = { bytes: new Uint8Array(4096) };
    refs.push(new WeakRef(payload));
    const off = te.control.agents.watchSession(A, sessionId, () => void payload.bytes.length);
    off();
  }
  return refs;
}

Deno.test("a session watcher that stopped is not kept until the session closes", async () => {
  await using te = await testRuntime();
  const s = await te.engine.createSession(A, {});
  const refs = watchAndStop(te, s.session_id, 100);
  const alive = await aliveAfterGc(refs);
  assert.equal(alive, 0, `${alive} stopped watchers are still held by the open session`);
  // A watcher still on hears the close.
  let closed = false;
  te.control.agents.watchSession(A, s.session_id, (c) => closed ||= c);
  await te.engine.closeSession(A, { session_id: s.session_id });
  await until(() => closed, 5000, "the close to reach the watcher");
});
