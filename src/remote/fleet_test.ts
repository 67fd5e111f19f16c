/**
 * Fleet runs against real parts: real OpenSSH sshd instances on 127.0.0.1 (one of them stopped,
 * so its port refuses), a real ssh2 client per connect, real remote processes.
 */
import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import type { ServerBinding } from "./binding.ts";
import {
  FLEET_LIMITS,
  fleetCommandLine,
  type FleetConnection,
  FleetLimiter,
  type FleetOptions,
  type FleetTargetResult,
  runFleet,
} from "./fleet.ts";
import { loadSsh2, type SshClient } from "./ssh2.ts";
import { sshdAvailable, TestSshd } from "./_test_sshd.ts";

const { Client } = await loadSsh2();

const ignore = !sshdAvailable();
const dec = new TextDecoder();
const enc = new TextEncoder();
const KIB = 1024;
const MIB = 1024 * KIB;
const noRedact = (s: string) => s;
/**
 * For steps that compare whole outputs: this machine's login scripts (pyenv's rehash in
 * root's .bashrc) sometimes print to stderr when several sessions start at once.
 */
const SERIAL = 1;

function binding(name: string, sshd: TestSshd): ServerBinding {
  return { name, host: "127.0.0.1", port: sshd.port, user: sshd.user, tags: [] };
}

/** A unique number for `sleep`, so pgrep finds this test's processes only. */
function marker(): string {
  return `30.${
    String(crypto.getRandomValues(new Uint32Array(1))[0]! % 1_000_000).padStart(6, "0")
  }`;
}

async function remotePids(pattern: string): Promise<string[]> {
  const out = await new Deno.Command("pgrep", { args: ["-af", pattern], stdout: "piped" }).output();
  return dec.decode(out.stdout).split("\n").filter((l) => l !== "");
}

/**
 * A pgrep pattern for the `sleep <marker>` processes themselves. Whether the remote shell
 * (`bash -c "echo …; sleep <marker> </dev/null"`) execs its last command or forks it depends on
 * the server's bash and login files, so a loose pattern may count the shell too.
 */
function sleeps(m: string): string {
  return `^sleep ${m.replace(".", "\\.")}$`;
}

