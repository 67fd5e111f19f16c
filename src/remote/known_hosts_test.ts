import assert from "node:assert/strict";
import { join } from "node:path";
import { TermadaError } from "../shared/mod.ts";
import type { ServerBinding } from "./binding.ts";
import {
  fingerprint,
  type HostKeyEvent,
  hostVerifier,
  keyType,
  KnownHosts,
} from "./known_hosts.ts";
import { type ConnectConfig, loadSsh2 } from "./ssh2.ts";
import { sshdAvailable, TestSshd } from "./_test_sshd.ts";

const { Client } = await loadSsh2();

// --- helpers ----------------------------------------------------------------------------------

class TempDir implements AsyncDisposable {
  readonly path = Deno.makeTempDirSync({ prefix: "termada-kh-" });
  join(...parts: string[]): string {
    return join(this.path, ...parts);
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await Deno.remove(this.path, { recursive: true });
  }
}

interface Key {
  type: string;
  b64: string;
  blob: Uint8Array;
  /** `type base64 comment`, as the .pub file holds it. */
  pub: string;
  pubPath: string;
}

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (out.code !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

let keyCount = 0;

/** A real key made by ssh-keygen; its public blob decoded from the .pub file. */
async function genKey(dir: TempDir, type: "ed25519" | "rsa" | "ecdsa" = "ed25519"): Promise<Key> {
  const path = dir.join(`key${++keyCount}_${type}`);
  const bits = type === "rsa" ? ["-b", "2048"] : [];
  await run("ssh-keygen", ["-q", "-t", type, ...bits, "-N", "", "-C", "test", "-f", path]);
  const pub = (await Deno.readTextFile(`${path}.pub`)).trim();
  const [t, b64] = pub.split(" ") as [string, string];
  return { type: t, b64, blob: fromBase64(b64), pub, pubPath: `${path}.pub` };
}

function fromBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
}

function binding(name: string, host: string, port: number, hostKey?: string): ServerBinding {
  return { name, host, port, user: "u", tags: [], ...(hostKey === undefined ? {} : { hostKey }) };
}

/** Asserts `p` rejects with a TermadaError and returns it. */
async function refusal(p: Promise<unknown>): Promise<TermadaError> {
  let caught: unknown;
  await assert.rejects(p, (e) => {
    caught = e;
    return true;
  });
  assert.ok(caught instanceof TermadaError, `not a TermadaError: ${caught}`);
  return caught;
}

function refusalSync(fn: () => unknown): TermadaError {
  let caught: unknown;
  assert.throws(fn, (e) => {
    caught = e;
    return true;
  });
  assert.ok(caught instanceof TermadaError, `not a TermadaError: ${caught}`);
  return caught;
}

function lines(path: string): string[] {
  return Deno.readTextFileSync(path).split("\n").filter((l) => l !== "");
}

// --- key blobs --------------------------------------------------------------------------------

Deno.test("fingerprint and keyType read real keys as ssh-keygen does", async (t) => {
  await using dir = new TempDir();
  for (
    const [type, name] of [
      ["ed25519", "ssh-ed25519"],
      ["rsa", "ssh-rsa"],
      ["ecdsa", "ecdsa-sha2-nistp256"],
    ] as const
  ) {
    await t.step(type, async () => {
      const key = await genKey(dir, type);
      assert.equal(keyType(key.blob), name);
      const keygen = (await run("ssh-keygen", ["-l", "-E", "sha256", "-f", key.pubPath])).split(
        " ",
      )[1];
      assert.equal(fingerprint(key.blob), keygen);
      assert.match(fingerprint(key.blob), /^SHA256:[A-Za-z0-9+/]{43}$/);
    });
  }
});

Deno.test("keyType throws RangeError for a blob that is not a key", () => {
  assert.throws(() => keyType(new Uint8Array([0, 0])), RangeError);
  assert.throws(() => keyType(new Uint8Array([0, 0, 0, 9, 0x61])), RangeError);
  assert.throws(() => keyType(new Uint8Array([0, 0, 0, 0])), RangeError);
});

