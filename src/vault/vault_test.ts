import assert from "node:assert/strict";
import { armor, Encrypter } from "age-encryption";
import { CryptoWorker } from "./crypto.ts";
import {
  generateIdentity,
  parseIdentityFile,
  VAULT_LIMITS,
  VaultError,
  type VaultErrorCode,
  VaultFile,
  type VaultFileOptions,
} from "./mod.ts";

/** scrypt is ~1000× cheaper at 10 than at age's 18; only the blocking test uses 18. */
const FAST: VaultFileOptions = { scryptWorkFactor: 10 };
const enc = new TextEncoder();
const dec = new TextDecoder();

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "tm-vault-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function rejectsWith(p: Promise<unknown>, code: VaultErrorCode, re?: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof VaultError, `not a VaultError: ${err}`);
    assert.equal(err.vaultCode, code, err.message);
    if (re) assert.match(err.message, re);
    assert.ok(err.hint && err.hint.length > 0, "every vault error has a hint");
    return true;
  });
}

/** Encrypts `json` to `recipient` on this thread (X25519 is fast; tests only). */
async function ageTo(recipient: string, json: unknown): Promise<Uint8Array> {
  const e = new Encrypter();
  e.addRecipient(recipient);
  return await e.encrypt(typeof json === "string" ? json : JSON.stringify(json));
}

function entry(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    kind: "secret",
    created: "2025-01-02T03:04:05.000Z",
    updated: "2025-01-02T03:04:05.000Z",
    value_b64: btoa(`value of ${name}`),
    ...extra,
  };
}

Deno.test("passphrase vault: init, open, set, list, value, remove round trip", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`, FAST);
    assert.equal(vf.exists(), false);
    assert.equal(await vf.protection(), undefined);
    await vf.init({ passphrase: "correct horse battery staple" });
    assert.equal(vf.exists(), true);
    assert.equal(await vf.protection(), "passphrase");

    const v = await vf.open({ passphrase: "correct horse battery staple" });
    assert.deepEqual(v.list(), []);
    const info = await v.set("db.password", enc.encode("hunter2"), {
      kind: "password",
      description: "prod db",
    });
    assert.equal(info.bytes, 7);
    assert.equal(info.created, info.updated);
    await v.set("api-token", enc.encode("tok"), { kind: "secret" });
    assert.deepEqual(v.list().map((e) => e.name), ["api-token", "db.password"]);

    const again = await vf.open({ passphrase: "correct horse battery staple" });
    assert.equal(dec.decode(again.value("db.password")), "hunter2");
    assert.deepEqual(again.info("db.password"), info);
    assert.equal(await again.remove("api-token"), true);
    assert.equal(await again.remove("api-token"), false);
    await v.reload();
    assert.deepEqual(v.list().map((e) => e.name), ["db.password"]);
    assert.equal(v.has("api-token"), false);
    assert.equal((await Deno.stat(vf.path)).mode! & 0o777, 0o600);
  });
});

Deno.test("identity vault: init, open, set, list, remove round trip", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    const { identity, recipient } = await generateIdentity();
    assert.match(recipient, /^age1[0-9a-z]{58}$/);
    await vf.init({ identity });
    assert.equal(await vf.protection(), "identity");
    const v = await vf.open({ identity });
    const key = new Uint8Array([0, 1, 2, 255]);
    await v.set("deploy_key", key, { kind: "ssh_key" });
    key[0] = 9; // the vault holds its own copy
    const copy = v.value("deploy_key")!;
    copy[1] = 9; // and hands out copies
    const again = await vf.open({ identity });
    assert.deepEqual(again.value("deploy_key"), new Uint8Array([0, 1, 2, 255]));
    assert.deepEqual(v.value("deploy_key"), new Uint8Array([0, 1, 2, 255]));
    assert.equal(await again.remove("deploy_key"), true);
    await v.reload();
    assert.deepEqual(v.list(), []);
  });
});

Deno.test("replacing an entry keeps its created time and moves updated", async () => {
  await withDir(async (dir) => {
    let now = Date.parse("2025-03-01T00:00:00Z");
    await using vf = new VaultFile(`${dir}/v.age`, {
      clock: { now: () => now, mono: () => now },
    });
    const { identity } = await generateIdentity();
    await vf.init({ identity });
    const v = await vf.open({ identity });
    await v.set("a", enc.encode("1"), { kind: "secret", description: "first" });
    now += 60_000;
    const info = await v.set("a", enc.encode("22"), { kind: "password" });
    assert.deepEqual(info, {
      name: "a",
      kind: "password",
      created: "2025-03-01T00:00:00.000Z",
      updated: "2025-03-01T00:01:00.000Z",
      bytes: 2,
    });
  });
});

Deno.test("a wrong passphrase is VAULT_BAD_KEY and leaves the file unchanged", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`, FAST);
    await vf.init({ passphrase: "right" });
    const before = await Deno.readFile(vf.path);
    await rejectsWith(vf.open({ passphrase: "wrong" }), "VAULT_BAD_KEY", /wrong passphrase/);
    await rejectsWith(
      vf.open({ identity: (await generateIdentity()).identity }),
      "VAULT_BAD_KEY",
      /protected by a passphrase/,
    );
    assert.deepEqual(await Deno.readFile(vf.path), before);
  });
});

