/**
 * The vault against the real `age` CLI (Debian's /usr/bin/age, age-keygen) and against other
 * processes: files go both ways for identities and passphrases (`age -p`/`age -d` ask for the
 * passphrase on /dev/tty, so they run on one of our PTYs and we type it), two processes write at
 * once, and a writer killed half-way leaves the vault as it was.
 */
import assert from "node:assert/strict";
import { preloadNative, Pty } from "../src/pty/mod.ts";
import { parseIdentityFile, VaultFile } from "../src/vault/mod.ts";

preloadNative();

const ROOT = new URL("..", import.meta.url).pathname;
const FIXTURE = `${ROOT}tests/_fixtures/vault_set.ts`;
const ENV = { PATH: "/usr/bin:/bin", TERM: "xterm", LANG: "C.UTF-8" };
const enc = new TextEncoder();
const dec = new TextDecoder();
const HAVE_AGE = (() => {
  try {
    return Deno.statSync("/usr/bin/age").isFile && Deno.statSync("/usr/bin/age-keygen").isFile;
  } catch {
    return false; // not installed: the tests below are ignored
  }
})();

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "tm-vault-cli-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped", env: ENV })
    .output();
  assert.equal(out.code, 0, `${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

/** Runs `argv` on a PTY, typing `answers[i]` at the i-th passphrase prompt; returns the output. */
async function onPty(argv: string[], answers: string[]): Promise<string> {
  await using pty = Pty.spawn({ argv, env: ENV });
  const timer = setTimeout(() => pty.close(), 30_000);
  let out = "";
  let seen = 0;
  let asked = 0;
  try {
    for await (const chunk of pty.readable) {
      out += dec.decode(chunk, { stream: true });
      const prompts = out.match(/passphrase[^:\n]*: /g)?.length ?? 0;
      while (asked < prompts && asked < answers.length) await pty.write(`${answers[asked++]}\r`);
      seen = prompts;
    }
    const status = await pty.exited;
    assert.deepEqual(status, { code: 0, signal: null }, `${argv.join(" ")}: ${out}`);
  } finally {
    clearTimeout(timer);
  }
  assert.equal(seen, answers.length, `prompts seen: ${out}`);
  return out;
}

/** age-keygen's identity file: the identity line and the recipient age printed for it. */
async function keygen(dir: string): Promise<{ file: string; identity: string; recipient: string }> {
  const file = `${dir}/key.txt`;
  await run("age-keygen", ["-o", file]);
  const text = await Deno.readTextFile(file);
  const recipient = /# public key: (age1\S+)/.exec(text)![1]!;
  return { file, identity: parseIdentityFile(text), recipient };
}

function vaultJson(entries: { name: string; value: string }[]): string {
  return JSON.stringify({
    termada_vault: 1,
    entries: entries.map((e) => ({
      name: e.name,
      kind: "secret",
      created: "2025-01-02T03:04:05Z",
      updated: "2025-01-02T03:04:05Z",
      value_b64: enc.encode(e.value).toBase64(),
    })),
  });
}

function valueOf(doc: { entries: { name: string; value_b64: string }[] }, name: string): string {
  const e = doc.entries.find((x) => x.name === name);
  assert.ok(e, `no entry "${name}" in ${JSON.stringify(doc)}`);
  return dec.decode(Uint8Array.fromBase64(e.value_b64));
}

Deno.test({
  name: "identity vault: ours is read by `age -d -i`, and `age -e -r` output is read by ours",
  ignore: !HAVE_AGE,
  fn: async () => {
    await withDir(async (dir) => {
      const key = await keygen(dir);
      await using vf = new VaultFile(`${dir}/vault.age`);
      await vf.init({ identity: key.identity });
      const v = await vf.open({ identity: key.identity });
      await v.set("gh-token", enc.encode("ghp_sekrit"), { kind: "secret", description: "CI" });
      const doc = JSON.parse(await run("age", ["-d", "-i", key.file, vf.path]));
      assert.equal(doc.termada_vault, 1);
      assert.equal(valueOf(doc, "gh-token"), "ghp_sekrit");
      assert.equal(doc.entries[0].kind, "secret");
      assert.equal(doc.entries[0].description, "CI");

      // Built by hand, binary and armored, encrypted to the recipient age-keygen printed.
      const plain = `${dir}/plain.json`;
      await Deno.writeTextFile(plain, vaultJson([{ name: "db", value: "hunter2" }]));
      for (const armor of [false, true]) {
        const path = `${dir}/hand${armor ? "-armored" : ""}.age`;
        await run("age", ["-e", ...(armor ? ["-a"] : []), "-r", key.recipient, "-o", path, plain]);
        await using hand = new VaultFile(path);
        assert.equal(await hand.protection(), "identity");
        const hv = await hand.open({ identity: key.identity });
        assert.equal(dec.decode(hv.value("db")), "hunter2");
        await hv.set("added", enc.encode("by termada"), { kind: "password" });
        const back = JSON.parse(await run("age", ["-d", "-i", key.file, path]));
        assert.deepEqual(back.entries.map((e: { name: string }) => e.name), ["added", "db"]);
      }
    });
  },
});

Deno.test({
  name: "passphrase vault: ours is read by `age -d`, and `age -p` output is opened and updated",
  ignore: !HAVE_AGE,
  fn: async () => {
    await withDir(async (dir) => {
      const pass = "tidy otter 42 lamp";
      await using vf = new VaultFile(`${dir}/vault.age`); // scrypt 18, as `age -p` writes
      await vf.init({ passphrase: pass });
      const v = await vf.open({ passphrase: pass });
      await v.set("root-pw", enc.encode("p@ss w0rd"), { kind: "password" });
      const out = `${dir}/out.json`;
      await onPty(["age", "-d", "-o", out, vf.path], [pass]);
      assert.equal(valueOf(JSON.parse(await Deno.readTextFile(out)), "root-pw"), "p@ss w0rd");

      const plain = `${dir}/plain.json`;
      await Deno.writeTextFile(plain, vaultJson([{ name: "wifi", value: "open sesame" }]));
      const made = `${dir}/made.age`;
      await onPty(["age", "-p", "-o", made, plain], [pass, pass]);
      await using mf = new VaultFile(made);
      assert.equal(await mf.protection(), "passphrase");
      const mv = await mf.open({ passphrase: pass });
      assert.equal(dec.decode(mv.value("wifi")), "open sesame");
      await mv.set("wifi", enc.encode("closed sesame"), { kind: "password" });
      await onPty(["age", "-d", "-o", out, made], [pass]);
      assert.equal(valueOf(JSON.parse(await Deno.readTextFile(out)), "wifi"), "closed sesame");
    });
  },
});

/** A `deno run` of the vault_set fixture; stdin and stdout piped, the caller must finish it. */
function spawnSetter(
  path: string,
  names: string[],
  env: Record<string, string>,
): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--config",
      `${ROOT}deno.json`,
      "--frozen",
      "--no-prompt",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "--allow-run",
      FIXTURE,
      path,
      ...names,
    ],
    cwd: ROOT,
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

/** Reads `child`'s stdout until `line` has appeared; returns a reader of the rest. */
async function waitForLine(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  line: string,
): Promise<void> {
  let text = "";
  while (!text.split("\n").includes(line)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`child ended before printing "${line}": ${text}`);
    text += dec.decode(value);
  }
}

Deno.test({
  name: "two processes setting different names at the same time both keep their entries",
  ignore: !HAVE_AGE,
  fn: async () => {
    await withDir(async (dir) => {
      const key = await keygen(dir);
      await using vf = new VaultFile(`${dir}/vault.age`);
      await vf.init({ identity: key.identity });
      await (await vf.open({ identity: key.identity })).set("before", enc.encode("0"), {
        kind: "secret",
      });
      const names = (p: string) => Array.from({ length: 12 }, (_, i) => `${p}-${i}`);
      const env = { ...ENV, TEST_VAULT_IDENTITY: key.identity };
      const children = [
        spawnSetter(vf.path, names("a"), env),
        spawnSetter(vf.path, names("b"), env),
      ];
      const stderr = children.map((c) => new Response(c.stderr).text());
      const readers = children.map((c) => c.stdout.getReader());
      try {
        // Both open (and so hold the same stale view) before either writes.
        await Promise.all(readers.map((r) => waitForLine(r, "ready")));
        const writers = children.map((c) => c.stdin.getWriter());
        await Promise.all(writers.map((w) => w.write(enc.encode("go\n"))));
        await Promise.all(readers.map((r) => waitForLine(r, "done")));
        await Promise.all(writers.map((w) => w.close()));
      } finally {
        for (const r of readers) await r.cancel();
        const statuses = await Promise.all(children.map((c) => c.status));
        const errs = await Promise.all(stderr);
        statuses.forEach((s, i) => assert.equal(s.code, 0, errs[i]));
      }
      const doc = JSON.parse(await run("age", ["-d", "-i", key.file, vf.path]));
      const got = doc.entries.map((e: { name: string }) => e.name).sort();
      assert.deepEqual(got, ["before", ...names("a"), ...names("b")].sort());
      assert.equal(valueOf(doc, "b-11"), "value of b-11");
    });
  },
});

Deno.test({
  name: "a writer killed half-way through its write leaves the old vault intact",
  ignore: !HAVE_AGE,
  fn: async () => {
    await withDir(async (dir) => {
      const key = await keygen(dir);
      await using vf = new VaultFile(`${dir}/vault.age`);
      await vf.init({ identity: key.identity });
      const v = await vf.open({ identity: key.identity });
      await v.set("old", enc.encode("kept"), { kind: "secret" });
      const before = await Deno.readFile(vf.path);

      const child = spawnSetter(vf.path, ["new"], {
        ...ENV,
        TEST_VAULT_IDENTITY: key.identity,
        TERMADA_VAULT_TEST_CRASH: "after-partial-write",
      });
      const writer = child.stdin.getWriter();
      await writer.write(enc.encode("go\n"));
      await writer.close();
      const out = await child.output();
      assert.equal(out.signal, "SIGKILL", dec.decode(out.stderr));

      assert.deepEqual(await Deno.readFile(vf.path), before);
      const temps = [...Deno.readDirSync(dir)].filter((e) => /\.tmp-/.test(e.name));
      assert.equal(temps.length, 1, "the crashed writer left its half-written temp file");
      const partial = await Deno.stat(`${dir}/${temps[0]!.name}`);
      assert.ok(partial.size > 0 && partial.size < before.length + 200);

      const after = await vf.open({ identity: key.identity });
      assert.deepEqual(after.list().map((e) => e.name), ["old"]);
      assert.equal(dec.decode(after.value("old")), "kept");
      const doc = JSON.parse(await run("age", ["-d", "-i", key.file, vf.path]));
      assert.equal(valueOf(doc, "old"), "kept");

      await after.set("next", enc.encode("1"), { kind: "secret" }); // removes the stale temp
      assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
        "key.txt",
        "vault.age",
        "vault.age.lock",
      ]);
    });
  },
});