// --- trust on first use -----------------------------------------------------------------------

Deno.test("A first contact records one fsynced line in a new 0600 file in a new 0700 dir", async () => {
  await using dir = new TempDir();
  const key = await genKey(dir);
  const path = dir.join("state", "ssh", "known_hosts");
  const events: HostKeyEvent[] = [];
  const kh = new KnownHosts({ path, onRecorded: (e) => void events.push(e) });
  await kh.verify(binding("web", "Web.Example.com", 2222), key.blob);

  const text = Deno.readTextFileSync(path);
  assert.match(
    text,
    new RegExp(
      `^\\[web\\.example\\.com\\]:2222 ssh-ed25519 ${
        key.b64.replace(/[+/]/g, "\\$&")
      } termada:web \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z\n$`,
    ),
  );
  assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
  assert.equal(Deno.statSync(dir.join("state", "ssh")).mode! & 0o777, 0o700);
  assert.deepEqual(events, [{
    server: "web",
    host: "Web.Example.com",
    port: 2222,
    key_type: "ssh-ed25519",
    fingerprint: fingerprint(key.blob),
  }]);
  assert.deepEqual(kh.list(), [{
    hosts: "[web.example.com]:2222",
    key_type: "ssh-ed25519",
    fingerprint: fingerprint(key.blob),
    line: 1,
  }]);
});

Deno.test("A known key is trusted again without writing", async (t) => {
  await using dir = new TempDir();
  const key = await genKey(dir);
  for (const [port, host] of [[22, "db.example.com"], [2200, "[db.example.com]:2200"]] as const) {
    await t.step(`port ${port}`, async () => {
      const path = dir.join(`kh${port}`);
      let recorded = 0;
      const kh = new KnownHosts({ path, onRecorded: () => void recorded++ });
      await kh.verify(binding("db", "db.example.com", port), key.blob);
      const first = Deno.readTextFileSync(path);
      assert.ok(first.startsWith(`${host} ssh-ed25519 `), first);
      await kh.verify(binding("db", "db.example.com", port), key.blob);
      await new KnownHosts({ path }).verify(binding("db", "DB.example.com", port), key.blob);
      assert.equal(Deno.readTextFileSync(path), first);
      assert.equal(recorded, 1);
    });
  }
});

Deno.test("A changed key is refused naming both fingerprints", async (t) => {
  await using dir = new TempDir();
  const known = await genKey(dir);
  const path = dir.join("known_hosts");
  const kh = new KnownHosts({ path });
  await kh.verify(binding("web", "10.0.0.5", 2222), known.blob);
  const before = Deno.readTextFileSync(path);
  for (const type of ["ed25519", "rsa"] as const) {
    await t.step(`offered ${type}`, async () => {
      const offered = await genKey(dir, type);
      const err = await refusal(kh.verify(binding("web", "10.0.0.5", 2222), offered.blob));
      assert.equal(err.code, "SERVER_UNREACHABLE");
      assert.equal(err.retriable, false);
      assert.equal(
        err.message,
        `Host key of server "web" (10.0.0.5:2222) changed: known ${
          fingerprint(known.blob)
        }, offered ${fingerprint(offered.blob)}; refusing to connect`,
      );
      assert.deepEqual(err.details, {
        server: "web",
        host_key: { known: fingerprint(known.blob), offered: fingerprint(offered.blob) },
      });
      assert.equal(
        err.hint,
        "If the server was really re-keyed, an operator removes the old entry (termada servers forget web) and connects again",
      );
      assert.equal(Deno.readTextFileSync(path), before);
    });
  }
});