Deno.test("another identity is VAULT_BAD_KEY naming it, and the file is unchanged", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`, FAST);
    await vf.init({ identity: (await generateIdentity()).identity });
    const before = await Deno.readFile(vf.path);
    const other = await generateIdentity();
    await rejectsWith(
      vf.open({ identity: other.identity }),
      "VAULT_BAD_KEY",
      new RegExp(other.recipient),
    );
    await rejectsWith(
      vf.open({ passphrase: "x" }),
      "VAULT_BAD_KEY",
      /protected by an age identity/,
    );
    assert.deepEqual(await Deno.readFile(vf.path), before);
  });
});

Deno.test("damaged files are VAULT_CORRUPT and are left as they are", async (t) => {
  const { identity, recipient } = await generateIdentity();
  const good = await ageTo(recipient, { termada_vault: 1, entries: [entry("a")] });
  const cases: [string, () => Promise<Uint8Array>, RegExp][] = [
    ["truncated payload", () => Promise.resolve(good.slice(0, good.length - 7)), /damaged/],
    ["truncated header", () => Promise.resolve(good.slice(0, 40)), /truncated/],
    ["flipped payload byte", () => {
      const b = good.slice();
      b[b.length - 20]! ^= 0x01;
      return Promise.resolve(b);
    }, /damaged/],
    ["flipped header MAC byte", () => {
      const b = good.slice();
      const mac = b.indexOf(0x2d, 30) + 6; // inside "--- <mac>"
      b[mac] = b[mac] === 0x41 ? 0x42 : 0x41;
      return Promise.resolve(b);
    }, /damaged/],
    ["garbage", () => Promise.resolve(crypto.getRandomValues(new Uint8Array(300))), /age file/],
    ["empty file", () => Promise.resolve(new Uint8Array()), /age file/],
    [
      "bad armor",
      () => Promise.resolve(enc.encode(armor.encode(good).replace("\nY", "\n*"))),
      /armor/,
    ],
    ["valid age, not JSON", () => ageTo(recipient, "{not json"), /not UTF-8 JSON/],
    ["valid age, JSON array", () => ageTo(recipient, "[]"), /not a JSON object/],
    ["other version", () => ageTo(recipient, { termada_vault: 2, entries: [] }), /is 2/],
    ["unknown top field", () => ageTo(recipient, { termada_vault: 1, entries: [], x: 1 }), /"x"/],
    [
      "unknown kind",
      () => ageTo(recipient, { termada_vault: 1, entries: [entry("a", { kind: "gpg" })] }),
      /"gpg"/,
    ],
    ["bad name", () => ageTo(recipient, { termada_vault: 1, entries: [entry("-x")] }), /"-x"/],
    [
      "duplicate name",
      () => ageTo(recipient, { termada_vault: 1, entries: [entry("a"), entry("a")] }),
      /duplicate/,
    ],
    [
      "bad base64",
      () => ageTo(recipient, { termada_vault: 1, entries: [entry("a", { value_b64: "a b" })] }),
      /b64/,
    ],
    [
      "bad time",
      () => ageTo(recipient, { termada_vault: 1, entries: [entry("a", { created: "yesterday" })] }),
      /created/,
    ],
    [
      "unknown entry field",
      () => ageTo(recipient, { termada_vault: 1, entries: [entry("a", { value: "x" })] }),
      /"value"/,
    ],
    ["oversize value", () =>
      ageTo(recipient, {
        termada_vault: 1,
        entries: [entry("a", {
          value_b64: new Uint8Array(VAULT_LIMITS.valueBytes + 1).toBase64(),
        })],
      }), /larger than 65536/],
    ["too many entries", () =>
      ageTo(recipient, {
        termada_vault: 1,
        entries: Array.from({ length: 257 }, (_, i) => entry(`e${i}`)),
      }), /257 entries/],
    ["scrypt beside X25519", () => {
      const text = dec.decode(good).replace("-> X25519", "-> scrypt c2FsdA 10\n-> X25519");
      return Promise.resolve(enc.encode(text));
    }, /not alone/],
  ];
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    for (const [label, make, re] of cases) {
      await t.step(label, async () => {
        const bytes = await make();
        await Deno.writeFile(vf.path, bytes);
        await rejectsWith(vf.open({ identity }), "VAULT_CORRUPT", re);
        assert.deepEqual(await Deno.readFile(vf.path), bytes);
      });
    }
  });
});

Deno.test("a corrupt header is VAULT_CORRUPT from protection() too", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    await Deno.writeTextFile(vf.path, "age-encryption.org/v2\n-> X25519 abc\n");
    await rejectsWith(vf.protection(), "VAULT_CORRUPT", /does not start with/);
  });
});

Deno.test("an ASCII-armored vault is read, and rewritten as binary age", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    const { identity, recipient } = await generateIdentity();
    const age = await ageTo(recipient, { termada_vault: 1, entries: [entry("a")] });
    await Deno.writeTextFile(vf.path, armor.encode(age));
    assert.equal(await vf.protection(), "identity");
    const v = await vf.open({ identity });
    assert.equal(dec.decode(v.value("a")), "value of a");
    await v.set("b", enc.encode("b"), { kind: "secret" });
    const head = dec.decode((await Deno.readFile(vf.path)).subarray(0, 22));
    assert.equal(head, "age-encryption.org/v1\n");
    assert.deepEqual((await vf.open({ identity })).list().map((e) => e.name), ["a", "b"]);
  });
});

Deno.test("set refuses bad names, kinds, sizes and descriptions with INVALID_ARGUMENT", async (t) => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    const { identity } = await generateIdentity();
    await vf.init({ identity });
    const v = await vf.open({ identity });
    const before = await Deno.readFile(vf.path);
    const bad: [string, () => Promise<unknown>, RegExp][] = [
      ["empty name", () => v.set("", enc.encode("x"), { kind: "secret" }), /""/],
      ["name with a slash", () => v.set("a/b", enc.encode("x"), { kind: "secret" }), /"a\/b"/],
      ["name too long", () => v.set("a".repeat(65), enc.encode("x"), { kind: "secret" }), /1–64/],
      [
        "unknown kind",
        () => v.set("a", enc.encode("x"), { kind: "gpg" as "secret" }),
        /unknown kind "gpg"/,
      ],
      [
        "value too big",
        () => v.set("a", new Uint8Array(VAULT_LIMITS.valueBytes + 1), { kind: "secret" }),
        /65537/,
      ],
      [
        "description too long",
        () => v.set("a", enc.encode("x"), { kind: "secret", description: "d".repeat(257) }),
        /256/,
      ],
      [
        "description with an escape",
        () => v.set("a", enc.encode("x"), { kind: "secret", description: "\x1b[2J" }),
        /control/,
      ],
      ["remove with a bad name", () => v.remove("../x"), /"\.\.\/x"/],
    ];
    for (const [label, call, re] of bad) {
      await t.step(label, () => rejectsWith(call(), "INVALID_ARGUMENT", re));
    }
    assert.deepEqual(await Deno.readFile(vf.path), before);
    // The largest value and a 64-character name are fine.
    const max = await v.set("a".repeat(64), new Uint8Array(VAULT_LIMITS.valueBytes), {
      kind: "secret",
    });
    assert.equal(max.bytes, VAULT_LIMITS.valueBytes);
  });
});

Deno.test("a vault holds at most 256 entries; replacing one in a full vault still works", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    const { identity, recipient } = await generateIdentity();
    const entries = Array.from({ length: VAULT_LIMITS.entries }, (_, i) => entry(`e${i}`));
    await Deno.writeFile(vf.path, await ageTo(recipient, { termada_vault: 1, entries }));
    const v = await vf.open({ identity });
    assert.equal(v.list().length, 256);
    await rejectsWith(
      v.set("one-more", enc.encode("x"), { kind: "secret" }),
      "INVALID_ARGUMENT",
      /holds 256 entries/,
    );
    await v.set("e7", enc.encode("new"), { kind: "secret" });
    assert.equal(dec.decode((await vf.open({ identity })).value("e7")), "new");
  });
});

Deno.test("concurrent sets in one process, through one or two openers, all survive", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`, FAST);
    await vf.init({ passphrase: "pw" });
    const a = await vf.open({ passphrase: "pw" });
    const b = await vf.open({ passphrase: "pw" });
    await Promise.all([
      a.set("from-a1", enc.encode("1"), { kind: "secret" }),
      b.set("from-b1", enc.encode("2"), { kind: "secret" }),
      a.set("from-a2", enc.encode("3"), { kind: "secret" }),
      b.set("from-b2", enc.encode("4"), { kind: "secret" }),
    ]);
    const names = ["from-a1", "from-a2", "from-b1", "from-b2"];
    assert.deepEqual((await vf.open({ passphrase: "pw" })).list().map((e) => e.name), names);
    // Each opener has merged what the other wrote before it wrote.
    await a.reload();
    assert.deepEqual(a.list().map((e) => e.name), names);
    assert.deepEqual(a.value("from-b2"), enc.encode("4"));
  });
});

