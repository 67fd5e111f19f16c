/**
 * First run on an empty HOME, the way a new user meets Termada: no TERMADA_HOME, no XDG
 * variables, a `termada` launcher on PATH, an MCP client that launches `termada serve --stdio`.
 * The shim must start a working daemon (state under ~/.local/state/termada, private), write
 * nothing into the current directory, not need the fixed port 7717, and say at once why a
 * daemon cannot start.
 */
import assert from "node:assert/strict";
import { ROOT } from "./_daemon.ts";
import {
  DENO,
  denoDir,
  initializeRequest,
  ok,
  RawLines,
  runWithDeadline,
  spawnClient,
  stopLockedDaemon,
  withDeadline,
} from "./_clients.ts";

const CLAUDE = `${ROOT}.tools/node_modules/.bin/claude`;
const CLAUDE_INSTALL_HINT =
  "run the dev-tools install: npm install --prefix .tools @anthropic-ai/claude-code@2.1.197";

/**
 * The launcher is the one `deno task install` writes. With a fresh HOME, Deno would look for its
 * npm packages under `$HOME/.cache/deno` and download them; a real user's HOME has them, so the
 * install keeps the cache this test run uses (DENO_DIR), which changes nothing about Termada.
 */
interface FirstRun extends AsyncDisposable {
  /** The empty HOME. */
  home: string;
  /** Where `termada` (the launcher) lives. */
  bin: string;
  /** An empty working directory for the clients. */
  cwd: string;
  /** `$HOME/.local/state/termada`. */
  state: string;
  /** A clean environment: HOME and PATH, no TERMADA_* or XDG_* variables. */
  env: Record<string, string>;
}

