/**
 * Black-box: the operator's day-to-day commands (`termada status | jobs | sessions | logs | kill
 * | daemon stop`) against a real daemon in a temp home, with jobs an agent started over MCP.
 */
import assert from "node:assert/strict";
import {
  call,
  DENO_ARGS,
  startDaemon,
  stdioClient,
  tempHome,
  termada,
  termadaEnv,
} from "./_daemon.ts";
import { COMMAND_NAMES } from "../src/cli/mod.ts";

/** Runs `f` over `items`, at most `n` at a time (each item spawns a Deno). */
async function pool<T>(items: T[], n: number, f: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await f(item);
    }),
  );
}

async function until(what: string, f: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

Deno.test("status, jobs, sessions, logs and kill show and steer an agent's jobs", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;
    const done = await call(c, "exec_run", { command: ["echo", "first-output"] });
    assert.equal(done.status, "exited");
    const bg = await call(c, "exec_start", { session, command: ["sleep 30"], mode: "background" });
    const jobId = bg.job_id as string;

    await t_status(home);
    const jobs = await termada(home, ["jobs"]);
    assert.equal(jobs.code, 0, jobs.stderr);
    assert.match(jobs.stdout, /^ID\s+AGENT\s+STATUS\s+SESSION\s+STARTED\s+COMMAND$/m);
    assert.match(
      jobs.stdout,
      new RegExp(`^${jobId}\\s+ci\\s+running\\s+${session}.*sleep 30$`, "m"),
    );
    assert.doesNotMatch(jobs.stdout, new RegExp(done.job_id as string));
    const all = await termada(home, ["jobs", "--all", "--json"]);
    const listed = JSON.parse(all.stdout) as { job_id: string; status: string }[];
    assert.equal(listed.find((j) => j.job_id === done.job_id)?.status, "exited");

    const sessions = await termada(home, ["sessions"]);
    assert.equal(sessions.code, 0, sessions.stderr);
    assert.match(sessions.stdout, new RegExp(`^${session}\\s+ci\\s+`, "m"));

    const logs = await termada(home, ["logs", done.job_id as string]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /first-output/);

    const kill = await termada(home, ["kill", jobId, "--grace-ms", "200"]);
    assert.equal(kill.code, 0, kill.stderr);
    assert.match(kill.stdout, new RegExp(`^${jobId}: killed`));
    const after = await termada(home, ["jobs"]);
    assert.doesNotMatch(after.stdout, new RegExp(jobId));
    assert.equal((await termada(home, ["kill", "job_nosuchjob"])).code, 1);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

async function t_status(home: string): Promise<void> {
  const s = await termada(home, ["status"]);
  assert.equal(s.code, 0, s.stderr);
  assert.match(s.stdout, /^termada \d+\.\d+\.\d+ {2}pid \d+ {2}port \d+ {2}up \d+s$/m);
  assert.match(s.stdout, /^Sessions:\s+2$/m);
  assert.match(s.stdout, /^Active jobs:\s+1$/m);
  assert.match(s.stdout, /^Pending approvals:\s+0$/m);
  assert.match(s.stdout, /^Admissions:\s+open$/m);
  assert.match(s.stdout, /^Audit log:\s+healthy$/m);
  assert.match(s.stdout, /^Exec gate:\s+(on|off)/m);
  const j = JSON.parse((await termada(home, ["status", "--json"])).stdout);
  assert.equal(j.active_jobs, 1);
  assert.equal(typeof j.boundary.exec_gate.active, "boolean");
}

Deno.test("logs -f follows a job's output until it ends, and jobs -f re-lists as jobs change", async () => {
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;

    // jobs -f: stdin held open, closed at the end to stop it.
    const follow = new Deno.Command(Deno.execPath(), {
      args: [...DENO_ARGS, "jobs", "-f"],
      env: termadaEnv(home),
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const dec = new TextDecoder();
    let followed = "";
    const pump = (async () => {
      for await (const chunk of follow.stdout) followed += dec.decode(chunk, { stream: true });
    })();
    await until("the first listing", () => Promise.resolve(/No jobs\./.test(followed)));

    const bg = await call(c, "exec_start", {
      session,
      command: ["for i in 1 2 3 4 5; do echo tick-$i; sleep 0.2; done"],
      mode: "background",
    });
    const jobId = bg.job_id as string;
    const t0 = Date.now();
    const logs = await termada(home, ["logs", jobId, "-f"]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.match(logs.stdout, /tick-1[\s\S]*tick-5/);
    assert.ok(Date.now() - t0 >= 500, "logs -f returned before the job ended");
    await until("the follower to show the job", () => Promise.resolve(followed.includes(jobId)));

    await follow.stdin.close();
    const st = await follow.status;
    await pump;
    await follow.stderr.cancel();
    assert.equal(st.code, 0);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("every operator command has --help, and an unknown flag is a usage error naming it", async () => {
  const home = await tempHome();
  try {
    // Every command of the CLI's table, so a new one cannot skip this.
    const commands = COMMAND_NAMES.filter((n) => n !== "help").map((n) => [n]);
    assert.ok(commands.length >= 29, commands.join(" "));
    await pool(commands, 4, async ([name]) => {
      const h = await termada(home, [name!, "--help"]);
      assert.equal(h.code, 0, `${name} --help: ${h.stderr}`);
      assert.match(h.stdout, new RegExp(`^Usage: termada ${name}`), name);
      const bad = await termada(home, [name!, "--frobnicate"]);
      assert.equal(bad.code, 2, `${name} --frobnicate`);
      assert.match(bad.stderr, /INVALID_ARGUMENT: Unknown option "--frobnicate"/, name);
    });
    const extra = await termada(home, ["status", "extra"]);
    assert.equal(extra.code, 2);
    assert.match(extra.stderr, /Unexpected argument "extra"/);
    const noJob = await termada(home, ["logs"]);
    assert.equal(noJob.code, 2);
    assert.match(noJob.stderr, /Which job\?/);
    const help = await termada(home, ["help"]);
    for (const line of help.stdout.split("\n")) assert.ok(line.length <= 100, line);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("with no daemon every new command says none is running (exit 1)", async () => {
  const home = await tempHome();
  try {
    // A daemon ran here once (so the token exists) and is gone.
    const d = await startDaemon(home);
    await d.stop();
    for (
      const args of [["status"], ["jobs"], ["sessions"], ["logs", "job_x"], ["kill", "job_x"], [
        "daemon",
        "stop",
      ]]
    ) {
      const r = await termada(home, args);
      assert.equal(r.code, 1, args.join(" "));
      assert.match(r.stderr, /SERVER_UNREACHABLE: No Termada daemon is running/, args.join(" "));
      assert.match(r.stderr, /hint: Start it with termada serve/);
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

Deno.test("daemon stop stops the daemon and waits until it is gone", async () => {
  const home = await tempHome();
  try {
    await using d = await startDaemon(home);
    const r = await termada(home, ["daemon", "stop"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "Stopped\n");
    const st = await d.proc.status;
    assert.equal(st.code, 0);
    assert.match(d.stderr(), /stopped by an operator/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