Deno.test("a write waits for another holder of the lock, and gives up with VAULT_BUSY", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`, { lockTimeoutMs: 300 });
    const { identity } = await generateIdentity();
    await vf.init({ identity });
    const v = await vf.open({ identity });
    const before = await Deno.readFile(vf.path);
    // Another open file description conflicts under flock, just as another process would.
    const holder = await Deno.open(`${vf.path}.lock`, { write: true });
    let held = true;
    try {
      assert.equal(await holder.tryLock(true), true);
      await rejectsWith(
        v.set("a", enc.encode("x"), { kind: "secret" }),
        "VAULT_BUSY",
        /within 0.3 s: another process holds/,
      );
      assert.deepEqual(await Deno.readFile(vf.path), before);
      const waiting = v.set("b", enc.encode("y"), { kind: "secret" });
      await new Promise((r) => setTimeout(r, 100));
      holder.close();
      held = false;
      assert.equal((await waiting).name, "b");
    } finally {
      if (held) holder.close();
    }
    assert.deepEqual((await vf.open({ identity })).list().map((e) => e.name), ["b"]);
  });
});

Deno.test("init on an existing vault is VAULT_EXISTS; open without a file is VAULT_NOT_FOUND", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/state/vault.age`, FAST);
    await rejectsWith(vf.open({ passphrase: "pw" }), "VAULT_NOT_FOUND", /No vault at/);
    await vf.init({ passphrase: "pw" }); // creates the missing directory
    const before = await Deno.readFile(vf.path);
    await rejectsWith(vf.init({ passphrase: "other" }), "VAULT_EXISTS", /exists/);
    assert.deepEqual(await Deno.readFile(vf.path), before);
    await rejectsWith(vf.init({ passphrase: "" }), "INVALID_ARGUMENT", /empty/);
    await rejectsWith(vf.open({ identity: "AGE-SECRET-KEY-1XYZ" }), "INVALID_ARGUMENT");
  });
});

