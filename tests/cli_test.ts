/** Black-box: the `termada` entry point run as a separate process with the daemon permission set. */
import assert from "node:assert/strict";
import { lockPid, tempHome, termada as termadaIn, waitGone } from "./_daemon.ts";

/**
 * Runs `termada …` in a throwaway TERMADA_HOME, then stops the daemon the command started there
 * (`termada run` goes through one). Run with the caller's own state dir, these tests once left a
 * daemon in the developer's real home, bound to 7717, after the suite ended.
 */
async function termada(
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string; daemon: boolean }> {
  const home = await tempHome();
  try {
    return { ...await termadaIn(home, args), daemon: lockPid(home) !== undefined };
  } finally {
    const pid = lockPid(home);
    if (pid !== undefined) {
      try {
        Deno.kill(pid, "SIGTERM");
      } catch {
        // already gone
      }
      await waitGone(pid);
    }
    await Deno.remove(home, { recursive: true });
  }
}

Deno.test("termada run prints the structured result and mirrors the exit code", async () => {
  const r = await termada("run", "--", "bash", "-c", "echo out; echo err >&2; exit 3");
  assert.ok(r.daemon, "it ran through a daemon of the test's own home");
  assert.equal(r.code, 3);
  const result = JSON.parse(r.stdout);
  assert.equal(result.status, "exited");
  assert.equal(result.exit_code, 3);
  assert.equal(result.output, "out\nerr\n");
});

Deno.test("termada run with a one-word shell line in sh", async () => {
  const r = await termada("run", "--shell", "sh", "--cwd", "/tmp", "--", "pwd && echo $((2+3))");
  assert.equal(r.code, 0);
  assert.equal(JSON.parse(r.stdout).output, "/tmp\n5\n");
});

Deno.test("termada reports bad usage on stderr with a typed code", async () => {
  const none = await termada("run");
  assert.equal(none.code, 2);
  assert.match(none.stderr, /INVALID_ARGUMENT: Nothing to run/);
  assert.equal(none.stdout, "");
  const unknown = await termada("frobnicate");
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown command "frobnicate"/);
  const v = await termada("version");
  assert.match(v.stdout, /^termada \d+\.\d+\.\d+\n$/);
});

Deno.test("the shim takes an agent token from a private file, never one others may read", async () => {
  const dir = await Deno.makeTempDir({ prefix: "termada-token-" });
  try {
    const file = `${dir}/token`;
    await Deno.writeTextFile(file, "t".repeat(40) + "\n", { mode: 0o644 });
    await Deno.chmod(file, 0o644);
    const open = await termada("serve", "--stdio", "--token-file", file);
    assert.equal(open.code, 2);
    assert.match(open.stderr, /readable by other users \(mode 0644\)/);
    assert.match(open.stderr, /chmod 600/);
    const missing = await termada("serve", "--stdio", "--token-file", `${dir}/absent`);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /Cannot read the token file/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