Deno.test("An operator's edit applies at the next verification", async () => {
  await using dir = new TempDir();
  const a = await genKey(dir);
  const b = await genKey(dir);
  const path = dir.join("known_hosts");
  const kh = new KnownHosts({ path });
  await kh.verify(binding("web", "h", 22), a.blob);
  Deno.writeTextFileSync(path, `h ${b.pub}\n`);
  await kh.verify(binding("web", "h", 22), b.blob);
  const err = await refusal(kh.verify(binding("web", "h", 22), a.blob));
  assert.match(err.message, /changed/);
});

Deno.test("A record after a last line without a newline starts a line of its own", async () => {
  await using dir = new TempDir();
  const a = await genKey(dir);
  const b = await genKey(dir);
  const path = dir.join("known_hosts");
  Deno.writeTextFileSync(path, `a.example ${a.pub}`);
  const kh = new KnownHosts({ path });
  await kh.verify(binding("b", "b.example", 22), b.blob);
  await kh.verify(binding("a", "a.example", 22), a.blob);
  const got = lines(path);
  assert.equal(got.length, 2);
  assert.equal(got[0], `a.example ${a.pub}`);
  assert.ok(got[1]!.startsWith(`b.example ${b.type} ${b.b64} termada:b `));
});

Deno.test("A failing onRecorded fails the verification", async () => {
  await using dir = new TempDir();
  const key = await genKey(dir);
  const path = dir.join("known_hosts");
  const kh = new KnownHosts({
    path,
    onRecorded: () => {
      throw new TermadaError("AUDIT_UNAVAILABLE", "Audit is down");
    },
  });
  const err = await refusal(kh.verify(binding("web", "h", 22), key.blob));
  assert.equal(err.code, "AUDIT_UNAVAILABLE");
  assert.equal(lines(path).length, 1);
});

// --- pinned keys ------------------------------------------------------------------------------

Deno.test("A pinned key is checked without reading or writing the file", async (t) => {
  await using dir = new TempDir();
  const key = await genKey(dir);
  const other = await genKey(dir);
  // A directory: reading it would fail, so passing proves the file is not read.
  const unreadable = dir.join("a_dir");
  Deno.mkdirSync(unreadable);
  const missing = dir.join("missing", "known_hosts");
  for (const path of [unreadable, missing]) {
    const kh = new KnownHosts({ path });
    await t.step(`match by text (${path === missing ? "missing" : "directory"})`, async () => {
      await kh.verify(binding("p", "h", 22, `${key.type} ${key.b64}`), key.blob);
      await kh.verify(binding("p", "h", 22, `  ${key.pub}  `), key.blob);
    });
    await t.step(
      `match by fingerprint (${path === missing ? "missing" : "directory"})`,
      async () => {
        await kh.verify(binding("p", "h", 22, fingerprint(key.blob)), key.blob);
        await kh.verify(binding("p", "h", 22, `${fingerprint(key.blob)}=`), key.blob);
      },
    );
  }
  assert.throws(() => Deno.statSync(missing), Deno.errors.NotFound);

  const kh = new KnownHosts({ path: unreadable });
  for (const [how, pin] of [["text", other.pub], ["fingerprint", fingerprint(other.blob)]]) {
    await t.step(`mismatch by ${how}`, async () => {
      const err = await refusal(kh.verify(binding("p", "h", 2022, pin), key.blob));
      assert.equal(err.code, "SERVER_UNREACHABLE");
      assert.equal(err.retriable, false);
      assert.deepEqual(err.details, {
        server: "p",
        host_key: { known: fingerprint(other.blob), offered: fingerprint(key.blob) },
      });
      assert.equal(
        err.message,
        `Host key of server "p" (h:2022) does not match its pinned key: pinned ${
          fingerprint(other.blob)
        }, offered ${fingerprint(key.blob)}; refusing to connect`,
      );
    });
  }
  for (
    const [why, pin] of [
      ["one field", key.b64],
      ["bad base64", `${key.type} ${key.b64.slice(1)}`],
      ["wrong type", `ssh-rsa ${key.b64}`],
      ["short fingerprint", fingerprint(key.blob).slice(0, 20)],
    ]
  ) {
    await t.step(`malformed pin: ${why}`, async () => {
      const err = await refusal(kh.verify(binding("p", "h", 22, pin!), key.blob));
      assert.equal(err.code, "SERVER_UNREACHABLE");
      assert.match(err.message, /^Pinned host key of server "p" is malformed: /);
      assert.deepEqual(err.details, { server: "p", key: "host_key" });
    });
  }
});

