/**
 * Black-box: `termada export | replay` and the recording routes against a real daemon, with a
 * session an agent ran a command in; the exported file is checked with the real `asciinema` CLI,
 * and the replay under a real terminal (tmux).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  call,
  DENO_ARGS,
  homeWithConfig,
  operatorFetch,
  startDaemon,
  stdioClient,
  tempHome,
  termada,
  termadaEnv,
} from "./_daemon.ts";

// The command prints the marker; its typed line (echoed by the shell) does not contain it.
const COMMAND = "echo replay-marker-$((100 + 23))";
const MARKER = "replay-marker-123";

async function until(what: string, f: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `termada …` in `cwd`. */
async function termadaIn(home: string, cwd: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...DENO_ARGS, ...args],
    env: termadaEnv(home),
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function run(cmd: string, args: string[], env: Record<string, string> = {}) {
  const out = await new Deno.Command(cmd, { args, env, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

const shq = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

Deno.test("an agent's session is exported, replayed and listed", async (t) => {
  const home = await tempHome();
  const work = await Deno.makeTempDir({ prefix: "termada-export-" });
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;
    const done = await call(c, "exec_run", { session, command: [COMMAND] });
    assert.equal(done.status, "exited");
    // The recorder writes in batches (25 ms): wait until the marker is on disk.
    await until("the marker in the recording", async () => {
      const r = await termada(home, ["export", session, "--out", "-"]);
      return r.code === 0 && r.stdout.includes(MARKER);
    });

    await t.step("export writes SESSION.cast that asciinema accepts", async () => {
      const r = await termadaIn(home, work, ["export", session]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^Wrote ${session}\\.cast \\(\\d+ bytes, 1 part, the`));
      const file = join(work, `${session}.cast`);
      assert.equal((Deno.statSync(file).mode ?? 0) & 0o777, 0o600);
      const lines = Deno.readTextFileSync(file).trimEnd().split("\n");
      assert.equal(JSON.parse(lines[0]!).version, 2);
      assert.equal(lines.filter((l) => l.startsWith("{")).length, 1, "one header");
      // asciinema 2.2 opens /dev/tty even for `cat`: both run in a real terminal (tmux).
      const catOut = join(work, "cat.txt");
      const pane = await inTmux(
        work,
        `asciinema cat ${shq(file)} > ${shq(catOut)}; echo "CAT=$?"\n` +
          `asciinema play -i 0.01 -s 100 ${shq(file)}; echo "PLAY=$?"\n`,
        /PLAY=\d+/,
      );
      assert.match(pane, /CAT=0/);
      assert.match(pane, /PLAY=0/);
      assert.match(pane, new RegExp(MARKER), "asciinema play showed the output");
      assert.match(Deno.readTextFileSync(catOut), new RegExp(MARKER));
      Deno.removeSync(catOut);
      // No temp file left beside it.
      const names = [...Deno.readDirSync(work)].map((e) => e.name);
      assert.deepEqual(names.filter((n) => n.endsWith(".tmp")), []);
    });

    await t.step("export refuses to overwrite without --force", async () => {
      const again = await termadaIn(home, work, ["export", session]);
      assert.equal(again.code, 2);
      assert.match(again.stderr, /INVALID_ARGUMENT: Cannot export to ".*": it exists/);
      const forced = await termadaIn(home, work, ["export", session, "--force", "--json"]);
      assert.equal(forced.code, 0, forced.stderr);
      const j = JSON.parse(forced.stdout);
      assert.equal(j.session_id, session);
      assert.equal(j.parts, 1);
      assert.equal(j.live, true);
      assert.equal(j.omitted_bytes, 0);
    });

    await t.step("replay without a terminal writes the output", async () => {
      const r = await termada(home, ["replay", session, "--speed", "100"]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(MARKER));
      assert.doesNotMatch(r.stdout, /"version"/, "the output, not the cast");
    });

    await t.step("replay in a terminal plays it and q stops it", async () => {
      await tmuxReplay(home, work, session);
    });

    await t.step("the routes list and serve closed sessions' recordings", async () => {
      await call(c, "session_close", { session_id: session });
      const api = operatorFetch(d);
      await until("the session closed", async () => {
        const list = await (await api("/recordings")).json();
        return list.recordings.some((r: { session_id: string; live: boolean }) =>
          r.session_id === session && !r.live
        );
      });
      const list = await (await api("/recordings")).json();
      assert.equal(list.enabled, true);
      const info = list.recordings.find((r: { session_id: string }) => r.session_id === session);
      assert.equal(info.owner, "ci");
      assert.equal(info.parts, 1);
      assert.ok(info.bytes > 0);
      assert.ok(info.ended_at >= info.started_at);
      const one = await (await api(`/recordings/${session}`)).json();
      assert.deepEqual(one, info);
      const cast = await api(`/sessions/${session}/recording`);
      assert.equal(cast.status, 200);
      assert.equal(cast.headers.get("content-type"), "application/x-asciicast");
      assert.equal(cast.headers.get("x-termada-recording-parts"), "1");
      assert.match(await cast.text(), new RegExp(MARKER));
      const missing = await api("/sessions/ses_nosuchsession/recording");
      assert.equal(missing.status, 404);
      assert.equal((await missing.json()).error.code, "NOT_FOUND");
      const noToken = await fetch(`http://127.0.0.1:${d.port}/api/recordings`);
      assert.equal(noToken.status, 401);
      await noToken.body?.cancel();
    });

    await t.step("unknown sessions, --help and unknown options", async () => {
      for (const cmd of ["export", "replay"]) {
        const r = await termadaIn(home, work, [cmd, "ses_nosuchsession"]);
        assert.equal(r.code, 1, `${cmd}: ${r.stderr}`);
        assert.match(r.stderr, /termada: NOT_FOUND: No session "ses_nosuchsession"/);
        const help = await termada(home, [cmd, "--help"]);
        assert.equal(help.code, 0);
        assert.match(help.stdout, new RegExp(`^Usage: termada ${cmd} SESSION`));
        const bad = await termada(home, [cmd, session, "--frobnicate"]);
        assert.equal(bad.code, 2);
        assert.match(bad.stderr, /INVALID_ARGUMENT: Unknown option "--frobnicate"/);
      }
      assert.equal((await termadaIn(home, work, ["export", "ses_nosuchsession"])).code, 1);
      assert.ok(!Deno.readDirSync(work).some((e) => e.name.includes("nosuch")));
    });
  } finally {
    await Deno.remove(home, { recursive: true });
    await Deno.remove(work, { recursive: true });
  }
});

/**
 * Runs `script` (bash) in a fresh tmux server's 80x24 pane, `HOME` set to `work`; resolves with
 * the pane's text once it matches `until`, then (or on a timeout) kills the server. With
 * `during`, calls it with the pane's tmux command first (to send keys).
 */
async function inTmux(
  work: string,
  script: string,
  done: RegExp,
  during?: (
    tmux: (...args: string[]) => Promise<unknown>,
    pane: () => Promise<string>,
  ) => Promise<void>,
): Promise<string> {
  const sock = join(work, `tmux-${crypto.randomUUID().slice(0, 8)}.sock`);
  const file = join(work, "pane.sh");
  Deno.writeTextFileSync(file, `${script}sleep 60\n`);
  const env = { PATH: "/usr/bin:/bin", HOME: work, TERM: "xterm-256color", LANG: "C.UTF-8" };
  const tmux = (...args: string[]) => run("tmux", ["-S", sock, ...args], env);
  const started = await tmux(
    "new-session",
    "-d",
    "-x",
    "80",
    "-y",
    "24",
    `bash --noprofile --norc ${shq(file)}`,
  );
  assert.equal(started.code, 0, started.stderr);
  const pane = async () => (await tmux("capture-pane", "-p", "-J", "-S", "-200")).stdout;
  try {
    await during?.(tmux, pane);
    await until(`the pane to show ${done}`, async () => done.test(await pane()), 30_000);
    return await pane();
  } finally {
    await tmux("kill-server");
    Deno.removeSync(file);
  }
}

/**
 * Replays under tmux (a real terminal): once fast, to the end (the pane shows the marker, the
 * exit code is 0, and the terminal is cooked again), once slowed down and stopped with q.
 */
async function tmuxReplay(home: string, work: string, session: string): Promise<void> {
  const env = Object.entries(termadaEnv(home))
    .filter(([k]) => /^(TERMADA_HOME|NO_COLOR|PATH|HOME|DENO_DIR|USER)$/.test(k))
    .map(([k, v]) => `${k}=${shq(v)}`).join(" ");
  const replay = (extra: string) =>
    `env ${env} ${shq(Deno.execPath())} ${DENO_ARGS.map(shq).join(" ")} replay ${session} ${extra}`;
  const mode = "stty -a | grep -o -- '-\\?icanon' | head -1";
  const text = await inTmux(
    work,
    `${replay("--speed 100")}; echo "EXIT-FAST=$?"; ${mode}\n` +
      `${replay("--speed 0.001 --max-idle 1000")}; echo "EXIT-SLOW=$?"; ${mode}\n` +
      `echo PANE-DONE\n`,
    /PANE-DONE/,
    async (tmux, pane) => {
      await until("the fast replay", async () => /EXIT-FAST=\d+/.test(await pane()), 20_000);
      // The slow one waits seconds before its first output: q stops it at once.
      await until("the slow replay to start", async () => {
        const ps = await run("pgrep", ["-f", `replay ${session} --speed 0.001`]);
        return ps.code === 0;
      }, 20_000);
      await new Promise((r) => setTimeout(r, 1500)); // raw mode is on once the recording streams
      await tmux("send-keys", "q");
    },
  );
  // Once: the fast replay played to the end; q stopped the slow one before the marker.
  assert.equal(text.split(MARKER).length - 1, 1, text);
  assert.match(text, /EXIT-FAST=0/);
  assert.match(text, /EXIT-SLOW=0/);
  const modes = text.match(/^-?icanon$/gm) ?? [];
  assert.deepEqual(modes, ["icanon", "icanon"], "cooked mode again after each replay");
}

Deno.test("a daemon that does not record says so", async () => {
  const home = await homeWithConfig("sessions:\n  record: false\n");
  try {
    await using d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;
    const r = await termada(home, ["export", session, "--out", "-"]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      /NOT_FOUND: Session "ses_\w+" has no recording: recording is disabled \(sessions.record: false\)/,
    );
    const list = await (await operatorFetch(d)("/recordings")).json();
    assert.deepEqual(list, { recordings: [], total: 0, enabled: false });
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
