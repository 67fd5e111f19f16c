/**
 * Child process for tests/vault_age_cli_test.ts: another process writing the same vault.
 * Usage: `vault_set.ts <vault path> <name>...`, key in env `TEST_VAULT_IDENTITY` or
 * `TEST_VAULT_PASSPHRASE`. Opens the vault, prints `ready`, waits for one line on stdin (so two
 * children can be released together, both holding a stale view), then sets each name to
 * `value of <name>` and prints `done`. Under `TERMADA_VAULT_TEST_CRASH=after-partial-write`
 * the first set kills this process half-way through writing its temp file.
 */
import { VaultFile, type VaultKey } from "../../src/vault/mod.ts";

const [path, ...names] = Deno.args;
if (!path) throw new TypeError("usage: vault_set.ts <vault path> <name>...");
const identity = Deno.env.get("TEST_VAULT_IDENTITY");
const key: VaultKey = identity
  ? { identity }
  : { passphrase: Deno.env.get("TEST_VAULT_PASSPHRASE") ?? "" };

function say(line: string): void {
  const bytes = new TextEncoder().encode(line + "\n");
  for (let at = 0; at < bytes.length;) at += Deno.stdout.writeSync(bytes.subarray(at));
}

async function waitForLine(): Promise<void> {
  const reader = Deno.stdin.readable.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done || value.includes(0x0a)) return;
    }
  } finally {
    reader.releaseLock();
  }
}

await using vf = new VaultFile(path, { scryptWorkFactor: 10 });
const vault = await vf.open(key);
say("ready");
await waitForLine();
for (const name of names) {
  await vault.set(name, new TextEncoder().encode(`value of ${name}`), { kind: "secret" });
}
vault.lock();
say("done");
