/**
 * Black-box: an agent drives full-screen programs through MCP like a person at a terminal —
 * real vi (edit and save a file), less, top and a python3 curses program — with exec_write keys
 * and session_screen since; and what it types into a running job never outlives the job as a
 * command of the session's shell.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { call, homeWithConfig, startDaemon, stdioClient, tempHome } from "./_daemon.ts";

type S = Record<string, unknown>;

async function until<T>(what: string, f: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const screen = (c: Client, session: string, since?: string) =>
  call(c, "session_screen", { session_id: session, ...(since ? { since } : {}) });

/** The screen once `test` holds for its text. */
function screenWhere(c: Client, session: string, test: (text: string, s: S) => boolean) {
  return until("the screen", async () => {
    const s = await screen(c, session);
    return test((s.lines as string[]).join("\n"), s) ? s : undefined;
  });
}

async function exited(c: Client, job: string): Promise<S> {
  const r = await call(c, "exec_wait", { job_id: job, until: { exit: true }, timeout_ms: 15_000 });
  assert.equal(r.matched, "exit", JSON.stringify(r));
  return r;
}

Deno.test("an agent drives real full-screen programs with keys and reads only what changed", async (t) => {
  const home = await tempHome();
  const work = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-drive-" }));
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const s = (await call(c, "session_create", { cwd: work, cols: 80, rows: 24 }))
      .session_id as string;

    await t.step("vi: insert text, Escape, :wq, Enter saves the file", async () => {
      const job = (await call(c, "exec_start", { session: s, command: ["vi -u NONE notes.txt"] }))
        .job_id as string;
      await screenWhere(c, s, (_, x) => x.alternate === true);
      await call(c, "exec_write", {
        job_id: job,
        keys: ["i", "hello from termada", "Escape", ":wq", "Enter"],
      });
      await exited(c, job);
      assert.equal(await Deno.readTextFile(`${work}/notes.txt`), "hello from termada\n");
    });

    await t.step("less: G jumps to the end, only changed rows come back, q quits", async () => {
      await Deno.writeTextFile(
        `${work}/long.txt`,
        Array.from({ length: 200 }, (_, i) => `line ${i + 1}`).join("\n") + "\n",
      );
      const job = (await call(c, "exec_start", { session: s, command: ["less long.txt"] }))
        .job_id as string;
      const first = await screenWhere(c, s, (text) => text.includes("line 1\n"));
      assert.equal(first.full, true);
      const quiet = await screen(c, s, first.next_cursor as string);
      assert.equal(quiet.full, false);
      assert.deepEqual(quiet.changes, [], "nothing changed: nothing comes back");
      await call(c, "exec_write", { job_id: job, keys: ["G"] });
      const moved = await until("the end of the file", async () => {
        const r = await screen(c, s, first.next_cursor as string);
        const changes = (r.changes ?? []) as { row: number; text: string }[];
        return changes.some((x) => x.text.includes("line 200")) ? r : undefined;
      });
      assert.equal(moved.full, false);
      await call(c, "exec_write", { job_id: job, keys: ["q"] });
      await exited(c, job);
    });

    await t.step("top never waits at a prompt, and still takes q", async () => {
      const job = (await call(c, "exec_start", { session: s, command: ["top -d 1"] }))
        .job_id as string;
      await screenWhere(c, s, (text) => /load average/i.test(text));
      const st = await call(c, "exec_poll", { job_id: job });
      assert.equal(st.status, "running");
      await call(c, "exec_write", { job_id: job, keys: ["q"] });
      await exited(c, job);
    });

    await t.step(
      "a python3 curses program gets arrow keys in application cursor mode",
      async () => {
        await Deno.writeTextFile(
          `${work}/keys.py`,
          `import curses
def main(w):
    w.keypad(True)
    w.addstr(1, 0, "ready for keys")
    w.refresh()
    got = []
    while True:
        k = w.getch()
        if k == ord("q"):
            break
        got.append(curses.keyname(k).decode())
        w.addstr(0, 0, "got " + " ".join(got) + "   ")
        w.refresh()
    open("keys.out", "w").write(" ".join(got) + "\\n")
curses.wrapper(main)
`,
        );
        const job = (await call(c, "exec_start", { session: s, command: ["python3 keys.py"] }))
          .job_id as string;
        // Keys sent while a launcher script (pyenv's shim is bash) still runs are refused as
        // editing keys into a shell: wait for the program itself.
        const ready = await screenWhere(c, s, (text) => text.includes("ready for keys"));
        assert.equal((ready.modes as { application_cursor: boolean }).application_cursor, true);
        const w = await c.callTool({
          name: "exec_write",
          arguments: { job_id: job, keys: ["Up", "Down", "F2", "x"] },
        });
        assert.equal(w.isError, undefined, JSON.stringify(w.structuredContent));
        await screenWhere(c, s, (text) => text.includes("got KEY_UP KEY_DOWN KEY_F(2) x"));
        await call(c, "exec_write", { job_id: job, keys: ["q"] });
        await exited(c, job);
        assert.equal(await Deno.readTextFile(`${work}/keys.out`), "KEY_UP KEY_DOWN KEY_F(2) x\n");
      },
    );
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

Deno.test("what a job did not read never runs as a command of the session's shell", async (t) => {
  const home = await tempHome();
  const work = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-typeahead-" }));
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    for (const shell of ["bash", "zsh"]) {
      if (shell === "zsh" && !(await onPath("zsh"))) continue;
      await t.step(
        `${shell}: whole lines and a partial one typed during sleep are dropped`,
        async () => {
          const s = (await call(c, "session_create", { cwd: work, shell })).session_id as string;
          const job = (await call(c, "exec_start", { session: s, command: ["sleep 1"] }))
            .job_id as string;
          await call(c, "exec_write", { job_id: job, input: `touch CANARY-${shell}-1` });
          await call(c, "exec_write", { job_id: job, input: `touch CANARY-${shell}-2` });
          await call(c, "exec_write", {
            job_id: job,
            input: `touch CANARY-${shell}-3 #`,
            append_newline: false,
          });
          await exited(c, job);
          const next = await call(c, "exec_run", {
            session: s,
            command: ["echo next-command-ran"],
          });
          assert.equal(next.exit_code, 0, JSON.stringify(next));
          assert.match(String(next.output), /next-command-ran/);
          const left = [...Deno.readDirSync(work)].map((e) => e.name).filter((n) =>
            n.startsWith("CANARY")
          );
          assert.deepEqual(left, [], "no typed-ahead line ran");
          await call(c, "session_close", { session_id: s });
        },
      );
    }
    await t.step("sh cannot drop type-ahead: writing to its running job is refused", async () => {
      const s = (await call(c, "session_create", { cwd: work, shell: "sh" })).session_id as string;
      const job = (await call(c, "exec_start", { session: s, command: ["sleep 1"] }))
        .job_id as string;
      const r = await c.callTool({ name: "exec_write", arguments: { job_id: job, input: "x" } });
      assert.equal(r.isError, true);
      assert.equal(
        (r.structuredContent as { error: { code: string } }).error.code,
        "NOT_AWAITING_INPUT",
      );
      await exited(c, job);
    });
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

Deno.test("a line typed into a running job that holds a shell is a command for the policy", async () => {
  const home = await homeWithConfig(`policies:
  default:
    deny: ["rm *"]
`);
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const s = (await call(c, "session_create", {})).session_id as string;
    const job = (await call(c, "exec_start", {
      session: s,
      command: ["bash -c 'sleep 2; read -r line; echo \"got $line\"'"],
    })).job_id as string;
    const denied = await c.callTool({
      name: "exec_write",
      arguments: { job_id: job, input: "rm -rf /tmp/termada-nothing" },
    });
    assert.equal(denied.isError, true, JSON.stringify(denied));
    assert.equal(
      (denied.structuredContent as { error: { code: string } }).error.code,
      "DENIED_BY_POLICY",
    );
    const edit = await c.callTool({
      name: "exec_write",
      arguments: { job_id: job, keys: ["echo", "Up", "Enter"] },
    });
    assert.equal(edit.isError, true, "editing keys into a shell are refused");
    await call(c, "exec_write", { job_id: job, input: "hello" });
    const r = await exited(c, job);
    assert.match(String(r.output), /got hello/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

async function onPath(name: string): Promise<boolean> {
  const r = await new Deno.Command("sh", { args: ["-c", `command -v ${name}`], stdout: "null" })
    .output();
  return r.success;
}