Deno.test("reset removes the vault and temp leftovers and says whether one existed", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`, FAST);
    assert.equal(await vf.reset(), false);
    await vf.init({ passphrase: "pw" });
    const v = await vf.open({ passphrase: "pw" });
    await Deno.writeTextFile(`${vf.path}.tmp-0123456789abcdef`, "half a file");
    await Deno.writeTextFile(`${dir}/unrelated.tmp-0123456789abcdef`, "not ours");
    assert.equal(await vf.reset(), true);
    assert.equal(vf.exists(), false);
    const left = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
    assert.deepEqual(left, ["unrelated.tmp-0123456789abcdef", "vault.age.lock"]);
    await rejectsWith(
      v.set("a", enc.encode("x"), { kind: "secret" }),
      "VAULT_NOT_FOUND",
      /removed/,
    );
    await rejectsWith(v.reload(), "VAULT_NOT_FOUND");
    assert.equal(await new VaultFile(`${dir}/nodir/vault.age`).reset(), false);
  });
});

Deno.test("a write removes stale temp files and leaves the vault mode 0600", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    const { identity } = await generateIdentity();
    await vf.init({ identity });
    const stale = `${vf.path}.tmp-00000000000000ff`;
    await Deno.writeTextFile(stale, "from a crash");
    const v = await vf.open({ identity });
    await v.set("a", enc.encode("x"), { kind: "secret" });
    assert.equal(await Deno.stat(stale).catch(() => undefined), undefined);
    assert.equal((await Deno.stat(vf.path)).mode! & 0o777, 0o600);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "vault.age",
      "vault.age.lock",
    ]);
  });
});

Deno.test("lock() forgets values and key; later calls are VAULT_LOCKED", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`);
    const { identity } = await generateIdentity();
    await vf.init({ identity });
    const v = await vf.open({ identity });
    await v.set("a", enc.encode("secret!"), { kind: "secret" });
    v.lock();
    assert.equal(v.unlocked, false);
    assert.throws(() => v.list(), (e: unknown) => (e as VaultError).code === "VAULT_LOCKED");
    assert.throws(() => v.value("a"), /is locked/);
    await assert.rejects(v.set("b", enc.encode("x"), { kind: "secret" }), /is locked/);
  });
});

