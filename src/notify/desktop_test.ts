import assert from "node:assert/strict";
import { join } from "node:path";
import { captureLog, waitFor } from "./_test_util.ts";
import { createNotifier } from "./create.ts";
import { DesktopSink, findOnPath } from "./desktop.ts";
import { NotificationsConfig } from "./schema.ts";
import { DeliveryError } from "./sink.ts";

/**
 * The one mock of src/notify: notify-send is not installed here, so a script of that name in a
 * temp dir (put first on the PATH the sink searches) records its argv, NUL-separated, and env.
 */
async function withFakeNotifySend(
  body: string,
  fn: (dir: string, path: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "termada-notify-send-" });
  try {
    const script = join(dir, "notify-send");
    Deno.writeTextFileSync(
      script,
      `#!/bin/sh\nfor a in "$@"; do printf '%s\\0' "$a"; done > '${dir}/argv'\nenv > '${dir}/env'\n${body}\n`,
    );
    Deno.chmodSync(script, 0o755);
    await fn(dir, `${dir}:${Deno.env.get("PATH") ?? "/usr/bin:/bin"}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const argvOf = (dir: string) => Deno.readTextFileSync(join(dir, "argv")).split("\0").slice(0, -1);

Deno.test("desktop: notify-send gets app name, urgency, then title and body as plain argv", async () => {
  await withFakeNotifySend("exit 0", async (dir, path) => {
    const command = findOnPath("notify-send", path)!;
    assert.equal(command, join(dir, "notify-send"));
    const sink = new DesktopSink({ command });
    const hostile = "rm -rf / ; $(touch " + dir + "/pwned) `id` <b>bold</b> & more";
    await sink.send(
      { title: "Approval waiting", body: hostile, urgent: true, count: 1 },
      new AbortController().signal,
    );
    assert.deepEqual(argvOf(dir), [
      "--app-name=Termada",
      "--urgency=critical",
      "--",
      "Termada: Approval waiting",
      "rm -rf / ; $(touch " + dir + "/pwned) `id` &lt;b&gt;bold&lt;/b&gt; &amp; more",
    ]);
    assert.throws(() => Deno.statSync(join(dir, "pwned")), Deno.errors.NotFound);
    await sink.send(
      { title: "Job failed", body: "x", urgent: false, count: 1 },
      new AbortController().signal,
    );
    assert.equal(argvOf(dir)[1], "--urgency=normal");
  });
});

Deno.test("desktop: notify-send gets a cut-down environment", async () => {
  await withFakeNotifySend("exit 0", async (dir, path) => {
    const sink = new DesktopSink({ command: findOnPath("notify-send", path)! });
    await sink.send(
      { title: "t", body: "b", urgent: false, count: 1 },
      new AbortController().signal,
    );
    const names = Deno.readTextFileSync(join(dir, "env")).split("\n").filter((l) => l !== "")
      .map((l) => l.split("=")[0]!);
    const allowed = new Set([
      "PATH",
      "HOME",
      "LANG",
      "LC_ALL",
      "DISPLAY",
      "WAYLAND_DISPLAY",
      "DBUS_SESSION_BUS_ADDRESS",
      "XDG_RUNTIME_DIR",
      "PWD", // set by sh itself
      "OLDPWD",
      "SHLVL",
      "_",
    ]);
    for (const n of names) assert.ok(allowed.has(n), `unexpected variable ${n}`);
  });
});

Deno.test("desktop: a failing or hanging notify-send is an error, killed after the timeout", async (t) => {
  await t.step("exit 3", async () => {
    await withFakeNotifySend("exit 3", async (_dir, path) => {
      const sink = new DesktopSink({ command: findOnPath("notify-send", path)! });
      await assert.rejects(
        sink.send({ title: "t", body: "b", urgent: false, count: 1 }, new AbortController().signal),
        (e: Error) => e instanceof DeliveryError && !e.retriable && /exit 3/.test(e.message),
      );
    });
  });
  await t.step("hangs", async () => {
    await withFakeNotifySend("exec sleep 30", async (_dir, path) => {
      const sink = new DesktopSink({ command: findOnPath("notify-send", path)!, timeoutMs: 200 });
      const started = Date.now();
      await assert.rejects(
        sink.send({ title: "t", body: "b", urgent: false, count: 1 }, new AbortController().signal),
        /took longer than 200 ms: killed/,
      );
      assert.ok(Date.now() - started < 5000);
    });
  });
});

Deno.test("desktop: without notify-send on PATH the sink is off, with one warning", () => {
  const log = captureLog();
  const notifier = createNotifier(
    NotificationsConfig.parse({ desktop: { enabled: true } }),
    { redact: (s) => s, path: "/nonexistent-dir", log },
  );
  assert.deepEqual(notifier.sinks, []);
  assert.equal(log.lines.filter((l) => l.startsWith("WARN")).length, 1);
  notifier.notify({ kind: "stop_all", outcome: "x" });
  return notifier.close();
});

Deno.test("desktop: createNotifier finds notify-send and a notification reaches it", async () => {
  await withFakeNotifySend("exit 0", async (dir, path) => {
    await using notifier = createNotifier(
      NotificationsConfig.parse({ desktop: { enabled: true }, coalesce_ms: 0 }),
      { redact: (s) => s.replaceAll("hunter2", "[secret]"), path, log: captureLog() },
    );
    assert.deepEqual(notifier.sinks, ["desktop"]);
    notifier.notify({
      kind: "input_needed",
      job_id: "job_1",
      actor: "builder",
      command: "sudo -S true # hunter2",
      reader: "sudo",
    });
    await waitFor("notify-send to run", () => notifier.stats().desktop!.sent === 1);
    assert.deepEqual(argvOf(dir).slice(1), [
      "--urgency=normal",
      "--",
      "Termada: Job waiting for input",
      'Job job_1 of agent "builder" waits for input (sudo): sudo -S true # [secret]',
    ]);
  });
});