async function firstRun(): Promise<FirstRun> {
  const home = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-firstrun-home-" }));
  const bin = await Deno.makeTempDir({ prefix: "termada-firstrun-bin-" });
  const cwd = await Deno.realPath(await Deno.makeTempDir({ prefix: "termada-firstrun-cwd-" }));
  // The README's one-command install (deno task install → scripts/install.ts) writes the
  // launcher; the bin directory is not on PATH yet, so it must print the line to add.
  const install = await new Deno.Command(DENO, {
    args: ["task", "--quiet", "--config", `${ROOT}deno.json`, "install"],
    env: {
      HOME: home,
      PATH: "/usr/local/bin:/usr/bin:/bin",
      TERMADA_BIN_DIR: bin,
      DENO_DIR: await denoDir(),
      NO_COLOR: "1",
    },
    clearEnv: true,
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const said = new TextDecoder().decode(install.stderr);
  assert.equal(install.code, 0, `deno task install: ${said}`);
  assert.ok(said.includes(`export PATH="${bin}:$PATH"`), `the PATH line is printed: ${said}`);
  assert.equal(Deno.statSync(`${bin}/termada`).mode! & 0o777, 0o755);
  const state = `${home}/.local/state/termada`;
  return {
    home,
    bin,
    cwd,
    state,
    env: { HOME: home, PATH: `${bin}:/usr/local/bin:/usr/bin:/bin`, LANG: "C.UTF-8" },
    async [Symbol.asyncDispose]() {
      await stopLockedDaemon(state);
      // A broken build may put its state in the working directory: stop that daemon too.
      await stopLockedDaemon(cwd);
      for (const dir of [home, bin, cwd]) await Deno.remove(dir, { recursive: true });
    },
  };
}

/** Holds 127.0.0.1:7717 for the test if it is free (a daemon must not need it). */
function hold7717(): Deno.Listener | undefined {
  try {
    return Deno.listen({ hostname: "127.0.0.1", port: 7717 });
  } catch (err) {
    if (err instanceof Deno.errors.AddrInUse) return undefined; // taken already: as good
    throw err;
  }
}

/** Every directory under `root` (itself included) whose mode is not 0700. */
function looseDirs(root: string, skip: (name: string) => boolean = () => false): string[] {
  const bad: string[] = [];
  const walk = (dir: string) => {
    const mode = Deno.statSync(dir).mode! & 0o777;
    if (mode !== 0o700) bad.push(`${dir} (${mode.toString(8)})`);
    for (const e of Deno.readDirSync(dir)) {
      if (e.isDirectory && !skip(e.name)) walk(`${dir}/${e.name}`);
    }
  };
  walk(root);
  return bad;
}

function assertPrivateState(fr: FirstRun, skip?: (name: string) => boolean): void {
  let st: Deno.FileInfo;
  try {
    st = Deno.statSync(fr.state);
  } catch {
    assert.fail(`the state directory ${fr.state} exists`);
  }
  assert.ok(st.isDirectory, `${fr.state} is a directory`);
  // Everything Termada created in the empty HOME (.local, .local/state, the state dir and
  // what is inside it) is private; tools' own folders (.claude…, .cache) are theirs.
  assert.deepEqual(looseDirs(fr.home, skip), [], "every directory Termada created is 0700");
  assert.deepEqual(
    [...Deno.readDirSync(fr.cwd)].map((e) => e.name),
    [],
    "nothing was written into the working directory",
  );
}

async function sdkFirstRun(fr: FirstRun): Promise<void> {
  await using client = await spawnClient(
    { command: `${fr.bin}/termada`, args: ["serve", "--stdio"], env: fr.env, cwd: fr.cwd },
    "first-run",
    30_000,
  );
  const r = await withDeadline(
    ok(client, "exec_run", { command: ["echo", "hi"] }),
    30_000,
    "exec_run echo hi",
  );
  assert.equal(r.status, "exited", JSON.stringify(r));
  assert.equal(r.exit_code, 0);
  assert.equal(r.output, "hi\n");
}

Deno.test("first run with Claude Code on an empty HOME: `claude mcp list` shows termada connected", async () => {
  try {
    Deno.statSync(CLAUDE);
  } catch {
    assert.fail(`The Claude Code CLI is missing (${CLAUDE}): ${CLAUDE_INSTALL_HINT}`);
  }
  using _port = hold7717();
  await using fr = await firstRun();
  const env = {
    ...fr.env,
    // Offline and quiet: no telemetry, no update checks, no error reports, no colours.
    DISABLE_TELEMETRY: "1",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_ERROR_REPORTING: "1",
    NO_COLOR: "1",
    // The connection check waits this long for the server (the daemon starts in ~0.5 s).
    MCP_TIMEOUT: "60000",
  };
  const add = await runWithDeadline(CLAUDE, [
    "mcp",
    "add",
    "--scope",
    "user",
    "termada",
    "--",
    "termada",
    "serve",
    "--stdio",
  ], { env, cwd: fr.cwd, ms: 60_000 });
  assert.equal(add.timedOut, false, "claude mcp add finished");
  assert.equal(add.code, 0, `claude mcp add: ${add.stdout}${add.stderr}`);

  const list = await runWithDeadline(CLAUDE, ["mcp", "list"], { env, cwd: fr.cwd, ms: 120_000 });
  const out = list.stdout + list.stderr;
  assert.equal(list.timedOut, false, `claude mcp list finished within 120 s: ${out}`);
  assert.equal(list.code, 0, `claude mcp list: ${out}`);
  const line = out.split("\n").find((l) => l.startsWith("termada:")) ?? "";
  let log = "";
  try {
    log = Deno.readTextFileSync(`${fr.state}/daemon.log`);
  } catch {
    log = "(no daemon.log)";
  }
  assert.match(line, /\bConnected\b/i, `termada is connected:\n${out}\ndaemon.log:\n${log}`);
  assert.doesNotMatch(line, /Failed/i, out);

  // The same HOME serves an SDK client too.
  await sdkFirstRun(fr);
  assertPrivateState(fr, (name) => name.startsWith(".claude") || name === ".cache");
});

Deno.test("first run with the SDK client on an empty HOME: exec_run works, state is private, cwd untouched, 7717 not needed", async () => {
  using _port = hold7717();
  await using fr = await firstRun();
  await sdkFirstRun(fr);
  assertPrivateState(fr);
});

Deno.test('TERMADA_HOME="" (set but empty) puts no state in the current directory', async () => {
  await using fr = await firstRun();
  // If "" counts as unset, the XDG config applies: keep that daemon off the fixed port.
  await Deno.mkdir(`${fr.home}/.config/termada`, { recursive: true, mode: 0o700 });
  await Deno.writeTextFile(
    `${fr.home}/.config/termada/config.yaml`,
    "server:\n  bind: 127.0.0.1:0\n",
  );
  const raw = new RawLines({
    command: `${fr.bin}/termada`,
    args: ["serve", "--stdio"],
    env: { ...fr.env, TERMADA_HOME: "" },
    cwd: fr.cwd,
  });
  let answer: Record<string, unknown> | undefined;
  let failure: string | undefined;
  try {
    try {
      await raw.send(initializeRequest("empty-home-var"));
      answer = await raw.response(1, "initialize", 20_000);
    } catch (err) {
      failure = (err as Error).message;
    }
  } finally {
    await raw.close();
  }
  const status = await raw.child.status;
  assert.deepEqual(
    [...Deno.readDirSync(fr.cwd)].map((e) => e.name),
    [],
    `nothing was written into the working directory (stderr: ${raw.stderrText})`,
  );
  if (answer?.result) {
    // Treated as unset: the state went to the XDG default.
    assert.ok(Deno.statSync(fr.state).isDirectory, `state in ${fr.state}`);
  } else {
    // Refused: with a clear error on stderr.
    assert.notEqual(status.code, 0, `the shim failed: ${failure ?? JSON.stringify(answer)}`);
    assert.match(raw.stderrText, /TERMADA_HOME/, "stderr names TERMADA_HOME");
  }
});

Deno.test("a daemon that cannot start: the shim says why on stderr at once", async (t) => {
  const cases: {
    name: string;
    prepare(fr: FirstRun): Promise<{ env: Record<string, string>; path: string }>;
  }[] = [
    {
      name: "TERMADA_HOME is a regular file",
      async prepare(fr) {
        const file = `${fr.home}/not-a-dir`;
        await Deno.writeTextFile(file, "x");
        return { env: { ...fr.env, TERMADA_HOME: file }, path: file };
      },
    },
    {
      name: "the XDG state directory ~/.local/state/termada is a regular file",
      async prepare(fr) {
        await Deno.mkdir(`${fr.home}/.local/state`, { recursive: true, mode: 0o700 });
        await Deno.writeTextFile(fr.state, "x");
        return { env: fr.env, path: fr.state };
      },
    },
  ];
  for (const k of cases) {
    await t.step(k.name, async () => {
      await using fr = await firstRun();
      const { env, path } = await k.prepare(fr);
      const t0 = performance.now();
      const child = new Deno.Command(`${fr.bin}/termada`, {
        args: ["serve", "--stdio"],
        env,
        clearEnv: true,
        cwd: fr.cwd,
        stdin: "piped", // held open, as an MCP client does
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const out = child.output();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const gone = await Promise.race([
        out.then(() => true),
        new Promise<false>((r) => timer = setTimeout(() => r(false), 3500)),
      ]);
      clearTimeout(timer);
      if (!gone) child.kill("SIGKILL");
      const res = await out;
      await child.stdin.close().catch(() => {/* the shim is gone: the pipe is broken */});
      const ms = Math.round(performance.now() - t0);
      const stderr = new TextDecoder().decode(res.stderr);
      assert.ok(gone, `the shim exited within ~3 s (killed after ${ms} ms); stderr:\n${stderr}`);
      assert.notEqual(res.code, 0, `non-zero exit; stderr:\n${stderr}`);
      assert.doesNotMatch(stderr, /did not start within/, "the reason, not a timeout");
      assert.ok(stderr.includes(path), `stderr names ${path}:\n${stderr}`);
      assert.match(stderr, /not a directory/i, `stderr says what is wrong:\n${stderr}`);
    });
  }
});