Deno.test("the crypto worker keeps the thread free while scrypt runs (work factor 18)", async () => {
  await withDir(async (dir) => {
    await using vf = new VaultFile(`${dir}/vault.age`); // age's default factor, as `age -p`
    const t0 = performance.now();
    await vf.init({ passphrase: "slow" });
    const initMs = performance.now() - t0;
    let ticks = 0;
    let maxLag = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxLag = Math.max(maxLag, now - last);
      last = now;
      ticks++;
    }, 10);
    const t1 = performance.now();
    try {
      await vf.open({ passphrase: "slow" });
    } finally {
      clearInterval(timer);
    }
    const openMs = performance.now() - t1;
    // Blocking would give ~0 ticks; even a loaded machine gives many while scrypt runs.
    const facts = `init ${initMs | 0} ms, open ${openMs | 0} ms, ${ticks} ticks, lag ${
      maxLag | 0
    } ms`;
    assert.ok(ticks >= Math.min(5, openMs / 40), `the thread was blocked: ${facts}`);
  });
});

Deno.test("the crypto worker queue is bounded and requests time out", async (t) => {
  const { identity, recipient } = await generateIdentity();
  const age = await ageTo(recipient, "{}");
  await t.step("a request over the queue limit is VAULT_BUSY", async () => {
    const cw = new CryptoWorker({ maxQueued: 2 });
    try {
      const first = cw.decrypt(age, { identity });
      const second = cw.decrypt(age, { identity });
      await rejectsWith(cw.decrypt(age, { identity }), "VAULT_BUSY", /2 requests/);
      assert.equal((await first).ok, true);
      assert.equal((await second).ok, true);
      assert.equal((await cw.decrypt(age, { identity })).ok, true); // room again
    } finally {
      await cw.close();
    }
  });
  await t.step("a request past its deadline is VAULT_BUSY and the worker restarts", async () => {
    // Starting the worker takes ~100 ms; scrypt at 18 takes ~1.4 s.
    const cw = new CryptoWorker({ timeoutMs: 600 });
    try {
      const slow = cw.encrypt(enc.encode("{}"), { passphrase: "p", workFactor: 18 });
      await rejectsWith(slow, "VAULT_BUSY", /did not answer within 600 ms/);
      assert.equal(cw.running, false);
      assert.equal((await cw.decrypt(age, { identity })).ok, true);
    } finally {
      await cw.close();
    }
  });
  await t.step("close fails what is pending and is idempotent", async () => {
    const cw = new CryptoWorker();
    const pending = cw.encrypt(enc.encode("{}"), { passphrase: "p", workFactor: 14 });
    await cw.close();
    await cw.close();
    await assert.rejects(pending, /closed/);
  });
});

