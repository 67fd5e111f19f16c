/**
 * Black-box: `termada top` in a real terminal (a detached tmux server of its own, 80×24) against
 * a real daemon in a temp home, with jobs and approvals an agent made over MCP; and the plain
 * snapshot it prints when stdout is not a terminal.
 */
import assert from "node:assert/strict";
import {
  call,
  DENO_ARGS,
  homeWithConfig,
  startDaemon,
  stdioClient,
  tempHome,
  termada,
} from "./_daemon.ts";

const CONFIRM_TOUCH = `policies:
  default:
    confirm: ["touch *"]
approvals:
  confirm_timeout_ms: 60000
`;

async function until<T>(
  what: string,
  f: () => Promise<T | undefined | false>,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const shq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * `termada top` in a detached tmux server of its own (its socket in a temp dir, so nothing is
 * left behind); dispose kills the server and removes the socket.
 */
class TmuxTop implements AsyncDisposable {
  readonly #dir = Deno.makeTempDirSync({ prefix: "termada-top-tmux-" });
  readonly socket = `${this.#dir}/tmux.sock`;
  #started = false;

  async start(home: string, size = { x: 80, y: 24 }): Promise<void> {
    const top = [Deno.execPath(), ...DENO_ARGS, "top"].map(shq).join(" ");
    // The exit status stays on the pane once top leaves the alternate screen.
    this.#started = true;
    await this.tmux(
      "new-session",
      "-d",
      "-s",
      "top",
      "-x",
      String(size.x),
      "-y",
      String(size.y),
      "-e",
      `TERMADA_HOME=${home}`,
      "-e",
      "NO_COLOR=1",
      `${top}; echo TOP-EXIT=$?; exec sleep 600`,
    );
  }

  async tmux(...args: string[]): Promise<string> {
    const out = await new Deno.Command("tmux", {
      args: ["-S", this.socket, ...args],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const dec = new TextDecoder();
    if (!out.success) throw new Error(`tmux ${args[0]}: ${dec.decode(out.stderr)}`);
    return dec.decode(out.stdout);
  }

  screen(): Promise<string> {
    return this.tmux("capture-pane", "-p", "-t", "top");
  }

  /** Polls the pane until `re` matches; returns the screen. */
  async waitFor(re: RegExp, what = String(re)): Promise<string> {
    let last = "";
    try {
      return await until(what, async () => {
        last = await this.screen();
        return re.test(last) ? last : undefined;
      });
    } catch (err) {
      throw new Error(`${(err as Error).message}; the screen:\n${last}`);
    }
  }

  keys(...keys: string[]): Promise<string> {
    return this.tmux("send-keys", "-t", "top", ...keys);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.#started) {
      await this.tmux("kill-server").catch(() => {
        // already gone
      });
    }
    await Deno.remove(this.#dir, { recursive: true });
  }
}

async function jobStatus(home: string, jobId: string): Promise<string | undefined> {
  const r = await termada(home, ["jobs", "--all", "--json"]);
  const jobs = JSON.parse(r.stdout) as { job_id: string; status: string }[];
  return jobs.find((j) => j.job_id === jobId)?.status;
}

function assertFits(screen: string, width: number): void {
  for (const line of screen.split("\n")) {
    assert.ok([...line].length <= width, `wider than ${width}: ${JSON.stringify(line)}`);
  }
}

Deno.test("top shows agents' jobs live in 80x24, follows a resize, and K kills the selected job", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;
    const first = await call(c, "exec_start", {
      session,
      command: ["sleep 30"],
      mode: "background",
    });
    await using top = new TmuxTop();
    await top.start(home);
    let screen = await top.waitFor(new RegExp(`${first.job_id}\\s+ci\\s+running`));
    assertFits(screen, 80);
    assert.match(screen, /^termada top {2}\d+\.\d+\.\d+ pid \d+/);
    assert.match(screen, new RegExp(`${session}\\s+ci`));
    assert.match(screen, /^q quit/m);

    // Started after top: the event stream brings it, listed first (the newest active job),
    // and the selection stays on the job it was on.
    const second = await call(c, "exec_start", {
      session,
      command: ["sleep 31"],
      mode: "background",
    });
    screen = await top.waitFor(
      new RegExp(`^ +${second.job_id}\\s+ci\\s+running.*\\n> +${first.job_id}`, "m"),
    );
    assert.match(screen, /job\.requested/);
    await top.keys("k");
    await top.waitFor(new RegExp(`> +${second.job_id}`));
    await top.keys("Down");
    await top.waitFor(new RegExp(`> +${first.job_id}`));

    await top.tmux("resize-window", "-t", "top", "-x", "60", "-y", "20");
    await until("a 60-column layout", async () => {
      screen = await top.screen();
      const lines = screen.trimEnd().split("\n");
      return lines.length === 20 && lines.at(-1)!.startsWith("q quit");
    });
    assertFits(screen, 60);

    await top.keys("K");
    await until(
      "the job to be killed",
      async () => (await jobStatus(home, first.job_id as string)) === "killed",
    );
    await top.waitFor(new RegExp(`Killed ${first.job_id}`));
    assert.equal(await jobStatus(home, second.job_id as string), "running");

    await top.keys("q");
    screen = await top.waitFor(/TOP-EXIT=\d+/);
    assert.match(screen, /TOP-EXIT=0/);
    assert.doesNotMatch(screen, /JOBS/, "the alternate screen is gone");
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("top approves the selected approval with a, and d denies with a typed reason", async () => {
  const home = await homeWithConfig(CONFIRM_TOUCH);
  const work = await Deno.makeTempDir();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "dev"]);
    const asked = await call(c, "exec_run", { command: [`touch ${work}/approved`] });
    assert.equal(asked.status, "pending_approval");
    await using top = new TmuxTop();
    await top.start(home);
    await top.waitFor(new RegExp(`${asked.approval_id}\\s+dev\\s+.*touch`));
    await top.keys("a");
    const done = await call(c, "exec_wait", { job_id: asked.job_id, timeout_ms: 15_000 });
    assert.equal(done.status, "exited");
    Deno.statSync(`${work}/approved`);
    await top.waitFor(new RegExp(`Approved ${asked.approval_id}`));
    await top.waitFor(/APPROVALS 0/);

    const again = await call(c, "exec_run", { command: [`touch ${work}/denied`] });
    await top.waitFor(new RegExp(`${again.approval_id}\\s+dev`));
    await top.keys("d");
    await top.waitFor(new RegExp(`^Deny ${again.approval_id}, reason`, "m"));
    await top.keys("-l", "not today");
    await top.keys("Enter");
    const denied = await call(c, "exec_wait", { job_id: again.job_id, timeout_ms: 15_000 });
    assert.equal(denied.status, "denied");
    assert.match(String(denied.reason), /not today/);
    assert.throws(() => Deno.statSync(`${work}/denied`), Deno.errors.NotFound);
    await top.keys("C-c");
    assert.match(await top.waitFor(/TOP-EXIT=\d+/), /TOP-EXIT=0/);
  } finally {
    await Deno.remove(work, { recursive: true });
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("S in top asks y/N; n keeps jobs running, y stops them all", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;
    const job = await call(c, "exec_start", { session, command: ["sleep 30"], mode: "background" });
    await using top = new TmuxTop();
    await top.start(home);
    await top.waitFor(new RegExp(`${job.job_id}\\s+ci\\s+running`));
    await top.keys("S");
    await top.waitFor(/\[y\/N\]/);
    await top.keys("n");
    await top.waitFor(/Stop all cancelled/);
    assert.equal(await jobStatus(home, job.job_id as string), "running");
    await top.keys("S");
    await top.waitFor(/\[y\/N\]/);
    await top.keys("y");
    await top.waitFor(/Stopped 1 job\(s\)/);
    assert.equal(await jobStatus(home, job.job_id as string), "killed");
    await top.waitFor(/STOPPED/);
    const status = await termada(home, ["status"]);
    assert.match(status.stdout, /^Admissions:\s+stopped/m);
    await top.keys("q");
    await top.waitFor(/TOP-EXIT=0/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("top exits 1 with a clear message when the daemon stops under it", async () => {
  const home = await tempHome();
  try {
    const d = await startDaemon(home);
    try {
      await using top = new TmuxTop();
      await top.start(home);
      await top.waitFor(/^q quit/m);
      assert.equal(await d.stop(), 0);
      const screen = await top.waitFor(/TOP-EXIT=\d+/);
      assert.match(screen, /TOP-EXIT=1/);
      assert.match(screen, /SERVER_UNREACHABLE: The daemon closed the event stream/);
    } finally {
      await d.stop();
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("top without a terminal prints one snapshot (plain or --json); --help; no daemon is exit 1", async () => {
  const home = await homeWithConfig(CONFIRM_TOUCH);
  try {
    {
      await using _d = await startDaemon(home);
      await using c = await stdioClient(home, ["--agent", "dev"]);
      const session = (await call(c, "session_create", {})).session_id as string;
      const job = await call(c, "exec_start", {
        session,
        command: ["sleep 30"],
        mode: "background",
      });
      const asked = await call(c, "exec_run", { command: ["touch /nonexistent/x"] });

      const plain = await termada(home, ["top"]);
      assert.equal(plain.code, 0, plain.stderr);
      assert.match(plain.stdout, /^termada \d+\.\d+\.\d+ {2}pid \d+ {2}admissions open$/m);
      assert.match(
        plain.stdout,
        new RegExp(`^Sessions \\(\\d+\\)$[\\s\\S]*^${session}\\s+dev`, "m"),
      );
      assert.match(
        plain.stdout,
        new RegExp(`^${job.job_id}\\s+dev\\s+running\\s+\\S+\\s+sleep 30$`, "m"),
      );
      assert.match(
        plain.stdout,
        new RegExp(`^Approvals \\(1\\)$[\\s\\S]*^${asked.approval_id}\\s+dev`, "m"),
      );
      assert.ok(!plain.stdout.includes("\x1b"), "no escape sequences");

      const json = await termada(home, ["top", "--json"]);
      assert.equal(json.code, 0, json.stderr);
      const snap = JSON.parse(json.stdout);
      assert.equal(snap.status.pending_approvals, 1);
      assert.ok(snap.jobs.some((j: { job_id: string }) => j.job_id === job.job_id));
      assert.equal(snap.approvals[0].approval_id, asked.approval_id);
      assert.ok(snap.sessions.some((s: { session_id: string }) => s.session_id === session));
    }
    const help = await termada(home, ["top", "--help"]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: termada top/);
    const bad = await termada(home, ["top", "--frobnicate"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /INVALID_ARGUMENT: Unknown option "--frobnicate"/);
    const gone = await termada(home, ["top"]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /SERVER_UNREACHABLE: No Termada daemon is running/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