/** Polls (with a deadline) until `ok` holds for the remote processes matching `pattern`. */
async function waitPids(pattern: string, ok: (n: number) => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await remotePids(pattern);
    if (ok(found.length)) return;
    if (Date.now() > deadline) {
      throw new Error(`${found.length} processes match "${pattern}":\n${found.join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * The caller's side: a real ssh2 client per connect (test only: any host key is accepted), with
 * connect errors wrapped as SERVER_UNREACHABLE. Counts connections in use to check concurrency.
 */
class Connector implements AsyncDisposable {
  readonly #servers: Map<number, TestSshd>;
  readonly #closed: Promise<void>[] = [];
  connects = 0;
  live = 0;
  maxLive = 0;
  releases = 0;

  constructor(servers: readonly TestSshd[]) {
    this.#servers = new Map(servers.map((s) => [s.port, s]));
  }

  readonly connect = (target: ServerBinding, signal: AbortSignal): Promise<FleetConnection> => {
    this.connects++;
    this.live++;
    this.maxLive = Math.max(this.maxLive, this.live);
    const sshd = this.#servers.get(target.port)!;
    const client = new Client();
    this.#closed.push(new Promise<void>((r) => client.once("close", () => r())));
    // A dropped connection emits 'error' after 'ready' too; unhandled it would throw.
    client.on("error", () => {});
    return new Promise<FleetConnection>((resolve, reject) => {
      const onAbort = () => {
        this.live--;
        client.end();
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      client.once("ready", () => {
        signal.removeEventListener("abort", onAbort);
        let released = false;
        resolve({
          client,
          release: () => {
            assert.ok(!released, "released twice");
            released = true;
            this.releases++;
            this.live--;
            client.end();
          },
        });
      });
      client.once("error", (e) => {
        signal.removeEventListener("abort", onAbort);
        this.live--;
        reject(
          new TermadaError(
            "SERVER_UNREACHABLE",
            `Cannot connect to "${target.name}": ${e.message}`,
            {
              cause: e,
            },
          ),
        );
      });
      client.connect({ ...sshd.connectOptions, hostVerifier: () => true, readyTimeout: 5_000 });
    });
  };

  async [Symbol.asyncDispose](): Promise<void> {
    await Promise.all(this.#closed);
  }
}

/** The lead's pool in small: one connected client per server, lent out again and again. */
class SharedClients implements AsyncDisposable {
  readonly #clients = new Map<number, SshClient>();
  readonly #closed: Promise<void>[] = [];
  lent = 0;

  static async open(servers: readonly TestSshd[]): Promise<SharedClients> {
    const s = new SharedClients();
    for (const sshd of servers) {
      const client = new Client();
      s.#closed.push(new Promise<void>((r) => client.once("close", () => r())));
      client.on("error", () => {});
      await new Promise<void>((resolve, reject) => {
        client.once("ready", () => resolve()).once("error", reject);
        client.connect({ ...sshd.connectOptions, hostVerifier: () => true });
      });
      s.#clients.set(sshd.port, client);
    }
    return s;
  }

  readonly connect = (target: ServerBinding): Promise<FleetConnection> => {
    this.lent++;
    return Promise.resolve({ client: this.#clients.get(target.port)!, release: () => this.lent-- });
  };

  async [Symbol.asyncDispose](): Promise<void> {
    for (const c of this.#clients.values()) c.end();
    await Promise.all(this.#closed);
  }
}

Deno.test("fleetCommandLine quotes every word so a POSIX shell reads the argv back exactly", async () => {
  assert.equal(fleetCommandLine(["echo", "hi"]), "echo hi");
  assert.equal(fleetCommandLine(["if", "x"]), "'if' x");
  assert.equal(fleetCommandLine(["A=1", "x"]), "'A=1' x");
  const words = ["a b", "it's", '"q"', "$HOME", "a;b", "x\ny", "tab\there", "`id`", "*", "", "\\"];
  for (const sh of ["sh", "bash"]) {
    const line = fleetCommandLine(["printf", "%s\\n", ...words]);
    const out = await new Deno.Command(sh, { args: ["-c", line], stdout: "piped" }).output();
    assert.equal(dec.decode(out.stdout), words.map((w) => w + "\n").join(""), sh);
  }
});

Deno.test("runFleet refuses argv it cannot carry exactly and more than 256 servers", async () => {
  const limiter = new FleetLimiter();
  let connects = 0;
  const o: FleetOptions = {
    connect: () => {
      connects++;
      return Promise.reject(new Error("not reached"));
    },
    redact: noRedact,
  };
  const t = [{ name: "a", host: "127.0.0.1", port: 22, user: "u", tags: [] }];
  const bad = async (argv: string[], targets = t, extra: Partial<FleetOptions> = {}) => {
    await assert.rejects(
      runFleet(argv, targets, limiter, { ...o, ...extra }),
      (e) => e instanceof TermadaError && e.code === "INVALID_ARGUMENT",
    );
  };
  await bad([]);
  await bad(["echo", "a\0b"]);
  await bad(["echo", "x".repeat(FLEET_LIMITS.wordBytes + 1)]);
  await bad(["echo", "é".repeat(FLEET_LIMITS.wordBytes / 2 + 1)]);
  await bad(["echo", "x".repeat(FLEET_LIMITS.wordBytes), "y".repeat(FLEET_LIMITS.wordBytes)]);
  await bad(["echo", "\ud800"]);
  const many = Array.from({ length: 257 }, (_, i) => ({ ...t[0]!, name: `s${i}` }));
  await bad(["true"], many);
  await bad(["true"], t, { timeoutMs: 0 });
  await bad(["true"], t, { timeoutMs: FLEET_LIMITS.maxTimeoutMs + 1 });
  await bad(["true"], t, { concurrency: 0 });
  assert.equal(connects, 0);
  assert.deepEqual(await runFleet(["true"], [], limiter, o), []);
  // 257 entries naming 256 distinct servers are fine: duplicates run once.
  const cancelled = new AbortController();
  cancelled.abort();
  const r = await runFleet(["true"], [...many.slice(0, 256), many[0]!], limiter, {
    ...o,
    signal: cancelled.signal,
  });
  assert.equal(r.length, 256);
  assert.ok(r.every((x) => x.status === "cancelled"));
  assert.equal(connects, 0);
});

Deno.test("FleetLimiter serves waiters first come first served and never exceeds its maximum", async () => {
  const l = new FleetLimiter(2);
  const a = await l.acquire();
  const b = await l.acquire();
  const order: string[] = [];
  const c = l.acquire().then((r) => (order.push("c"), r));
  const gone = new AbortController();
  const d = l.acquire(gone.signal);
  const e = l.acquire().then((r) => (order.push("e"), r));
  assert.equal(l.running, 2);
  assert.equal(l.waiting, 3);
  gone.abort(new Error("gone"));
  await assert.rejects(d, /gone/);
  assert.equal(l.waiting, 2);
  a();
  a(); // a second call gives nothing back twice
  const rc = await c;
  assert.equal(l.running, 2);
  assert.equal(l.waiting, 1);
  b();
  const re = await e;
  assert.deepEqual(order, ["c", "e"]);
  rc();
  re();
  assert.equal(l.running, 0);
  await assert.rejects(l.acquire(AbortSignal.abort(new Error("already"))), /already/);
  assert.throws(() => new FleetLimiter(0), RangeError);
});

Deno.test({
  name: "runFleet on real sshd servers",
  ignore,
  async fn(t) {
    const up = [await TestSshd.start(), await TestSshd.start(), await TestSshd.start()];
    const down = await TestSshd.start();
    await down.stop();
    const all = [...up, down];
    const limiter = new FleetLimiter();
    const three = up.map((s, i) => binding(`web${i + 1}`, s));
    try {
      await t.step("exit codes are exact per server", async () => {
        await using c = new Connector(all);
        const results = await Promise.all(
          three.map((b, i) =>
            runFleet(["sh", "-c", `exit ${i + 2}`], [b], limiter, {
              connect: c.connect,
              redact: noRedact,
            })
          ),
        );
        assert.deepEqual(results.map((r) => [r[0]!.status, r[0]!.exit_code]), [
          ["exited", 2],
          ["exited", 3],
          ["exited", 4],
        ]);
        const r = await runFleet(["sh", "-c", "exit 3"], three, limiter, {
          connect: c.connect,
          redact: noRedact,
        });
        assert.deepEqual(r.map((x) => [x.server, x.status, x.exit_code]), [
          ["web1", "exited", 3],
          ["web2", "exited", 3],
          ["web3", "exited", 3],
        ]);
        const k = await runFleet(["sh", "-c", "kill -s TERM $$"], [three[0]!], limiter, {
          connect: c.connect,
          redact: noRedact,
        });
        // The login shell runs the command as its child: a signal death is the shell's 128 + n,
        // unless the shell exec'd the command itself and sshd reports the signal.
        assert.equal(k[0]!.status, "exited");
        assert.ok(k[0]!.signal === "SIGTERM" || k[0]!.exit_code === 143, JSON.stringify(k[0]));
        assert.equal(c.releases, c.connects);
      });

      await t.step("argv words reach the server exactly, stdout and stderr both kept", async () => {
        await using c = new Connector(all);
        const words = [
          "a b",
          "it's",
          '"q"',
          "$HOME",
          "a;b",
          "x\ny",
          "`id`",
          "*",
          "",
          "\\n",
          "é€😀",
        ];
        const r = await runFleet(["printf", "%s\\n", ...words], three, limiter, {
          connect: c.connect,
          redact: noRedact,
          concurrency: SERIAL,
        });
        const want = words.map((w) => w + "\n").join("");
        for (const x of r) {
          assert.equal(x.status, "exited");
          assert.equal(x.exit_code, 0);
          assert.equal(x.output, want);
          assert.equal(x.output_bytes, enc.encode(want).length);
          assert.equal(x.truncated, false);
        }
        const both = await runFleet(
          ["sh", "-c", "echo out; sleep 0.1; echo err >&2; sleep 0.1; echo out2; cat"],
          [three[0]!],
          limiter,
          { connect: c.connect, redact: noRedact, timeoutMs: 10_000 },
        );
        // The longest word allowed (64 KiB of two-byte characters) goes through whole.
        const long = "é".repeat(FLEET_LIMITS.wordBytes / 2);
        const lr = await runFleet(["printf", "%s", long], [three[1]!], limiter, {
          connect: c.connect,
          redact: noRedact,
        });
        assert.equal(lr[0]!.output, long);
        // `cat` gets end of input at once: a fleet command has no stdin.
        assert.equal(both[0]!.status, "exited");
        assert.equal(both[0]!.output, "out\nerr\nout2\n");
      });

      await t.step("a server that is down is unreachable fast and the others run", async () => {
        await using c = new Connector(all);
        const targets = [three[0]!, binding("db1", down), three[1]!];
        const r = await runFleet(["echo", "ok"], targets, limiter, {
          connect: c.connect,
          redact: noRedact,
        });
        assert.deepEqual(r.map((x) => [x.server, x.status]), [
          ["web1", "exited"],
          ["db1", "unreachable"],
          ["web2", "exited"],
        ]);
        assert.equal(r[1]!.error_code, "SERVER_UNREACHABLE");
        assert.match(r[1]!.error!, /Cannot connect to "db1"/);
        assert.ok(r[1]!.duration_ms < 2_000, `${r[1]!.duration_ms} ms`);
        assert.match(r[0]!.output, /ok\n$/);
      });

      await t.step(
        "two calls sharing one limiter never run more than 5 targets at once",
        async () => {
          await using c = new Connector(all);
          const names = (p: string, n: number) =>
            Array.from({ length: n }, (_, i) => binding(`${p}${i}`, up[i % up.length]!));
          let bLive = 0;
          let bMax = 0;
          const bConnect: FleetOptions["connect"] = async (target, signal) => {
            bLive++;
            bMax = Math.max(bMax, bLive);
            const conn = await c.connect(target, signal);
            return { client: conn.client, release: () => (bLive--, conn.release()) };
          };
          const [a, b] = await Promise.all([
            runFleet(["sleep", "0.3"], names("a", 12), limiter, {
              connect: c.connect,
              redact: noRedact,
            }),
            runFleet(["sleep", "0.3"], names("b", 12), limiter, {
              connect: bConnect,
              redact: noRedact,
              concurrency: 2,
            }),
          ]);
          assert.ok([...a, ...b].every((x) => x.status === "exited" && x.exit_code === 0));
          assert.equal(c.maxLive, 5);
          assert.ok(bMax <= 2, `call b ran ${bMax} at once`);
          assert.equal(c.connects, 24);
          assert.equal(c.releases, 24);
          assert.equal(limiter.running, 0);
          assert.equal(limiter.waiting, 0);
        },
      );

      await t.step(
        "a target over its timeout is timed_out and its remote processes are gone",
        async () => {
          await using c = new Connector(all);
          const m1 = marker();
          const m2 = marker();
          const r = await runFleet(["sleep", m1], [three[0]!], limiter, {
            connect: c.connect,
            redact: noRedact,
            timeoutMs: 500,
          });
          assert.equal(r[0]!.status, "timed_out");
          assert.match(r[0]!.error!, /Timed out after 500 ms/);
          await waitPids(`sleep ${m1}`, (n) => n === 0, 10_000);
          // A shell with children: the whole process group goes.
          const r2 = await runFleet(["sh", "-c", `sleep ${m2}; echo never`], [three[1]!], limiter, {
            connect: c.connect,
            redact: noRedact,
            timeoutMs: 500,
          });
          assert.equal(r2[0]!.status, "timed_out");
          assert.equal(r2[0]!.output, "");
          await waitPids(`sleep ${m2}`, (n) => n === 0, 10_000);
          assert.equal(c.releases, c.connects);
        },
      );

      await t.step(
        "a timeout while connecting is timed_out and the connection is given back",
        async () => {
          let released = 0;
          const r = await runFleet(["true"], [three[0]!], limiter, {
            // A pool that ignores the signal and answers late.
            connect: () =>
              new Promise((resolve) =>
                setTimeout(
                  () => resolve({ client: undefined as never, release: () => released++ }),
                  300,
                )
              ),
            redact: noRedact,
            timeoutMs: 50,
          });
          assert.equal(r[0]!.status, "timed_out");
          assert.match(r[0]!.error!, /while connecting/);
          await new Promise((ok) => setTimeout(ok, 400));
          assert.equal(released, 1);
        },
      );

      await t.step(
        "output beyond the target's share is cut on a character boundary and counted",
        async () => {
          await using c = new Connector(all);
          // 7-byte lines "€éa\n": 3 MiB + 4 bytes ends inside a character.
          const bytes = 3 * MIB + 4;
          const r = await runFleet(
            ["sh", "-c", `yes '€éa' | head -c ${bytes}`],
            [three[0]!],
            limiter,
            {
              connect: c.connect,
              redact: noRedact,
            },
          );
          const x = r[0]!;
          assert.equal(x.status, "exited");
          assert.equal(x.truncated, true);
          assert.equal(x.output_bytes, bytes);
          const kept = enc.encode(x.output).length;
          assert.ok(
            kept <= FLEET_LIMITS.totalOutputBytes && kept > FLEET_LIMITS.totalOutputBytes - 4,
          );
          assert.ok(!x.output.includes("\ufffd"));
          assert.ok("€éa\n".repeat(Math.ceil(x.output.length / 4) + 1).startsWith(x.output));
        },
      );

      await t.step("output is redacted before it is kept", async () => {
        await using c = new Connector(all);
        const redact = (s: string) => s.replaceAll("hunter2-secret", "[REDACTED]");
        const r = await runFleet(
          ["sh", "-c", "echo pw=hunter2-secret; echo hunter2-secret >&2"],
          three,
          limiter,
          { connect: c.connect, redact, concurrency: SERIAL },
        );
        for (const x of r) assert.equal(x.output, "pw=[REDACTED]\n[REDACTED]\n");
      });

      await t.step(
        "256 targets keep at most 2 MiB together, secrets across the cut masked",
        async () => {
          await using pool = await SharedClients.open(up);
          const targets = Array.from({ length: 256 }, (_, i) => binding(`node${i}`, up[i % 3]!));
          // Each target: 8180 bytes, a secret across byte 8192 (the share of 256), then 80 kB:
          // more than the 64 KiB + 8 KiB a target captures.
          const script =
            `head -c 8180 /dev/zero | tr '\\0' x; printf SECRET-TOKEN-12345; yes é | head -c 80000`;
          const redact = (s: string) => s.replaceAll("SECRET-TOKEN-12345", "[REDACTED]");
          const done: FleetTargetResult[] = [];
          const r = await runFleet(["sh", "-c", script], targets, limiter, {
            connect: pool.connect,
            redact,
            onTargetDone: (x) => done.push(x),
          });
          assert.equal(r.length, 256);
          assert.equal(done.length, 256);
          assert.deepEqual(r.map((x) => x.server), targets.map((b) => b.name));
          let total = 0;
          let exact = 0;
          for (const x of r) {
            assert.equal(x.status, "exited");
            assert.equal(x.exit_code, 0);
            assert.equal(x.truncated, true);
            assert.ok(x.output_bytes >= 8180 + 18 + 80_000);
            assert.ok(!x.output.includes("SECRET") && !x.output.includes("TOKEN"));
            total += enc.encode(x.output).length;
            // Login-script noise (see SERIAL) may come first on a few targets.
            if (x.output_bytes !== 8180 + 18 + 80_000) continue;
            exact++;
            assert.ok(x.output.startsWith("x".repeat(8180) + "[REDACTED]"));
            assert.equal(enc.encode(x.output).length, FLEET_LIMITS.totalOutputBytes / 256);
          }
          assert.ok(exact >= 250, `${exact} targets without noise`);
          assert.ok(total <= FLEET_LIMITS.totalOutputBytes, `${total} bytes`);
          assert.equal(pool.lent, 0);
        },
      );

      await t.step("cancelling stops running targets and never starts queued ones", async () => {
        await using c = new Connector(all);
        const m = marker();
        const stop = new AbortController();
        const started: string[] = [];
        const done: FleetTargetResult[] = [];
        const targets = Array.from({ length: 6 }, (_, i) => binding(`app${i}`, up[i % 3]!));
        const run = runFleet(["sleep", m], targets, limiter, {
          connect: c.connect,
          redact: noRedact,
          concurrency: 2,
          signal: stop.signal,
          onTargetStart: (s) => started.push(s),
          onTargetDone: (x) => done.push(x),
        });
        try {
          await waitPids(sleeps(m), (n) => n === 2);
        } finally {
          stop.abort();
        }
        const r = await run;
        assert.deepEqual(started, ["app0", "app1"]);
        assert.ok(r.every((x) => x.status === "cancelled"));
        assert.match(r[0]!.error!, /Cancelled while the command ran/);
        assert.equal(r[5]!.error, "Cancelled before it started");
        assert.equal(done.length, 6);
        assert.equal(c.connects, 2);
        assert.equal(c.releases, 2);
        await waitPids(`sleep ${m}`, (n) => n === 0, 10_000);
        assert.equal(limiter.running, 0);
      });

      await t.step("a lost connection fails the target", async () => {
        await using c = new Connector(all);
        const m = marker();
        const run = runFleet(["sleep", m], [three[2]!], limiter, {
          connect: c.connect,
          redact: noRedact,
        });
        await waitPids(sleeps(m), (n) => n === 1);
        await up[2]!.dropConnections();
        const r = await run;
        assert.equal(r[0]!.status, "failed");
        assert.ok(r[0]!.error);
        assert.equal(c.releases, 1);
        // The orphaned remote sleep is this test's to clean.
        await new Deno.Command("pkill", { args: ["-f", `sleep ${m}`] }).output();
      });

      await t.step("duplicate targets run once", async () => {
        await using c = new Connector(all);
        const r = await runFleet(["echo", "x"], [three[0]!, three[1]!, three[0]!], limiter, {
          connect: c.connect,
          redact: noRedact,
        });
        assert.deepEqual(r.map((x) => x.server), ["web1", "web2"]);
        assert.equal(c.connects, 2);
      });

      await t.step("a callback that throws cancels the rest and rejects the call", async () => {
        await using c = new Connector(all);
        const targets = Array.from({ length: 6 }, (_, i) => binding(`k${i}`, up[i % 3]!));
        let done = 0;
        await assert.rejects(
          runFleet(["echo", "x"], targets, limiter, {
            connect: c.connect,
            redact: noRedact,
            concurrency: 1,
            onTargetDone: () => {
              if (done++ === 0) throw new TermadaError("AUDIT_UNAVAILABLE", "Audit is down");
            },
          }),
          (e) => e instanceof TermadaError && e.code === "AUDIT_UNAVAILABLE",
        );
        assert.equal(c.connects, 1);
        assert.equal(done, 6);
        assert.equal(limiter.running, 0);
      });
    } finally {
      for (const s of all) await s[Symbol.asyncDispose]();
    }
  },
});