Deno.test("parseIdentityFile reads age-keygen files and refuses anything else", async () => {
  const { identity, recipient } = await generateIdentity();
  const file = `# created: 2025-01-01T00:00:00Z\n# public key: ${recipient}\n${identity}\n`;
  assert.equal(parseIdentityFile(file), identity);
  assert.equal(parseIdentityFile(`\r\n${identity}\r\n`), identity);
  const refused = (text: string, re: RegExp) =>
    assert.throws(() => parseIdentityFile(text), (e: unknown) => {
      assert.ok(e instanceof VaultError);
      assert.equal(e.vaultCode, "INVALID_ARGUMENT");
      assert.match(e.message, re);
      return true;
    });
  refused("# only comments\n", /holds 0 identities/);
  refused(`${identity}\n${(await generateIdentity()).identity}\n`, /holds 2 identities/);
  refused(`${identity}\nhello\n`, /line 2 is not an age identity/);
  // One character changed: the bech32 checksum no longer matches.
  const last = identity.at(-1) === "Q" ? "P" : "Q";
  refused(identity.slice(0, -1) + last, /line 1/);
  refused(identity.toLowerCase(), /line 1/);
  refused("AGE-SECRET-KEY-PQ-1ABCDEF\n", /Post-quantum/);
});

Deno.test("VaultError carries the vault code, a wire code and a hint", () => {
  const e = new VaultError("VAULT_BUSY", "Busy", { hint: "Retry" });
  assert.equal(e.vaultCode, "VAULT_BUSY");
  assert.equal(e.code, "SESSION_BUSY");
  assert.deepEqual(e.toJSON(), {
    code: "SESSION_BUSY",
    message: "Busy",
    retriable: true,
    hint: "Retry",
    details: { state: "VAULT_BUSY" },
  });
  assert.equal(new VaultError("VAULT_BAD_KEY", "x").code, "VAULT_LOCKED");
});
