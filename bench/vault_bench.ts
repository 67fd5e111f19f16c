/**
 * (l) The vault's costs:
 *   - what vault values cost every terminal stream: the raw-stream redactor's MB/s over 64 MiB of
 *     coloured build output, with no secret, 16 and 256 daemon-wide secrets registered (each
 *     with its printed forms), and the same with an escape sequence in every line;
 *   - unlock (open) and set of a 64-entry vault, passphrase (scrypt 18) and identity, side by side
 *     with the `age` CLI decrypting the same file (the peer), and how long the daemon's thread
 *     stalled meanwhile (the crypto runs in a worker).
 */
import { Redactor, SecretSet } from "../src/output/mod.ts";
import { generateIdentity, VaultFile } from "../src/vault/mod.ts";

export async function vaultBench(
  o: { quick: boolean; out: (line: string) => void },
): Promise<void> {
  const { out } = o;
  out("(l) vault: redaction cost on terminal streams, unlock and set");
  const total = o.quick ? 8 << 20 : 64 << 20;
  const enc = new TextEncoder();
  const lines: string[] = [];
  for (let i = 0; i < 2000; i++) {
    lines.push(`compiling module src/lib/part_${i}.ts ... ok (${i % 97} ms) warning: unused ${i}`);
  }
  const plain = enc.encode(lines.join("\r\n") + "\r\n");
  const coloured = enc.encode(
    lines.map((l) => `\x1b[32m${l.slice(0, 9)}\x1b[0m${l.slice(9)}`)
      .join("\r\n") + "\r\n",
  );
  for (const secrets of [0, 16, 256]) {
    const set = new SecretSet();
    for (let i = 0; i < secrets; i++) {
      set.add(enc.encode(`vault-secret-${i}-${crypto.randomUUID()}`));
    }
    for (const [label, chunk] of [["plain", plain], ["coloured", coloured]] as const) {
      const r = new Redactor({ secrets: set }).stream();
      const t0 = performance.now();
      let done = 0;
      const piece = 16 * 1024;
      while (done < total) {
        for (let off = 0; off < chunk.length && done < total; off += piece) {
          r.push(chunk.subarray(off, off + piece));
          done += Math.min(piece, chunk.length - off);
        }
      }
      r.flush();
      const s = (performance.now() - t0) / 1000;
      out(
        `    redact ${label.padEnd(8)} with ${String(secrets).padStart(3)} vault secrets: ` +
          `${(done / s / 1048576).toFixed(0)} MB/s`,
      );
    }
  }

  const dir = await Deno.makeTempDir({ prefix: "termada-vault-bench-" });
  try {
    const id = await generateIdentity();
    const keyFile = `${dir}/key.txt`;
    await Deno.writeTextFile(keyFile, id.identity + "\n");
    for (
      const [label, key] of [
        ["identity", { identity: id.identity }],
        ["passphrase", { passphrase: "bench passphrase" }],
      ] as const
    ) {
      const path = `${dir}/${label}.age`;
      const file = new VaultFile(path);
      try {
        await file.init(key);
        let v = await file.open(key);
        for (let i = 0; i < 63; i++) {
          await v.set(`entry-${i}`, enc.encode(`value-${i}-${crypto.randomUUID()}`), {
            kind: "secret",
          });
          if (label === "passphrase" && i === 1) break; // each passphrase set is a scrypt run
        }
        v.lock();
        let stall = 0;
        let last = performance.now();
        const tick = setInterval(() => {
          const now = performance.now();
          stall = Math.max(stall, now - last);
          last = now;
        }, 5);
        const t0 = performance.now();
        v = await file.open(key);
        const open = performance.now() - t0;
        const t1 = performance.now();
        await v.set("entry-new", enc.encode("a new value of the bench"), { kind: "secret" });
        const set = performance.now() - t1;
        clearInterval(tick);
        v.lock();
        let peer = "n/a (no age CLI)";
        if (label === "identity") {
          const t2 = performance.now();
          const r = await new Deno.Command("age", {
            args: ["-d", "-i", keyFile, path],
            stdout: "null",
            stderr: "null",
          }).output().catch(() => undefined);
          if (r?.success) peer = `${(performance.now() - t2).toFixed(1)} ms`;
        } else peer = "not run (age -d -p reads the passphrase from a terminal)";
        out(
          `    ${label.padEnd(10)} unlock ${open.toFixed(1)} ms · set ${set.toFixed(1)} ms · ` +
            `longest stall of the daemon's thread ${stall.toFixed(1)} ms · age -d: ${peer}`,
        );
      } finally {
        await file.close();
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  await vaultBench({
    quick: Deno.env.get("BENCH_QUICK") === "1",
    out: (l) => Deno.stdout.writeSync(new TextEncoder().encode(l + "\n")),
  });
}