// --- malformed, oversized, unreadable ---------------------------------------------------------

Deno.test("A malformed file refuses every unpinned server, naming the line", async (t) => {
  await using dir = new TempDir();
  const good = await genKey(dir);
  const rsa = await genKey(dir, "rsa");
  const cases: [string, string, RegExp][] = [
    ["too few fields", `bad.example ${good.type}`, /expected hosts, key type and key, found 2/],
    ["bad base64", `bad.example ${good.type} ${good.b64.slice(0, -3)}!!!`, /not valid base64/],
    ["base64 of no key", `bad.example ssh-ed25519 AAAA`, /not an SSH public key/],
    [
      "type mismatch",
      `bad.example ssh-rsa ${good.b64}`,
      /the key is of type "ssh-ed25519" but the line says "ssh-rsa"/,
    ],
    ["unknown marker", `@trusted bad.example ${rsa.pub}`, /unknown marker "@trusted"/],
    ["revoked without key", `@revoked bad.example`, /found 1 field/],
    ["bad hashed host", `|1|abc|def ${rsa.pub}`, /hashed host is \|1\|salt\|hash/],
    ["other hash kind", `|2|abc|def ${rsa.pub}`, /unsupported hashed host/],
    ["line too long", `# ${"x".repeat(16 * 1024)}`, /longer than 16384 bytes/],
  ];
  for (const [name, bad, why] of cases) {
    await t.step(name, async () => {
      const path = dir.join(`kh_${name.replaceAll(" ", "_")}`);
      Deno.writeTextFileSync(path, `good.example ${good.pub}\n# comment\n${bad}\n`);
      const kh = new KnownHosts({ path });
      const err = await refusal(kh.verify(binding("g", "good.example", 22), good.blob));
      assert.equal(err.code, "SERVER_UNREACHABLE");
      assert.equal(err.retriable, false);
      assert.ok(err.message.startsWith(`known_hosts "${path}" line 3 is malformed: `), err.message);
      assert.match(err.message, why);
      assert.deepEqual(err.details, { server: "g", line: 3, file: path });
      assert.match(err.hint!, /line 3/);
      // A new host is not recorded into a file that is refused.
      await refusal(kh.verify(binding("n", "new.example", 22), rsa.blob));
      assert.equal(lines(path).length, 3);
      const listed = refusalSync(() => kh.list());
      assert.deepEqual(listed.details, { line: 3, file: path });
      await refusal(kh.forget("good.example", 22));
    });
  }
  await t.step("invalid UTF-8", async () => {
    const path = dir.join("kh_utf8");
    const bytes = new TextEncoder().encode(`good.example ${good.pub}\n# \xff\n`);
    Deno.writeFileSync(path, Uint8Array.from([...bytes.slice(0, -1), 0xff, 0x0a]));
    const err = await refusal(
      new KnownHosts({ path }).verify(binding("g", "good.example", 22), good.blob),
    );
    assert.match(err.message, /line 2 is malformed: it is not valid UTF-8/);
  });
});

