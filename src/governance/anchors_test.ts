import assert from "node:assert/strict";
import { makeTestCerts } from "../shared/_test_tls.ts";
import { join } from "node:path";
import { type AuditActor, AuditLog, canonicalJson } from "../audit/mod.ts";
import { type Clock, decodeBase64, TermadaError } from "../shared/mod.ts";
import {
  type Anchor,
  ANCHOR_KEY_FILE,
  ANCHOR_PUBLIC_KEY_FILE,
  ANCHOR_SIGNING_DOMAIN,
  anchorKeyId,
  ANCHORS_DIR,
  ANCHORS_FILE,
  AnchorService,
  type AnchorServiceOptions,
  RECEIPTS_FILE,
  verifyAnchors,
} from "./anchors.ts";

const AGENT: AuditActor = { kind: "agent", id: "agent-1" };
const FAST_RETRY = { baseMs: 5, maxMs: 40, random: () => 0.5 };

function steppingClock(): Clock {
  let t = Date.UTC(2025, 0, 1);
  return { now: () => (t += 1000), mono: () => t };
}

/** A state directory with a real audit log in `<state>/audit`; both removed afterwards. */
async function withState(
  fn: (s: { stateDir: string; auditDir: string; log: AuditLog }) => Promise<void>,
): Promise<void> {
  const stateDir = await Deno.makeTempDir({ prefix: "termada-anchors-" });
  const auditDir = join(stateDir, "audit");
  const log = AuditLog.open(auditDir);
  try {
    await fn({ stateDir, auditDir, log });
  } finally {
    log.close();
    await Deno.remove(stateDir, { recursive: true });
  }
}

function fill(log: AuditLog, n: number): void {
  for (let i = 0; i < n; i++) log.append(AGENT, "job.started", { i, command: ["echo", `${i}`] });
}

function options(
  stateDir: string,
  log: AuditLog,
  extra: Partial<AnchorServiceOptions> = {},
): AnchorServiceOptions {
  return {
    stateDir,
    log,
    everyMs: null,
    receivers: [],
    host: "test-host",
    clock: steppingClock(),
    retry: FAST_RETRY,
    ...extra,
  };
}

function lines(path: string): string[] {
  const text = Deno.readTextFileSync(path);
  return text === "" ? [] : text.replace(/\n$/, "").split("\n");
}

function segment(auditDir: string): string {
  return join(auditDir, "audit-000001.jsonl");
}

interface Certs {
  caFile: string;
  cert: string;
  key: string;
}

/** A private CA and a server certificate for 127.0.0.1 signed by it (src/shared/_test_tls.ts). */
function makeCerts(dir: string): Promise<Certs> {
  return makeTestCerts(dir);
}

/** An HTTPS anchor receiver on 127.0.0.1 that counts anchors by Idempotency-Key. */
class Receiver {
  readonly keys: string[] = [];
  readonly counts = new Map<string, number>();
  readonly anchors: Anchor[] = [];
  readonly #server: Deno.HttpServer<Deno.NetAddr>;

  constructor(
    certs: Certs,
    port: number,
    answer: (anchor: Anchor) => Response = () => Response.json({ stored: true }),
  ) {
    this.#server = Deno.serve({
      hostname: "127.0.0.1",
      port,
      cert: certs.cert,
      key: certs.key,
      onListen() {},
    }, async (req) => {
      const key = req.headers.get("idempotency-key") ?? "";
      const anchor = await req.json() as Anchor;
      this.keys.push(key);
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
      this.anchors.push(anchor);
      return answer(anchor);
    });
  }

  get port(): number {
    return this.#server.addr.port;
  }

  async close(): Promise<void> {
    await this.#server.shutdown();
  }
}

