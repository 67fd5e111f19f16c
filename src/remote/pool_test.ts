/**
 * The SSH pool against a real OpenSSH sshd on 127.0.0.1 (skipped, and said, without sshd): a
 * lease's `lost` follows the connection while it is held, and lets go of what was chained to it
 * once released, so one long-lived connection does not keep every job that ever used it.
 */
import assert from "node:assert/strict";
import { aliveAfterGc } from "../shared/_test_gc.ts";
import { KnownHosts } from "./known_hosts.ts";
import { SshPool } from "./pool.ts";
import { clientHome, sshdAvailable, TestSshd } from "./_test_sshd.ts";

const ignore = !sshdAvailable();

/**
 * Many leases come and go on one connection, each with a listener holding a payload; weak refs
 * to those payloads (in a function of its own, so no local of the loop keeps the last one).
 */
async function churn(
  pool: SshPool,
  b: Parameters<SshPool["acquire"]>[0],
  shared: unknown,
): Promise<WeakRef<object>[]> {
  const payloads: WeakRef<object>[] = [];
  for (let i = 0; i < 200; i++) {
    const lease = await pool.acquire(b);
    assert.equal(lease.client, shared, "the connection is shared");
    const payload = { bytes: new Uint8Array(1024) };
    payloads.push(new WeakRef(payload));
    void lease.lost.then(() => payload.bytes.length);
    lease.release();
  }
  return payloads;
}

Deno.test({
  name: `a released lease lets go of its listeners; a held one hears the connection drop${
    ignore ? " (ignored: no sshd)" : ""
  }`,
  ignore,
  async fn() {
    await using sshd = await TestSshd.start();
    const home = clientHome(sshd);
    const pool = new SshPool({
      knownHosts: new KnownHosts({ path: `${home}/known_hosts.json` }),
      credentials: { home },
    });
    const b = { name: "t", host: "127.0.0.1", port: sshd.port, user: sshd.user, tags: [] };
    try {
      const keep = await pool.acquire(b);
      const payloads = await churn(pool, b, keep.client);
      const alive = await aliveAfterGc(payloads);
      assert.equal(alive, 0, `${alive} released leases' listeners are still held`);
      // The lease still held hears the drop, with the reason.
      keep.client.end();
      const why = await keep.lost;
      assert.match(why, /closed/);
      keep.release();
    } finally {
      await pool.close();
      await Deno.remove(home, { recursive: true });
    }
  },
});