Deno.test("A file over 1 MiB or 10000 lines is refused", async (t) => {
  await using dir = new TempDir();
  const key = await genKey(dir);
  await t.step("over 1 MiB", async () => {
    const path = dir.join("big");
    const comment = `# ${"x".repeat(1021)}\n`; // 1024 bytes
    Deno.writeTextFileSync(path, `h ${key.pub}\n` + comment.repeat(1024));
    const err = await refusal(new KnownHosts({ path }).verify(binding("s", "h", 22), key.blob));
    assert.equal(err.code, "SERVER_UNREACHABLE");
    assert.match(
      err.message,
      new RegExp(`^known_hosts "${path}" is refused: it is \\d+ bytes, more than 1048576$`),
    );
    assert.deepEqual(err.details, { server: "s", file: path });
  });
  await t.step("over 10000 lines", async () => {
    const path = dir.join("long");
    Deno.writeTextFileSync(path, `h ${key.pub}\n` + "#\n".repeat(10_000));
    const err = await refusal(new KnownHosts({ path }).verify(binding("s", "h", 22), key.blob));
    assert.equal(err.message, `known_hosts "${path}" is refused: it has more than 10000 lines`);
    assert.deepEqual(err.details, { server: "s", line: 10_001, file: path });
  });
  await t.step(
    "exactly 10000 lines is accepted, but a record that would pass it is refused",
    async () => {
      const path = dir.join("full");
      const text = `h ${key.pub}\n` + "#\n".repeat(9_999);
      Deno.writeTextFileSync(path, text);
      const kh = new KnownHosts({ path });
      await kh.verify(binding("s", "h", 22), key.blob);
      const err = await refusal(kh.verify(binding("t", "other", 22), key.blob));
      assert.match(err.message, /would make it longer than 10000 lines/);
      assert.equal(Deno.readTextFileSync(path), text);
    },
  );
});

Deno.test("A known_hosts that cannot be read fails closed", async () => {
  await using dir = new TempDir();
  const key = await genKey(dir);
  const path = dir.join("known_hosts");
  Deno.mkdirSync(path);
  const kh = new KnownHosts({ path });
  const err = await refusal(kh.verify(binding("s", "h", 22), key.blob));
  assert.equal(err.code, "SERVER_UNREACHABLE");
  assert.equal(err.retriable, false);
  assert.equal(err.message, `Cannot read known_hosts "${path}": it is a directory`);
  assert.deepEqual(err.details, { server: "s", file: path });
  assert.ok(err.hint);
  refusalSync(() => kh.list());
});

// --- markers, hashes, patterns ----------------------------------------------------------------

Deno.test("@revoked refuses its key; @cert-authority lines give no trust", async (t) => {
  await using dir = new TempDir();
  const bad = await genKey(dir);
  const good = await genKey(dir);
  const ca = await genKey(dir);
  const path = dir.join("known_hosts");
  Deno.writeTextFileSync(
    path,
    [
      `@revoked *.example ${bad.pub}`,
      `a.example ${bad.pub}`,
      `b.example ${good.pub}`,
      `@cert-authority *.example ${ca.pub}`,
      `@revoked other.host ${good.pub}`,
      "",
    ].join("\n"),
  );
  const kh = new KnownHosts({ path });
  await t.step("a revoked key is refused even where a plain entry has it", async () => {
    const err = await refusal(kh.verify(binding("a", "a.example", 22), bad.blob));
    assert.equal(err.code, "SERVER_UNREACHABLE");
    assert.equal(
      err.message,
      `Host key of server "a" (a.example:22) is revoked: ${
        fingerprint(bad.blob)
      } is marked @revoked at line 1 of known_hosts "${path}"; refusing to connect`,
    );
    assert.deepEqual(err.details, { server: "a", file: path, line: 1 });
  });
  await t.step("a revocation for other hosts does not apply", async () => {
    await kh.verify(binding("b", "b.example", 22), good.blob);
  });
  await t.step("a cert-authority key is not trusted as a host key", async () => {
    // c.example has only the @cert-authority entry: a first contact (recorded).
    await kh.verify(binding("c", "c.example", 22), good.blob);
    assert.match(lines(path).at(-1)!, /^c\.example ssh-ed25519 /);
    const err = await refusal(kh.verify(binding("c", "c.example", 22), ca.blob));
    assert.match(err.message, /changed/);
  });
  await t.step("list shows the plain entries only", () => {
    assert.deepEqual(kh.list().map((e) => [e.hosts, e.line]), [
      ["a.example", 2],
      ["b.example", 3],
      ["c.example", 6],
    ]);
  });
});