async function waitFor(what: string, check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test("the anchor key is created 0600 with its public key 0644 and reused on reopen", async () => {
  await withState(async ({ stateDir, log }) => {
    const first = await AnchorService.open(options(stateDir, log));
    const keyId = first.keyId;
    await first.close();
    const keyFile = join(stateDir, ANCHOR_KEY_FILE);
    const pubFile = join(stateDir, ANCHOR_PUBLIC_KEY_FILE);
    assert.equal(Deno.statSync(keyFile).mode! & 0o777, 0o600);
    assert.equal(Deno.statSync(pubFile).mode! & 0o777, 0o644);
    const raw = decodeBase64(Deno.readTextFileSync(pubFile).trim());
    assert.equal(raw.length, 32);
    assert.equal(anchorKeyId(raw), keyId);
    assert.match(keyId, /^[0-9a-f]{16}$/);
    const before = Deno.readFileSync(keyFile);

    const again = await AnchorService.open(options(stateDir, log));
    assert.equal(again.keyId, keyId);
    assert.equal(again.status().key_id, keyId);
    await again.close();
    assert.deepEqual(Deno.readFileSync(keyFile), before);
  });
});

Deno.test("a key file other users can read is refused with the chmod fix", async () => {
  await withState(async ({ stateDir, log }) => {
    await (await AnchorService.open(options(stateDir, log))).close();
    const keyFile = join(stateDir, ANCHOR_KEY_FILE);
    Deno.chmodSync(keyFile, 0o640);
    await assert.rejects(AnchorService.open(options(stateDir, log)), (err: unknown) => {
      assert.ok(err instanceof TermadaError);
      assert.ok(err.message.includes(`"${keyFile}"`), err.message);
      assert.ok(err.message.includes("0640"), err.message);
      assert.ok(err.hint?.includes(`chmod 600 "${keyFile}"`), err.hint);
      return true;
    });
  });
});

Deno.test("an anchor signs the durable head and the same head is not anchored twice", async () => {
  await withState(async ({ stateDir, auditDir, log }) => {
    await using service = await AnchorService.open(options(stateDir, log));
    await assert.rejects(service.anchorNow(), { code: "NOT_FOUND" });
    fill(log, 3);
    const a = await service.anchorNow();
    assert.equal(a.v, 1);
    assert.equal(a.seq, 3);
    assert.equal(a.hash, log.lastHash);
    assert.equal(a.host, "test-host");
    assert.equal(a.key_id, service.keyId);
    assert.ok(!Number.isNaN(Date.parse(a.time)));

    // Anyone with the public key can check it: Ed25519 over the domain + canonical JSON.
    const raw = decodeBase64(
      Deno.readTextFileSync(join(stateDir, ANCHOR_PUBLIC_KEY_FILE)).trim(),
    );
    const pub = await crypto.subtle.importKey("raw", new Uint8Array(raw), "Ed25519", false, [
      "verify",
    ]);
    const { sig, ...body } = a;
    const signed = new TextEncoder().encode(ANCHOR_SIGNING_DOMAIN + canonicalJson(body));
    assert.ok(
      await crypto.subtle.verify("Ed25519", pub, new Uint8Array(decodeBase64(sig)), signed),
    );

    assert.deepEqual(await service.anchorNow(), a);
    const file = join(stateDir, ANCHORS_DIR, ANCHORS_FILE);
    assert.deepEqual(lines(file), [canonicalJson(a)]);
    fill(log, 2);
    const b = await service.anchorNow();
    assert.equal(b.seq, 5);
    assert.equal(lines(file).length, 2);
    assert.deepEqual(service.status().last_anchor, { seq: 5, hash: b.hash, time: b.time });

    const v = await verifyAnchors(stateDir, auditDir);
    assert.equal(v.ok, true, JSON.stringify(v.failures));
    assert.equal(v.anchors, 2);
    assert.equal(v.checked, 2);
    assert.equal(v.pruned, 0);
    assert.equal(v.key_id, service.keyId);
    assert.deepEqual(v.last_anchor, { seq: 5, hash: b.hash, time: b.time });
  });
});

Deno.test("verifyAnchors detects a changed anchor line", async (t) => {
  await withState(async ({ stateDir, auditDir, log }) => {
    const file = join(stateDir, ANCHORS_DIR, ANCHORS_FILE);
    {
      await using service = await AnchorService.open(options(stateDir, log));
      fill(log, 2);
      await service.anchorNow();
      fill(log, 2);
      await service.anchorNow();
    }
    const good = lines(file);
    const second = JSON.parse(good[1]!) as Anchor;

    await t.step("a changed hash breaks the signature", async () => {
      const forged = { ...second, hash: "f".repeat(64) };
      Deno.writeTextFileSync(file, `${good[0]}\n${canonicalJson(forged)}\n`);
      const v = await verifyAnchors(stateDir, auditDir);
      assert.equal(v.ok, false);
      assert.equal(v.checked, 1);
      assert.deepEqual(v.failures.map((f) => [f.seq, f.line]), [[4, 2]]);
      assert.match(v.failures[0]!.reason, /^bad signature/);
    });
    await t.step("a line in another form is not canonical", async () => {
      const { sig, ...rest } = second;
      Deno.writeTextFileSync(file, `${good[0]}\n${JSON.stringify({ sig, ...rest })}\n`);
      const v = await verifyAnchors(stateDir, auditDir);
      assert.equal(v.ok, false);
      assert.deepEqual(v.failures.map((f) => [f.seq, f.line]), [[4, 2]]);
      assert.match(v.failures[0]!.reason, /^not canonical/);
    });
    await t.step("a repeated anchor is out of order", async () => {
      Deno.writeTextFileSync(file, `${good[0]}\n${good[1]}\n${good[0]}\n`);
      const v = await verifyAnchors(stateDir, auditDir);
      assert.equal(v.ok, false);
      assert.deepEqual(v.failures.map((f) => f.line), [3]);
      assert.match(v.failures[0]!.reason, /^out of order/);
    });
    await t.step("an anchor signed by another key does not count", async () => {
      const other = await crypto.subtle.generateKey("Ed25519", true, [
        "sign",
        "verify",
      ]) as CryptoKeyPair;
      const raw = new Uint8Array(await crypto.subtle.exportKey("raw", other.publicKey));
      Deno.writeTextFileSync(file, `${good[0]}\n${good[1]}\n`);
      const v = await verifyAnchors(stateDir, auditDir, {
        publicKey: btoa(String.fromCharCode(...raw)),
      });
      assert.equal(v.ok, false);
      assert.equal(v.failures.length, 2);
      assert.match(v.failures[0]!.reason, /^key mismatch/);
    });
  });
});

Deno.test("verifyAnchors detects a changed, rewritten or cut-off audit log", async (t) => {
  await withState(async ({ stateDir, auditDir, log }) => {
    {
      await using service = await AnchorService.open(options(stateDir, log));
      fill(log, 3);
      await service.anchorNow();
      fill(log, 2);
      await service.anchorNow();
    }
    log.close();
    const seg = segment(auditDir);
    const original = lines(seg);

    await t.step("a record edited at an anchored seq", async () => {
      const edited = original.map((l, i) => i === 2 ? l.replace('"echo"', '"rm"') : l);
      Deno.writeTextFileSync(seg, edited.join("\n") + "\n");
      const v = await verifyAnchors(stateDir, auditDir);
      assert.equal(v.ok, false);
      assert.equal(v.audit.ok, false);
      assert.equal(v.audit.first_broken?.seq, 3);
      assert.deepEqual(v.failures.map((f) => f.seq), [3, 5]);
      assert.match(v.failures[0]!.reason, /^not checkable: the audit chain is broken at seq 3/);
    });
    await t.step("a log rewritten consistently (the chain alone cannot tell)", async () => {
      await Deno.remove(auditDir, { recursive: true });
      const other = AuditLog.open(auditDir);
      fill(other, 5);
      other.append(AGENT, "job.finished", {});
      other.close();
      const v = await verifyAnchors(stateDir, auditDir);
      assert.equal(v.audit.ok, true);
      assert.equal(v.ok, false);
      assert.deepEqual(v.failures.map((f) => f.seq), [3, 5]);
      assert.match(v.failures[0]!.reason, /^hash mismatch/);
    });
    await t.step("records cut off the end", async () => {
      await Deno.remove(auditDir, { recursive: true });
      await Deno.mkdir(auditDir, { mode: 0o700 });
      Deno.writeTextFileSync(seg, original.slice(0, 4).join("\n") + "\n", { mode: 0o600 });
      const v = await verifyAnchors(stateDir, auditDir);
      assert.equal(v.audit.ok, true);
      assert.equal(v.checked, 1);
      assert.deepEqual(v.failures.map((f) => f.seq), [5]);
      assert.match(v.failures[0]!.reason, /^record missing: the audit log ends at seq 4/);
    });
  });
});

Deno.test("anchors of pruned records are not checkable, not failures", async () => {
  const stateDir = await Deno.makeTempDir({ prefix: "termada-anchors-" });
  const auditDir = join(stateDir, "audit");
  const log = AuditLog.open(auditDir, { maxSegmentBytes: 1024, keepSegments: 2, fsync: false });
  try {
    {
      await using service = await AnchorService.open(options(stateDir, log));
      fill(log, 2);
      await service.anchorNow();
      fill(log, 30);
      await service.anchorNow();
    }
    const v = await verifyAnchors(stateDir, auditDir);
    assert.ok(Deno.statSync(join(auditDir, "checkpoint.json")).isFile);
    assert.equal(v.ok, true, JSON.stringify(v.failures));
    assert.equal(v.pruned, 1);
    assert.equal(v.checked, 1);
  } finally {
    log.close();
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("a log head behind the last anchor is refused", async () => {
  await withState(async ({ stateDir, auditDir, log }) => {
    {
      await using service = await AnchorService.open(options(stateDir, log));
      fill(log, 5);
      await service.anchorNow();
    }
    log.close();
    await Deno.remove(auditDir, { recursive: true });
    const shorter = AuditLog.open(auditDir);
    try {
      fill(shorter, 3);
      await using service = await AnchorService.open(options(stateDir, shorter));
      await assert.rejects(service.anchorNow(), (err: unknown) => {
        assert.ok(err instanceof TermadaError);
        assert.equal(err.code, "AUDIT_UNAVAILABLE");
        assert.match(err.message, /behind the record anchored last \(seq 5\)/);
        return true;
      });
      assert.match(service.status().last_error ?? "", /cut off or replaced/);
    } finally {
      shorter.close();
    }
  });
});

Deno.test("a torn last anchor line is cut at open", async () => {
  await withState(async ({ stateDir, auditDir, log }) => {
    const file = join(stateDir, ANCHORS_DIR, ANCHORS_FILE);
    {
      await using service = await AnchorService.open(options(stateDir, log));
      fill(log, 1);
      await service.anchorNow();
    }
    const whole = Deno.readTextFileSync(file);
    Deno.writeTextFileSync(file, '{"hash":"ab', { append: true });
    assert.equal((await verifyAnchors(stateDir, auditDir)).torn_tail?.line, 2);
    {
      await using service = await AnchorService.open(options(stateDir, log));
      assert.equal(service.status().last_anchor?.seq, 1);
    }
    assert.equal(Deno.readTextFileSync(file), whole);
    const v = await verifyAnchors(stateDir, auditDir);
    assert.equal(v.ok, true);
    assert.equal(v.torn_tail, undefined);
  });
});

Deno.test("an http:// receiver is refused at open", async () => {
  await withState(async ({ stateDir, log }) => {
    await assert.rejects(
      AnchorService.open(
        options(stateDir, log, { receivers: [{ name: "plain", url: "http://127.0.0.1:1/a" }] }),
      ),
      (err: unknown) => {
        assert.ok(err instanceof TermadaError);
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /"http:\/\/127\.0\.0\.1:1\/a" is not an https:\/\/ URL/);
        return true;
      },
    );
    // Refused before anything was created.
    assert.throws(() => Deno.statSync(join(stateDir, ANCHOR_KEY_FILE)), Deno.errors.NotFound);
  });
});

Deno.test(
  "anchors made while the receiver is down are delivered once, in order, after it comes up and after a crash",
  async () => {
    await withState(async ({ stateDir, log }) => {
      const certs = await makeCerts(stateDir);
      // A port that was free a moment ago: nothing listens there while the receiver is "down".
      const probe = new Receiver(certs, 0);
      const port = probe.port;
      await probe.close();
      const receivers = [{
        name: "offsite",
        url: `https://127.0.0.1:${port}/anchors`,
        caFile: certs.caFile,
        timeoutMs: 5000,
      }];
      const receiptsFile = join(stateDir, ANCHORS_DIR, RECEIPTS_FILE);
      let receiver: Receiver | null = null;
      try {
        let keyId: string;
        {
          await using service = await AnchorService.open(options(stateDir, log, { receivers }));
          keyId = service.keyId;
          service.start();
          for (let i = 0; i < 3; i++) {
            fill(log, 1);
            await service.anchorNow();
          }
          await waitFor("failed attempts", () => service.status().receivers[0]!.attempts >= 2);
          const down = service.status().receivers[0]!;
          assert.equal(down.pending, 3);
          assert.equal(down.delivered_through, 0);
          assert.match(down.last_error ?? "", /cannot reach/);
          assert.throws(() => Deno.statSync(receiptsFile), Deno.errors.NotFound);

          receiver = new Receiver(certs, port);
          await waitFor("delivery", () => service.status().receivers[0]!.pending === 0);
          const up = service.status().receivers[0]!;
          assert.equal(up.delivered_through, 3);
          assert.equal(up.attempts, 0);
          assert.equal(up.last_error, null);
          assert.equal(up.last_status, 200);
        }
        const expected = [1, 2, 3].map((s) => `${keyId}:${s}`);
        assert.deepEqual(receiver.keys, expected);
        assert.deepEqual(receiver.anchors.map((a) => a.seq), [1, 2, 3]);
        const receipts = lines(receiptsFile).map((l) => JSON.parse(l));
        assert.deepEqual(
          receipts.map((r) => [r.receiver, r.seq, r.status, r.outcome]),
          [1, 2, 3].map((s) => ["offsite", s, 200, "delivered"]),
        );
        assert.deepEqual(receipts[0].body, { stored: true });

        // Two more anchors, then a "crash": closed before anything was delivered.
        {
          await using service = await AnchorService.open(options(stateDir, log, { receivers }));
          for (let i = 0; i < 2; i++) {
            fill(log, 1);
            await service.anchorNow();
          }
          assert.equal(service.status().receivers[0]!.pending, 2);
        }
        {
          await using service = await AnchorService.open(options(stateDir, log, { receivers }));
          assert.equal(service.status().receivers[0]!.pending, 2);
          assert.equal(service.status().receivers[0]!.delivered_through, 3);
          await service.flush();
          assert.equal(service.status().receivers[0]!.pending, 0);
          await service.flush(); // nothing left: nothing sent again
        }
        assert.deepEqual(receiver.keys, [1, 2, 3, 4, 5].map((s) => `${keyId}:${s}`));
        assert.ok([...receiver.counts.values()].every((n) => n === 1));
        assert.equal(lines(receiptsFile).length, 5);
      } finally {
        await receiver?.close();
      }
    });
  },
);

Deno.test("a 400 answer is recorded as rejected and not retried", async () => {
  await withState(async ({ stateDir, auditDir, log }) => {
    const certs = await makeCerts(stateDir);
    const receiver = new Receiver(
      certs,
      0,
      () => Response.json({ error: "nope" }, { status: 400 }),
    );
    try {
      await using service = await AnchorService.open(options(stateDir, log, {
        receivers: [{
          name: "strict",
          url: `https://127.0.0.1:${receiver.port}/anchors`,
          caFile: certs.caFile,
        }],
      }));
      fill(log, 2);
      await service.anchorNow();
      await service.flush();
      const s = service.status().receivers[0]!;
      assert.equal(s.pending, 0);
      assert.equal(s.rejected, 1);
      assert.equal(s.last_status, 400);
      assert.match(s.last_error ?? "", /rejected with HTTP 400/);
      service.start();
      await service.flush();
      assert.equal(receiver.keys.length, 1);
      const [receipt] = lines(join(stateDir, ANCHORS_DIR, RECEIPTS_FILE)).map((l) => JSON.parse(l));
      assert.equal(receipt.outcome, "rejected");
      assert.equal(receipt.status, 400);
      assert.deepEqual(receipt.body, { error: "nope" });
      assert.equal((await verifyAnchors(stateDir, auditDir)).receipts, 1);
    } finally {
      await receiver.close();
    }
  });
});

Deno.test("past the pending bound the oldest anchors are dropped and counted", async () => {
  await withState(async ({ stateDir, log }) => {
    const receivers = [{ name: "away", url: "https://127.0.0.1:1/anchors", timeoutMs: 1000 }];
    {
      await using service = await AnchorService.open(
        options(stateDir, log, { receivers, maxPending: 2 }),
      );
      for (let i = 0; i < 4; i++) {
        fill(log, 1);
        await service.anchorNow();
      }
      const s = service.status().receivers[0]!;
      assert.equal(s.pending, 2);
      assert.equal(s.dropped, 2);
      assert.equal(s.delivered_through, 2);
    }
    // The drop is durable: reopening does not bring the dropped anchors back.
    await using again = await AnchorService.open(
      options(stateDir, log, { receivers, maxPending: 2 }),
    );
    assert.deepEqual(
      [again.status().receivers[0]!.pending, again.status().receivers[0]!.dropped],
      [2, 2],
    );
  });
});

Deno.test("start anchors the head periodically when it moved", async () => {
  await withState(async ({ stateDir, log }) => {
    await using service = await AnchorService.open(options(stateDir, log, { everyMs: 5 }));
    service.start();
    fill(log, 2);
    await waitFor("an anchor", () => service.status().last_anchor?.seq === 2);
    fill(log, 1);
    await waitFor("the next anchor", () => service.status().last_anchor?.seq === 3);
    const file = join(stateDir, ANCHORS_DIR, ANCHORS_FILE);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(lines(file).length, 2); // no new anchor while the head stays
  });
});
