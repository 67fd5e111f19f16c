import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import {
  AGENT,
  allBytes,
  fill,
  readLines,
  readRecords,
  segmentFiles,
  segmentPath,
  small,
  steppingClock,
  withDir,
  writeLines,
} from "./_test_util.ts";
import {
  type AuditIo,
  AuditLog,
  LONE_INTENT_GAP_MS,
  MAX_TAIL,
  openAuditLog,
  SYSTEM_IO,
} from "./log.ts";
import { CHECKPOINT_FILE, GENESIS, parseCheckpoint } from "./record.ts";
import { verifyAudit } from "./verify.ts";

const isUnavailable = (e: unknown): e is TermadaError =>
  e instanceof TermadaError && e.code === "AUDIT_UNAVAILABLE";

Deno.test("append writes one fsynced line per record, chained from the genesis hash", () => {
  withDir((dir) => {
    using log = AuditLog.open(dir, { clock: steppingClock() });
    assert.equal(log.lastSeq, 0);
    assert.equal(log.lastHash, GENESIS);
    const a = log.append(AGENT, "job.started", { command: ["ls", "-l"], cwd: "/tmp" });
    const b = log.append({ kind: "operator", id: "op" }, "approval.resolved");
    assert.deepEqual(a.actor, AGENT);
    assert.equal(a.seq, 1);
    assert.equal(a.prev, GENESIS);
    assert.equal(a.time, "2025-01-01T00:00:01.000Z");
    assert.deepEqual(a.data, { command: ["ls", "-l"], cwd: "/tmp" });
    assert.equal(b.seq, 2);
    assert.equal(b.prev, a.hash);
    assert.deepEqual(b.data, {});
    assert.equal(log.lastSeq, 2);
    assert.equal(log.lastHash, b.hash);
    assert.deepEqual(segmentFiles(dir), ["audit-000001.jsonl"]);
    assert.deepEqual(readRecords(segmentPath(dir, 1)), [a, b]);
    assert.match(readLines(segmentPath(dir, 1))[0]!, /^\{"seq":1,"time":"[^"]+","actor":/);
  });
});

Deno.test("append syncs the segment before it returns, unless fsync is off", () => {
  for (const fsync of [true, false]) {
    withDir((dir) => {
      const calls: string[] = [];
      const io: AuditIo = {
        write: (file, bytes) => (calls.push("write"), SYSTEM_IO.write(file, bytes)),
        sync: (file) => (calls.push("sync"), SYSTEM_IO.sync(file)),
      };
      const log = openAuditLog(dir, { fsync }, io);
      try {
        log.append(AGENT, "job.started");
        assert.deepEqual(calls, fsync ? ["write", "sync"] : ["write"]);
      } finally {
        log.close();
      }
    });
  }
});

Deno.test("the audit directory is 0700 and its files 0600", () => {
  withDir((dir) => {
    Deno.mkdirSync(dir, { mode: 0o755 });
    Deno.chmodSync(dir, 0o755);
    {
      using log = AuditLog.open(dir, small({ maxSegmentBytes: 1024, keepSegments: 2 }));
      fill(log, 12);
    }
    assert.equal(Deno.statSync(dir).mode! & 0o777, 0o700);
    for (const e of Deno.readDirSync(dir)) {
      assert.equal(Deno.statSync(`${dir}/${e.name}`).mode! & 0o777, 0o600, e.name);
    }
  });
});

Deno.test("records chain across segment rotation", () => {
  withDir((dir) => {
    using log = AuditLog.open(dir, small());
    const records = fill(log, 20);
    const files = segmentFiles(dir);
    assert.ok(files.length >= 5, `${files.length} segments`);
    let prev = GENESIS;
    let seq = 0;
    for (const name of files) {
      const size = Deno.statSync(`${dir}/${name}`).size;
      assert.ok(size <= 1024, `${name} is ${size} bytes`);
      for (const r of readRecords(`${dir}/${name}`)) {
        assert.equal(r.seq, ++seq);
        assert.equal(r.prev, prev);
        prev = r.hash;
      }
    }
    assert.equal(prev, records.at(-1)!.hash);
    const result = verifyAudit(dir);
    assert.equal(result.ok, true, JSON.stringify(result.firstBroken));
    assert.equal(result.records, 20);
    assert.equal(result.segments, files.length);
  });
});

Deno.test("reopen continues the chain", async (t) => {
  await t.step("after a clean close", () => {
    withDir((dir) => {
      let last;
      {
        using log = AuditLog.open(dir, small());
        last = fill(log, 7).at(-1)!;
      }
      using log = AuditLog.open(dir, small());
      assert.equal(log.lastSeq, 7);
      assert.equal(log.lastHash, last.hash);
      const next = log.append(AGENT, "job.finished", { exit: 0 });
      assert.equal(next.seq, 8);
      assert.equal(next.prev, last.hash);
      assert.equal(verifyAudit(dir).ok, true);
      assert.equal(verifyAudit(dir).records, 8);
    });
  });
  await t.step("into an empty segment left by a crash during rotation", () => {
    withDir((dir) => {
      {
        using log = AuditLog.open(dir, small());
        fill(log, 5);
      }
      const n = segmentFiles(dir).length;
      Deno.writeFileSync(segmentPath(dir, n + 1), new Uint8Array(0), { mode: 0o600 });
      assert.equal(verifyAudit(dir).ok, true);
      using log = AuditLog.open(dir, small());
      assert.equal(log.append(AGENT, "job.finished").seq, 6);
      assert.equal(readRecords(segmentPath(dir, n + 1))[0]!.seq, 6);
      assert.equal(verifyAudit(dir).ok, true);
    });
  });
});

Deno.test("redaction is applied before hashing: the secret never reaches the disk", () => {
  withDir((dir) => {
    const secret = "hunter2-very-secret";
    const redact = (s: string) => s.replaceAll(secret, "[REDACTED]");
    using log = AuditLog.open(dir, { ...small(), redact });
    const r = log.append(AGENT, "input.written", {
      text: `password: ${secret}`,
      nested: { argv: ["login", secret], n: 3 },
    });
    assert.deepEqual(r.data, {
      text: "password: [REDACTED]",
      nested: { argv: ["login", "[REDACTED]"], n: 3 },
    });
    assert.ok(!allBytes(dir).includes(secret));
    assert.ok(!allBytes(dir).includes("hunter2"));
    assert.deepEqual(log.tail(1), [r]);
    assert.equal(verifyAudit(dir).ok, true, "the hash covers the redacted data");
  });
});

/** File operations that fail on demand. */
function faultyIo(): AuditIo & { fail: "none" | "write" | "partial" | "sync" } {
  const io = {
    fail: "none" as "none" | "write" | "partial" | "sync",
    write(file: Deno.FsFile, bytes: Uint8Array): number {
      if (io.fail === "write") throw new Error("No space left on device (os error 28)");
      if (io.fail === "partial") {
        SYSTEM_IO.write(file, bytes.subarray(0, Math.floor(bytes.length / 2)));
        throw new Error("No space left on device (os error 28)");
      }
      return SYSTEM_IO.write(file, bytes);
    },
    sync(file: Deno.FsFile): void {
      if (io.fail === "sync") throw new Error("Input/output error (os error 5)");
      SYSTEM_IO.sync(file);
    },
  };
  return io;
}

Deno.test("a write failure latches the log unhealthy until it is reopened", async (t) => {
  for (const fail of ["write", "sync", "partial"] as const) {
    await t.step(`a failing ${fail}`, () => {
      withDir((dir) => {
        const io = faultyIo();
        const log = openAuditLog(dir, { clock: steppingClock() }, io);
        try {
          fill(log, 3);
          io.fail = fail;
          assert.throws(
            () => log.append(AGENT, "job.started", { i: 99 }),
            (e) => isUnavailable(e) && e.retriable === false && /os error/.test(e.message),
          );
          assert.equal(log.healthy, false);
          assert.equal(log.lastSeq, 3);
          io.fail = "none";
          assert.throws(
            () => log.append(AGENT, "job.started"),
            (e) =>
              isUnavailable(e) && e.retriable === false &&
              /stopped after a write failure/.test(e.message),
          );
          assert.equal(log.healthy, false);
        } finally {
          log.close();
        }
        using reopened = AuditLog.open(dir, { clock: steppingClock() });
        assert.equal(reopened.healthy, true);
        const next = reopened.append(AGENT, "job.started", { i: 100 });
        // A partial line is cut at open and the cut recorded; a failed sync may have left the
        // (unacknowledged) record on disk: either way the chain continues from what is there.
        assert.ok(next.seq >= 4);
        const result = verifyAudit(dir);
        assert.equal(result.ok, true, JSON.stringify(result.firstBroken));
        if (fail === "partial") {
          assert.equal(reopened.tail(2)[0]!.event, "audit.recovered");
        }
      });
    });
  }

  await t.step("the directory is removed", () => {
    withDir((dir) => {
      using log = AuditLog.open(dir, small());
      fill(log, 2);
      Deno.removeSync(dir, { recursive: true });
      assert.throws(
        () => log.append(AGENT, "job.started"),
        (e) => isUnavailable(e) && /no longer in the directory/.test(e.message),
      );
      assert.equal(log.healthy, false);
      assert.throws(() => log.append(AGENT, "job.started"), isUnavailable);
    });
  });

  await t.step("the directory is replaced", () => {
    withDir((dir) => {
      using log = AuditLog.open(dir, small());
      fill(log, 2);
      Deno.renameSync(dir, `${dir}.old`);
      Deno.mkdirSync(dir);
      assert.throws(() => log.append(AGENT, "job.started"), isUnavailable);
      assert.equal(log.healthy, false);
    });
  });

  await t.step("the directory becomes a file, so rotation cannot create a segment", () => {
    withDir((dir) => {
      using log = AuditLog.open(dir, small());
      fill(log, 2);
      Deno.renameSync(dir, `${dir}.old`);
      Deno.writeTextFileSync(dir, "not a directory");
      assert.throws(() => fill(log, 5), isUnavailable);
      assert.equal(log.healthy, false);
    });
  });
});

Deno.test("append refuses bad input without writing or latching", async (t) => {
  await withDirAsync(async (dir) => {
    using log = AuditLog.open(dir, small());
    const invalid = (e: unknown) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT";
    await t.step("an event name that is not dot-separated lower-case words", () => {
      assert.throws(() => log.append(AGENT, "Job Started"), invalid);
      assert.throws(() => log.append(AGENT, ""), invalid);
      assert.throws(() => log.append(AGENT, "x".repeat(65)), invalid);
    });
    await t.step("the reserved audit. events", () => {
      assert.throws(() => log.append(AGENT, "audit.checkpoint"), invalid);
    });
    await t.step("a bad actor", () => {
      // @ts-expect-error: a kind outside the union
      assert.throws(() => log.append({ kind: "root", id: "x" }, "job.started"), invalid);
      assert.throws(() => log.append({ kind: "agent", id: "" }, "job.started"), invalid);
      assert.throws(() => log.append({ kind: "agent", id: "a\nb" }, "job.started"), invalid);
    });
    await t.step("data that is not plain JSON", () => {
      assert.throws(() => log.append(AGENT, "job.started", { when: new Date() }), TypeError);
      assert.throws(() => log.append(AGENT, "job.started", { n: NaN }), TypeError);
      // @ts-expect-error: an array is not a record
      assert.throws(() => log.append(AGENT, "job.started", [1]), TypeError);
    });
    await t.step("data over 1 MiB", () => {
      assert.throws(
        () => log.append(AGENT, "job.started", { big: "x".repeat(1024 * 1024) }),
        invalid,
      );
    });
    assert.equal(log.healthy, true);
    assert.equal(log.lastSeq, 0);
    assert.equal(log.append(AGENT, "job.started").seq, 1);
  });
});

async function withDirAsync(fn: (dir: string) => Promise<void>): Promise<void> {
  const root = Deno.makeTempDirSync({ prefix: "termada-audit-" });
  try {
    await fn(`${root}/audit`);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

Deno.test("close is idempotent and a closed log refuses appends", () => {
  withDir((dir) => {
    const log = AuditLog.open(dir, small());
    log.append(AGENT, "job.started");
    log.close();
    log.close();
    assert.equal(log.healthy, false);
    assert.throws(
      () => log.append(AGENT, "job.started"),
      (e) => isUnavailable(e) && /closed/.test(e.message),
    );
    using again = AuditLog.open(dir, small());
    assert.equal(again.lastSeq, 1);
  });
});

Deno.test("a second open of the same directory in one process is refused", () => {
  withDir((dir) => {
    using log = AuditLog.open(dir, small());
    assert.throws(
      () => AuditLog.open(`${dir}/.`, small()),
      (e) => isUnavailable(e) && /already open/.test(e.message),
    );
    log.append(AGENT, "job.started");
  });
});

Deno.test("tail(n) returns the last n records oldest first, across segments", () => {
  withDir((dir) => {
    using log = AuditLog.open(dir, small());
    assert.deepEqual(log.tail(5), []);
    const records = fill(log, 25);
    assert.ok(segmentFiles(dir).length > 5);
    assert.deepEqual(log.tail(0), []);
    assert.deepEqual(log.tail(1), records.slice(-1));
    assert.deepEqual(log.tail(10), records.slice(-10));
    assert.deepEqual(log.tail(MAX_TAIL), records);
    assert.throws(
      () => log.tail(MAX_TAIL + 1),
      (e) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
    );
    assert.throws(
      () => log.tail(1.5),
      (e) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
    );
  });
});

Deno.test("tail(n) stops at the checkpoint: pruned records are gone", () => {
  withDir((dir) => {
    using log = AuditLog.open(dir, small({ keepSegments: 3 }));
    fill(log, 30);
    const all = log.tail(MAX_TAIL);
    assert.equal(all.at(-1)!.seq, log.lastSeq);
    const cp = parseCheckpoint(Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`));
    assert.ok(typeof cp !== "string");
    assert.equal(all[0]!.seq, cp.seq + 1);
  });
});

Deno.test("pruning keeps keepSegments segments behind a checkpoint confirmed by the chain", () => {
  withDir((dir) => {
    {
      using log = AuditLog.open(dir, small({ keepSegments: 3 }));
      fill(log, 40);
      assert.deepEqual(segmentFiles(dir).length, 3);
      const cp = parseCheckpoint(Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`));
      assert.ok(typeof cp !== "string", String(cp));
      const first = segmentFiles(dir)[0]!;
      assert.equal(`audit-${String(cp.prunedThrough + 1).padStart(6, "0")}.jsonl`, first);
      const firstRecord = readRecords(`${dir}/${first}`)[0]!;
      assert.equal(firstRecord.seq, cp.seq + 1);
      assert.equal(firstRecord.prev, cp.hash);
      const announced = log.tail(MAX_TAIL).find((r) => r.seq === cp.recordSeq)!;
      assert.equal(announced.event, "audit.checkpoint");
      assert.deepEqual(announced.actor, { kind: "system", id: "audit" });
      assert.deepEqual(announced.data, {
        seq: cp.seq,
        hash: cp.hash,
        segment: cp.segment,
        prunedThrough: cp.prunedThrough,
      });
    }
    const result = verifyAudit(dir);
    assert.equal(result.ok, true, JSON.stringify(result.firstBroken));
    assert.equal(result.segments, 3);
    using log = AuditLog.open(dir, small({ keepSegments: 3 }));
    fill(log, 10);
    assert.equal(verifyAudit(dir).ok, true);
  });
});

Deno.test("a prune interrupted by a crash leaves a log that verifies and reopens", async (t) => {
  /** Runs appends until a prune happens; returns the files as they were just before it. */
  const pruneOnce = (dir: string) => {
    const log = AuditLog.open(dir, small({ keepSegments: 2 }));
    try {
      for (let i = 0;; i++) {
        const before = new Map(
          [...Deno.readDirSync(dir)].map((e) => [e.name, Deno.readFileSync(`${dir}/${e.name}`)]),
        );
        log.append(AGENT, "job.started", { i });
        const cp = Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`);
        if (cp.join() !== before.get(CHECKPOINT_FILE)?.join()) return before;
        if (i > 200) throw new Error("no prune happened");
      }
    } finally {
      log.close();
    }
  };
  // Let a first prune happen so that an older checkpoint exists, then capture the second one.
  const setup = (dir: string) => {
    {
      using log = AuditLog.open(dir, small({ keepSegments: 2 }));
      fill(log, 12);
    }
    return pruneOnce(dir);
  };

  await t.step("after the checkpoint record, before checkpoint.json is replaced", () => {
    withDir((dir) => {
      const before = setup(dir);
      for (const [name, bytes] of before) {
        if (name === CHECKPOINT_FILE || !segmentFiles(dir).includes(name)) {
          Deno.writeFileSync(`${dir}/${name}`, bytes);
        }
      }
      const result = verifyAudit(dir);
      assert.equal(result.ok, true, JSON.stringify(result.firstBroken));
      using log = AuditLog.open(dir, small({ keepSegments: 2 }));
      fill(log, 10);
      assert.equal(verifyAudit(dir).ok, true);
      assert.equal(segmentFiles(dir).length, 2);
    });
  });

  await t.step("after checkpoint.json, before the old segments are deleted", () => {
    withDir((dir) => {
      const before = setup(dir);
      for (const [name, bytes] of before) {
        if (name.endsWith(".jsonl") && !segmentFiles(dir).includes(name)) {
          Deno.writeFileSync(`${dir}/${name}`, bytes);
        }
      }
      const result = verifyAudit(dir);
      assert.equal(result.ok, true, JSON.stringify(result.firstBroken));
      assert.equal(result.segments, 2, "covered segments are not read");
      using _log = AuditLog.open(dir, small({ keepSegments: 2 }));
      assert.equal(segmentFiles(dir).length, 2, "open finishes the prune");
    });
  });
});

Deno.test("a torn last line from a crash is tolerated: verify reports it, open cuts and records it", () => {
  withDir((dir) => {
    {
      using log = AuditLog.open(dir, small());
      fill(log, 7);
    }
    const last = segmentPath(dir, segmentFiles(dir).length);
    const good = Deno.readFileSync(last);
    const lines = readLines(last).length;
    const torn = new TextEncoder().encode(
      '{"seq":8,"time":"2025-01-01T00:00:09.000Z","actor":{"id":"ag',
    );
    Deno.writeFileSync(last, torn, { append: true });

    const result = verifyAudit(dir);
    assert.equal(result.ok, true);
    assert.equal(result.records, 7);
    assert.deepEqual(result.tornTail, {
      segment: last.split("/").at(-1),
      line: lines + 1,
      bytes: torn.length,
      reason: "truncated record",
    });

    using log = AuditLog.open(dir, small());
    assert.equal(log.lastSeq, 8, "the cut is recorded as record 8");
    const [recovered] = log.tail(1);
    assert.equal(recovered!.event, "audit.recovered");
    assert.deepEqual(recovered!.actor, { kind: "system", id: "audit" });
    assert.equal(recovered!.data.reason, "truncated record");
    assert.equal(recovered!.data.discardedBytes, torn.length);
    assert.match(String(recovered!.data.discardedSha256), /^[0-9a-f]{64}$/);
    assert.deepEqual(Deno.readFileSync(last).subarray(0, good.length), good);
    assert.equal(log.append(AGENT, "job.started").seq, 9);
    const after = verifyAudit(dir);
    assert.equal(after.ok, true);
    assert.equal(after.tornTail, undefined);
  });
});

Deno.test("open refuses a broken chain, naming the first broken seq", async (t) => {
  const refuses = (dir: string, seq: number | null, reason: RegExp) =>
    assert.throws(() => AuditLog.open(dir, small()), (e) => {
      assert.ok(isUnavailable(e), String(e));
      assert.equal(e.retriable, false);
      assert.match(e.message, reason);
      if (seq !== null) assert.match(e.message, new RegExp(`record ${seq} `));
      assert.match(e.hint!, /termada audit verify/);
      assert.match(e.hint!, /never edit/i);
      assert.equal((e.details!.broken as { seq: number | null }).seq, seq);
      return true;
    });
  const build = (dir: string, n: number, options = small()) => {
    using log = AuditLog.open(dir, options);
    return fill(log, n);
  };

  await t.step("an edited record in the last segment", () => {
    withDir((dir) => {
      build(dir, 8);
      const last = segmentPath(dir, segmentFiles(dir).length);
      const lines = readLines(last);
      const victim = JSON.parse(lines[0]!).seq as number;
      lines[0] = lines[0]!.replace("hello", "HELLO");
      writeLines(last, lines);
      refuses(dir, victim, /hash mismatch/);
    });
  });

  await t.step("a last segment that does not link to the one before", () => {
    withDir((dir) => {
      build(dir, 8);
      const n = segmentFiles(dir).length;
      const lines = readLines(segmentPath(dir, n - 1));
      const dropped = JSON.parse(lines.at(-1)!).seq as number;
      writeLines(segmentPath(dir, n - 1), lines.slice(0, -1));
      refuses(dir, dropped, /record missing/);
    });
  });

  await t.step("a checkpoint whose announcing record was cut off", () => {
    withDir((dir) => {
      build(dir, 30, small({ keepSegments: 3 }));
      const cp = parseCheckpoint(Deno.readFileSync(`${dir}/${CHECKPOINT_FILE}`));
      assert.ok(typeof cp !== "string");
      // Remove every segment from the one holding the checkpoint record on.
      let lastSeq = 0;
      for (const name of segmentFiles(dir)) {
        const records = readRecords(`${dir}/${name}`);
        if (records.some((r) => r.seq >= cp.recordSeq)) Deno.removeSync(`${dir}/${name}`);
        else lastSeq = records.at(-1)!.seq;
      }
      refuses(dir, lastSeq + 1, /truncated tail/);
    });
  });

  await t.step("an edited checkpoint.json", () => {
    withDir((dir) => {
      build(dir, 30, small({ keepSegments: 3 }));
      const path = `${dir}/${CHECKPOINT_FILE}`;
      Deno.writeTextFileSync(path, Deno.readTextFileSync(path).replace(/"seq":(\d+)/, '"seq":1$1'));
      refuses(dir, null, /checkpoint invalid/);
    });
  });

  await t.step("open checks only the tail: a break in an older segment is left to verify", () => {
    withDir((dir) => {
      build(dir, 12);
      const lines = readLines(segmentPath(dir, 1));
      lines[1] = lines[1]!.replace("hello", "HELLO");
      writeLines(segmentPath(dir, 1), lines);
      {
        using log = AuditLog.open(dir, small());
        log.append(AGENT, "job.started");
      }
      const result = verifyAudit(dir);
      assert.equal(result.ok, false);
      assert.equal(result.firstBroken!.seq, 2);
    });
  });
});

Deno.test("a lone intent is synced inline; close ones share a group sync", async () => {
  await withDirAsync(async (dir) => {
    let syncs = 0;
    const io: AuditIo = {
      write: SYSTEM_IO.write,
      sync: SYSTEM_IO.sync,
      syncAsync: async (file) => {
        syncs++;
        await file.syncData();
      },
    };
    const log = openAuditLog(dir, { clock: steppingClock() }, io);
    try {
      const records = await Promise.all(
        Array.from({ length: 20 }, (_, i) => log.appendDurable(AGENT, "job.requested", { i })),
      );
      assert.deepEqual(records.map((r) => r.seq), Array.from({ length: 20 }, (_, i) => i + 1));
      assert.ok(syncs >= 1 && syncs <= 3, `20 concurrent intents took ${syncs} syncs`);
      assert.equal(verifyAudit(dir).ok, true);
    } finally {
      log.close();
    }
  });
});

Deno.test("a lazily written record is on disk at once and synced soon after", async () => {
  await withDirAsync(async (dir) => {
    let syncs = 0;
    const io: AuditIo = {
      write: SYSTEM_IO.write,
      sync: SYSTEM_IO.sync,
      syncAsync: async (file) => {
        syncs++;
        await file.syncData();
      },
    };
    const log = openAuditLog(dir, { clock: steppingClock() }, io);
    try {
      const r = log.write(AGENT, "job.finished", { status: "exited" });
      assert.equal(readRecords(segmentPath(dir, 1)).at(-1)!.seq, r.seq, "written at once");
      await log.durable(r.seq);
      assert.ok(syncs >= 1);
    } finally {
      log.close();
    }
  });
});

Deno.test("close syncs what was written lazily; a failed group sync latches the log", async () => {
  await withDirAsync(async (dir) => {
    let failAsync = false;
    const io: AuditIo = {
      write: SYSTEM_IO.write,
      // A slow disk: the inline sync takes far longer than LONE_INTENT_GAP_MS.
      sync: (file) => {
        const t0 = performance.now();
        SYSTEM_IO.sync(file);
        while (performance.now() - t0 < 5 * LONE_INTENT_GAP_MS) {
          // the disk is still flushing
        }
      },
      syncAsync: (file) =>
        failAsync ? Promise.reject(new Error("Input/output error (os error 5)")) : file.syncData(),
    };
    const log = openAuditLog(dir, { clock: steppingClock() }, io);
    try {
      log.write(AGENT, "job.finished", { i: 1 });
      failAsync = true;
      // The first of two close intents is synced inline; the second comes right after it ended,
      // however long it took, so it joins a group sync, which fails.
      const first = log.appendDurable(AGENT, "job.requested", { i: 2 });
      await assert.rejects(
        () => log.appendDurable(AGENT, "job.requested", { i: 3 }),
        isUnavailable,
      );
      await first;
      assert.equal(log.healthy, false);
      assert.throws(() => log.append(AGENT, "job.requested"), isUnavailable);
    } finally {
      log.close();
    }
    assert.equal(verifyAudit(dir).ok, true);
  });
});

Deno.test("resume reopens a log latched by a fault once the chain verifies; a broken chain stays refused", async (t) => {
  await t.step("the fault is gone: appends work again and the chain continues", () => {
    withDir((dir) => {
      const io = faultyIo();
      using log = openAuditLog(dir, { clock: steppingClock() }, io);
      fill(log, 3);
      io.fail = "partial";
      assert.throws(() => log.append(AGENT, "job.started", { i: 99 }), isUnavailable);
      io.fail = "none";
      const r = log.resume();
      assert.match(r.failure, /No space left/);
      assert.equal(r.verified_records, 3);
      assert.equal(log.healthy, true);
      const next = log.append(AGENT, "job.started", { i: 100 });
      assert.ok(next.seq >= 4);
      assert.equal(verifyAudit(dir).ok, true);
      assert.equal(log.tail(2)[0]!.event, "audit.recovered", "the torn half-line was cut");
      assert.deepEqual(log.resume(), { failure: "", verified_records: 0 }, "healthy: no-op");
    });
  });
  await t.step("the chain was broken meanwhile: resume refuses, naming the record", () => {
    withDir((dir) => {
      const io = faultyIo();
      using log = openAuditLog(dir, { clock: steppingClock() }, io);
      fill(log, 3);
      io.fail = "write";
      assert.throws(() => log.append(AGENT, "job.started"), isUnavailable);
      io.fail = "none";
      const path = segmentPath(dir, 1);
      Deno.writeTextFileSync(path, Deno.readTextFileSync(path).replace('"i":1', '"i":7'));
      assert.throws(
        () => log.resume(),
        (e) => isUnavailable(e) && /chain is broken/.test(e.message),
      );
      assert.equal(log.healthy, false);
    });
  });
});