Deno.test("Hashed entries from ssh-keygen -H are matched", async (t) => {
  await using dir = new TempDir();
  const a = await genKey(dir);
  const b = await genKey(dir, "ecdsa");
  const other = await genKey(dir);
  const path = dir.join("known_hosts");
  Deno.writeTextFileSync(path, `alpha.example ${a.pub}\n[beta.example]:2222 ${b.pub}\n`);
  await run("ssh-keygen", ["-q", "-H", "-f", path]);
  const text = Deno.readTextFileSync(path);
  assert.doesNotMatch(text, /alpha|beta/);
  const kh = new KnownHosts({ path });
  await t.step("listed as hashed", () => {
    const listed = kh.list();
    assert.equal(listed.length, 2);
    for (const e of listed) assert.match(e.hosts, /^\|1\|[A-Za-z0-9+/=]+\|[A-Za-z0-9+/=]+$/);
    assert.deepEqual(listed.map((e) => e.fingerprint), [fingerprint(a.blob), fingerprint(b.blob)]);
  });
  await t.step("trusted on port 22 and another port, case-insensitively", async () => {
    await kh.verify(binding("a", "ALPHA.example", 22), a.blob);
    await kh.verify(binding("b", "beta.example", 2222), b.blob);
    assert.equal(Deno.readTextFileSync(path), text);
  });
  await t.step("a changed key is refused", async () => {
    const err = await refusal(kh.verify(binding("a", "alpha.example", 22), other.blob));
    assert.deepEqual(err.details?.host_key, {
      known: fingerprint(a.blob),
      offered: fingerprint(other.blob),
    });
  });
  await t.step("another port of the same host is a new host", async () => {
    await kh.verify(binding("b", "beta.example", 22), other.blob);
    assert.equal(lines(path).length, 3);
  });
  await t.step("forget removes a hashed entry", async () => {
    assert.equal(await kh.forget("beta.example", 2222), 1);
    assert.equal(lines(path).length, 2);
    await kh.verify(binding("b", "beta.example", 2222), other.blob);
  });
});

Deno.test("Wildcard and negated patterns match case-insensitively", async (t) => {
  await using dir = new TempDir();
  const web = await genKey(dir);
  const lan = await genKey(dir);
  const fresh = await genKey(dir);
  const path = dir.join("known_hosts");
  Deno.writeTextFileSync(
    path,
    [
      `# fleet`,
      `*.WEB.example,!bad.web.example ${web.pub}`,
      `[*.web.example]:2222 ${web.pub}`,
      `192.168.1.?,lan-*-box ${lan.pub}`,
      "",
    ].join("\n"),
  );
  const kh = new KnownHosts({ path });
  const trusted: [string, number, Key][] = [
    ["a.web.example", 22, web],
    ["Deep.Sub.Web.Example", 22, web],
    ["a.web.example", 2222, web],
    ["192.168.1.7", 22, lan],
    ["lan-01-box", 22, lan],
  ];
  for (const [host, port, key] of trusted) {
    await t.step(`${host}:${port} trusted`, async () => {
      await kh.verify(binding("s", host, port), key.blob);
    });
  }
  const changed: [string, number][] = [["c.web.example", 22], ["192.168.1.8", 22]];
  for (const [host, port] of changed) {
    await t.step(`${host}:${port} with another key is refused`, async () => {
      const err = await refusal(kh.verify(binding("s", host, port), fresh.blob));
      assert.match(err.message, /changed/);
    });
  }
  assert.equal(lines(path).length, 4);
  const unmatched: [string, number][] = [
    ["bad.web.example", 22], // negated
    ["web.example", 22], // `*.` needs a label
    ["a.web.example", 2200], // another port
    ["192.168.1.70", 22], // `?` is one character
  ];
  for (const [host, port] of unmatched) {
    await t.step(`${host}:${port} is a first contact`, async () => {
      const before = lines(path).length;
      await kh.verify(binding("s", host, port), fresh.blob);
      assert.equal(lines(path).length, before + 1);
    });
  }
});

