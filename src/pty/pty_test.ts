import assert from "node:assert/strict";
import { countOpenFds, preloadNative, Pty, sharedPoller } from "./mod.ts";

preloadNative();

const ENV = { PATH: "/usr/bin:/bin", TERM: "xterm-256color", LANG: "C.UTF-8" };

async function readAll(pty: Pty): Promise<string> {
  const dec = new TextDecoder();
  let out = "";
  for await (const chunk of pty.readable) out += dec.decode(chunk, { stream: true });
  return out;
}

Deno.test("pty runs a program and reports its exit code", async () => {
  await using pty = Pty.spawn({ argv: ["sh", "-c", "echo hello; exit 3"], env: ENV });
  const out = await readAll(pty);
  assert.match(out, /hello\r\n/);
  assert.deepEqual(await pty.exited, { code: 3, signal: null });
});

Deno.test("pty child has a controlling terminal, its own session and default SIGPIPE", async () => {
  await using pty = Pty.spawn({
    argv: [
      "bash",
      "-c",
      'tty; ps -o sid=,pgid=,pid= -p $$; yes | head -c1; echo " ${PIPESTATUS[0]}"',
    ],
    env: ENV,
  });
  const out = await readAll(pty);
  assert.match(out, /^\/dev\/pts\/\d+/);
  const [sid, pgid, pid] = out.split("\r\n")[1]!.trim().split(/\s+/).map(Number);
  assert.equal(sid, pid);
  assert.equal(pgid, pid);
  assert.equal(pid, pty.pid);
  assert.match(out, /y 141\r\n/);
});

Deno.test("pty resize is seen by stty size", async () => {
  await using pty = Pty.spawn({
    argv: ["sh", "-c", "read x; stty size"],
    env: ENV,
    cols: 100,
    rows: 30,
  });
  pty.resize(132, 43);
  await pty.write("go\n");
  const out = await readAll(pty);
  assert.match(out, /43 132/);
});

Deno.test("pty spawn of a missing program throws and leaks nothing", () => {
  const before = countOpenFds();
  assert.throws(() => Pty.spawn({ argv: ["/nonexistent/prog"], env: ENV }), /posix_spawnp/);
  assert.throws(() => Pty.spawn({ argv: ["true"], env: ENV, cwd: "/nonexistent" }));
  assert.throws(() => Pty.spawn({ argv: [] }), TypeError);
  assert.throws(() => Pty.spawn({ argv: ["a\0b"] }), TypeError);
  assert.equal(countOpenFds(), before);
});

Deno.test("closing 200 ptys returns the fd count to where it was", async () => {
  const before = countOpenFds();
  const ptys = Array.from({ length: 200 }, () => Pty.spawn({ argv: ["sleep", "30"], env: ENV }));
  assert.ok(countOpenFds() >= before + 400);
  await Promise.all(ptys.map((p) => p.close({ graceMs: 200 })));
  for (const p of ptys) assert.equal(p.exitStatus?.signal, "HUP");
  await sharedPoller().stop();
  assert.equal(countOpenFds(), before);
});

Deno.test("close kills grandchildren that left the process group", async () => {
  const tag = `tm-pty-${crypto.randomUUID().slice(0, 8)}`;
  await using pty = Pty.spawn({
    argv: [
      "bash",
      "-c",
      `setsid bash -c 'exec -a ${tag}-a sleep 300' & (exec -a ${tag}-b sleep 300) & echo $!; wait`,
    ],
    env: ENV,
  });
  const reader = pty.readable.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  assert.ok(value);
  await pty.close({ graceMs: 100 });
  const left = () =>
    new TextDecoder().decode(
      new Deno.Command("pgrep", { args: ["-f", `^${tag}-`] }).outputSync().stdout,
    ).trim();
  for (let i = 0; i < 50 && left() !== ""; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(left(), "");
});

Deno.test("close also kills orphans left in the terminal's session", async () => {
  const tag = `tm-orphan-${crypto.randomUUID().slice(0, 8)}`;
  const pty = Pty.spawn({
    // With job control the subshell gets its own process group and exits at once: its child is
    // reparented to init — out of the tree and of the child's group, still in the session.
    argv: ["bash", "-c", `set -m; (bash -c 'exec -a ${tag} sleep 300' &); echo go; sleep 300`],
    env: ENV,
  });
  const reader = pty.readable.getReader();
  await reader.read();
  reader.releaseLock();
  const found = () =>
    new TextDecoder().decode(
      new Deno.Command("pgrep", { args: ["-f", `^${tag}`] }).outputSync().stdout,
    ).trim();
  for (let i = 0; i < 100 && found() === ""; i++) await new Promise((r) => setTimeout(r, 10));
  assert.notEqual(found(), "", "the orphan runs");
  await pty.close({ graceMs: 100 });
  for (let i = 0; i < 50 && found() !== ""; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(found(), "");
});