// --- concurrency and forget -------------------------------------------------------------------

Deno.test("Concurrent first contacts record one line; a second different key is refused", async (t) => {
  await using dir = new TempDir();
  const a = await genKey(dir);
  const b = await genKey(dir);
  await t.step("same key", async () => {
    const path = dir.join("same");
    let recorded = 0;
    const kh = new KnownHosts({ path, onRecorded: () => void recorded++ });
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, () => kh.verify(binding("s", "h", 2222), a.blob)),
    );
    assert.deepEqual(results.map((r) => r.status), Array(8).fill("fulfilled"));
    assert.equal(lines(path).length, 1);
    assert.equal(recorded, 1);
  });
  await t.step("different keys", async () => {
    const path = dir.join("different");
    const kh = new KnownHosts({ path });
    const [first, second] = await Promise.allSettled([
      kh.verify(binding("s", "h", 2222), a.blob),
      kh.verify(binding("s", "h", 2222), b.blob),
    ]);
    assert.equal(first.status, "fulfilled");
    assert.equal(second.status, "rejected");
    const err = (second as PromiseRejectedResult).reason;
    assert.ok(err instanceof TermadaError);
    assert.deepEqual(err.details?.host_key, {
      known: fingerprint(a.blob),
      offered: fingerprint(b.blob),
    });
    assert.equal(lines(path).length, 1);
  });
});

Deno.test("forget removes the host's entries and keeps every other line as it was", async () => {
  await using dir = new TempDir();
  const old = await genKey(dir);
  const oldRsa = await genKey(dir, "rsa");
  const keep = await genKey(dir);
  const fresh = await genKey(dir);
  const path = dir.join("known_hosts");
  const kept = [
    "# operator notes",
    "",
    `keep.example ${keep.pub}`,
    `@revoked [db.example]:2222 ${keep.pub}`,
    `[db.example]:2200 ${keep.pub}\r`,
  ];
  Deno.writeTextFileSync(
    path,
    [
      kept[0],
      `[db.example]:2222 ${old.pub}`,
      kept[1],
      kept[2],
      `[DB.example]:2222,db-alias ${oldRsa.pub}`,
      kept[3],
      kept[4],
      "",
    ].join("\n"),
  );
  const kh = new KnownHosts({ path });
  await refusal(kh.verify(binding("db", "db.example", 2222), fresh.blob));
  assert.equal(await kh.forget("db.example", 2222), 2);
  assert.equal(Deno.readTextFileSync(path), kept.join("\n") + "\n");
  assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
  assert.equal(await kh.forget("db.example", 2222), 0);
  assert.equal(await kh.forget("nowhere.example", 22), 0);
  assert.equal(Deno.readTextFileSync(path), kept.join("\n") + "\n");
  await kh.verify(binding("db", "db.example", 2222), fresh.blob);
  assert.equal(lines(path).length, 5);
  assert.equal(await new KnownHosts({ path: dir.join("none") }).forget("h", 22), 0);
  assert.deepEqual(
    Deno.readDirSync(dir.path).toArray().filter((e) => e.name.includes(".tmp-")),
    [],
  );
});

// --- with a real sshd and ssh2 ----------------------------------------------------------------

interface Attempt extends AsyncDisposable {
  error: Error | undefined;
}

/** Connects a real ssh2 Client; the caller disposes it (ends it and waits for its close). */
function connect(config: ConnectConfig): Promise<Attempt> {
  const c = new Client();
  const closed = new Promise<void>((resolve) => c.once("close", () => resolve()));
  return new Promise((resolve) => {
    const done = (error: Error | undefined) =>
      resolve({
        error,
        async [Symbol.asyncDispose]() {
          c.end();
          await closed;
        },
      });
    c.once("ready", () => done(undefined));
    c.once("error", (e: Error) => done(e));
    c.connect({ ...config, readyTimeout: 10_000 });
  });
}

Deno.test({
  name: "ssh2 connects on first contact and again, and is refused once the server is re-keyed",
  ignore: !sshdAvailable(),
  async fn() {
    await using dir = new TempDir();
    await using sshd = await TestSshd.start();
    const path = dir.join("known_hosts");
    const events: HostKeyEvent[] = [];
    const kh = new KnownHosts({ path, onRecorded: (e) => void events.push(e) });
    const b = binding("box", "127.0.0.1", sshd.port);
    const refusals: TermadaError[] = [];
    const config = () => ({
      ...sshd.connectOptions,
      hostVerifier: hostVerifier(kh, b, { onRefused: (e) => void refusals.push(e) }),
    });
    const pubOf = (p: string) => fromBase64(Deno.readTextFileSync(`${p}.pub`).split(" ")[1]!);
    const firstKey = pubOf(sshd.hostKeyPath);

    {
      await using first = await connect(config());
      assert.equal(first.error, undefined);
    }
    const recorded = Deno.readTextFileSync(path);
    assert.ok(recorded.startsWith(`${sshd.hostKeyLine} termada:box `), recorded);
    assert.equal(events.length, 1);
    assert.equal(events[0]!.fingerprint, fingerprint(firstKey));
    {
      await using again = await connect(config());
      assert.equal(again.error, undefined);
    }
    assert.equal(Deno.readTextFileSync(path), recorded);
    assert.equal(events.length, 1);

    // Re-key the server on the same port.
    await sshd.stop();
    Deno.removeSync(sshd.hostKeyPath);
    Deno.removeSync(`${sshd.hostKeyPath}.pub`);
    await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", sshd.hostKeyPath]);
    await sshd.restart();
    const newKey = pubOf(sshd.hostKeyPath);
    {
      await using refused = await connect(config());
      assert.match(refused.error?.message ?? "", /Host denied/);
    }
    assert.equal(refusals.length, 1);
    assert.deepEqual(refusals[0]!.details, {
      server: "box",
      host_key: { known: fingerprint(firstKey), offered: fingerprint(newKey) },
    });
    assert.equal(Deno.readTextFileSync(path), recorded);

    // After the operator forgets it, the new key is recorded.
    assert.equal(await kh.forget("127.0.0.1", sshd.port), 1);
    {
      await using after = await connect(config());
      assert.equal(after.error, undefined);
    }
    assert.ok(Deno.readTextFileSync(path).startsWith(`${sshd.hostKeyLine} termada:box `));
  },
});

Deno.test({
  name: "ssh2 takes a verifier's returned promise as acceptance (why hostVerifier returns nothing)",
  ignore: !sshdAvailable(),
  async fn() {
    await using sshd = await TestSshd.start();
    // Guards the ssh2 behaviour hostVerifier works around: if this starts failing, ssh2 waits
    // for promises now and the helper's comment is out of date (the helper stays correct).
    await using attempt = await connect({
      ...sshd.connectOptions,
      hostVerifier: ((_key: Uint8Array, verify: (ok: boolean) => void) =>
        Promise.reject(new Error("refused")).then(() =>
          verify(true), () => verify(false))) as (
          key: Uint8Array,
          verify: (ok: boolean) => void,
        ) => void,
    });
    assert.equal(attempt.error, undefined);
  },
});
