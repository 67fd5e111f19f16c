/**
 * (m) Governance costs on the path of every call:
 *   - an agent JWT's offline verification (EdDSA and ES256; no cache of verified tokens);
 *   - the policy port's decision for an argv with 0 and 20 structured rules, side by side with
 *     the legacy glob lists alone (0 and 20 globs);
 *   - the budget ledger's admit + settle on a real store (SQLite, WAL) with 0 and 4 budgets;
 *   - a one-time grant issued and consumed (what each approved action costs at consume time).
 * Prints median and p99 (and ops/s where it is a rate). Runs alone with
 * `deno run -P=bench --no-prompt bench/governance_bench.ts` (BENCH_QUICK=1 for a short run).
 */
import { Config } from "../src/config/mod.ts";
import { policyPort } from "../src/daemon/mod.ts";
import {
  BudgetLedger,
  type BudgetRule,
  type JwtAlgorithm,
  JwtVerifier,
} from "../src/governance/mod.ts";
import { mint, mintKeys } from "../src/governance/_jwt_testing.ts";
import { loadShellParser } from "../src/policy/mod.ts";
import { Store } from "../src/store/mod.ts";

function pct(samples: readonly number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

/** Times `f` `n` times (after a warm-up) and returns the samples in µs. */
function timeSync(f: () => void, n: number): number[] {
  for (let i = 0; i < Math.min(1000, n); i++) f();
  const t: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = performance.now();
    f();
    t.push((performance.now() - a) * 1000);
  }
  return t;
}

const us = (n: number) => `${n.toFixed(1)} µs`;
const stats = (t: readonly number[]) => `p50 ${us(pct(t, 50))}, p99 ${us(pct(t, 99))}`;
const rate = (t: readonly number[]) =>
  `${(t.length / (t.reduce((a, b) => a + b, 0) / 1e6)).toFixed(0)} ops/s`;

const ISS = "https://idp.example";
const AUD = "termada";

async function jwtSection(n: number, out: (line: string) => void): Promise<void> {
  const algs: JwtAlgorithm[] = ["EdDSA", "ES256"];
  const keys = await Promise.all(algs.map((a) => mintKeys(a)));
  const verifier = await JwtVerifier.create({
    issuer: ISS,
    audience: AUD,
    keys: keys.map((k) => k.publicJwk),
    maxTtlSeconds: 3600,
    clockSkewSeconds: 60,
  });
  const now = Math.floor(Date.now() / 1000);
  for (const [i, alg] of algs.entries()) {
    const k = keys[i]!;
    const token = await mint(k.privateKey, alg, k.publicJwk.kid, {
      iss: ISS,
      aud: AUD,
      sub: "alice@example.com",
      agent_id: "bench",
      tenant: "acme",
      roles: ["dev"],
      iat: now - 5,
      exp: now + 1800,
    });
    for (let w = 0; w < 100; w++) await verifier.verify(token);
    const t: number[] = [];
    for (let r = 0; r < n; r++) {
      const a = performance.now();
      await verifier.verify(token);
      t.push((performance.now() - a) * 1000);
    }
    out(`    JwtVerifier.verify ${alg.padEnd(6)} (${token.length} chars): ${stats(t)} (n=${n})`);
  }
}

/** Twenty structured rules of the kinds a real policy holds (most of them judge commands). */
function twentyRules(): unknown[] {
  const rules: unknown[] = [
    { effect: "deny", action: "exec", resource: ["rm -rf *", "mkfs*", "dd *"] },
    { effect: "deny", action: ["exec", "input"], resource: "curl * | *sh" },
    { effect: "deny", action: "exec", resource: "git push --force*" },
    { effect: "confirm", action: "exec", resource: "git push *", approval: { quorum: 2 } },
    { effect: "confirm", action: "exec", resource: ["npm publish*", "deno publish*"] },
    { effect: "confirm", action: "exec", resource: "sudo *", approval: { mfa: true } },
    { effect: "deny", action: "exec", resource: "kubectl delete *", environment: "prod" },
    { effect: "confirm", action: "exec", resource: "terraform apply*" },
    { effect: "deny", action: "exec", principal: "contractor-*", resource: "ssh *" },
    { effect: "confirm", action: "exec", tenant: "acme", resource: "docker push *" },
    {
      effect: "allow",
      action: "exec",
      resource: ["git *", "ls *", "cat *", "grep *", "npm *", "deno *", "make *", "echo *"],
    },
    { effect: "allow", action: "exec", resource: ["cargo *", "go *", "python3 -m pytest*"] },
    { effect: "deny", action: "exec", risk: "critical" },
    { effect: "confirm", action: "exec", risk: "high", environment: "prod*" },
    {
      effect: "deny",
      action: "exec",
      time: { days: ["sat", "sun"], from: "00:00", to: "06:00", tz: "Europe/Paris" },
      resource: "git push *",
    },
    { effect: "deny", action: "file.write", resource: ["/etc/**", "/usr/**"] },
    { effect: "confirm", action: "file.read", resource: "/home/*/.ssh/**" },
    { effect: "allow", action: "file.read", resource: "/srv/**" },
    { effect: "confirm", action: "session", resource: "prod-*" },
    { effect: "deny", action: "forward", resource: "*:*:22" },
  ];
  return rules;
}

/** Twenty glob patterns spread over the three lists. */
const TWENTY_GLOBS = {
  allow: [
    "git *",
    "ls *",
    "cat *",
    "grep *",
    "npm *",
    "deno *",
    "make *",
    "echo *",
    "cargo *",
    "go *",
  ],
  deny: ["rm -rf *", "mkfs*", "dd *", "curl * | *sh", "git push --force*"],
  confirm: ["git push *", "npm publish*", "sudo *", "terraform apply*", "docker push *"],
};

function decideSection(n: number, out: (line: string) => void): void {
  const command = ["git", "status", "--short"];
  const portFor = (policy: Record<string, unknown>) =>
    policyPort(Config.parse({ policies: { default: policy } }), {
      PATH: Deno.env.get("PATH"),
      execGate: () => true,
      whoIs: () => ({ principal: "alice@example.com", tenant: "acme" }),
    });
  const rows: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ["structured rules", {}, { rules: twentyRules() }],
    ["glob lists only ", {}, TWENTY_GLOBS],
  ];
  out(
    `    policy port decide(${JSON.stringify(command)}), n=${n}:        0 rules` +
      " ".repeat(22) + "20 rules",
  );
  for (const [label, zero, twenty] of rows) {
    const cells = [zero, twenty].map((policy) => {
      const p = portFor(policy);
      const expect = p.decide("bench", command).action;
      if (expect !== "allow") throw new Error(`${label}: expected allow, got ${expect}`);
      return stats(timeSync(() => p.decide("bench", command), n));
    });
    out(`      ${label.padEnd(44)} ${cells[0]!.padEnd(30)} ${cells[1]}`);
  }
}

function budgetSection(n: number, out: (line: string) => void, store: Store): void {
  const ledger = new BudgetLedger(store);
  const big = 1e12;
  const four: BudgetRule[] = [
    {
      policy: "default",
      name: "ops",
      scope: "global",
      metric: "operations",
      limit: big,
      windowMs: 3_600_000,
    },
    {
      policy: "default",
      name: "per-principal",
      scope: "principal",
      metric: "operations",
      limit: big,
      windowMs: 86_400_000,
    },
    {
      policy: "default",
      name: "tenant-cost",
      scope: "tenant",
      metric: "cost",
      limit: big,
      windowMs: 86_400_000,
    },
    {
      policy: "default",
      name: "failures",
      scope: "recipient",
      metric: "failures",
      limit: big,
      windowMs: 3_600_000,
    },
  ];
  let seq = 0;
  for (const [label, rules] of [["0 budgets", []], ["4 budgets", four]] as const) {
    const once = () => {
      const id = `act_bench${String(++seq).padStart(8, "0")}`;
      ledger.admit(
        rules,
        {
          actionId: id,
          kind: "exec",
          principal: "alice@example.com",
          tenant: "acme",
          recipient: "local",
          production: false,
          readOnly: false,
        },
        { owner: "bench", summary: ["git", "status"] },
        { cost: 0.01 },
      );
      ledger.settle(id, { ok: true, cost: 0.01, runtime_s: 0.2 });
    };
    const t = timeSync(once, n);
    out(`    BudgetLedger admit + settle, ${label}: ${stats(t)}, ${rate(t)} (n=${n})`);
    store.checkpoint();
  }
}

function grantSection(n: number, out: (line: string) => void, store: Store): void {
  let seq = 0;
  const hash = "sha256:" + "ab".repeat(32);
  const t = timeSync(() => {
    const action = `act_grant${String(++seq).padStart(8, "0")}`;
    const now = Date.now();
    const id = store.grants.issue({
      approval_id: `apr_${seq}`,
      action_id: action,
      action_hash: hash,
      expires_at: now + 60_000,
    });
    const used = store.grants.consume(id, action, hash, now);
    if (used !== "ok") throw new Error(`grant consume: ${used}`);
  }, n);
  out(`    grant issue + consume: ${stats(t)}, ${rate(t)} (n=${n})`);
}

export async function governanceBench(
  o: { quick: boolean; out: (line: string) => void },
): Promise<void> {
  const { out } = o;
  out("(m) governance: JWT verification, structured rules, budgets, grants");
  await loadShellParser();
  await jwtSection(o.quick ? 200 : 2000, out);
  decideSection(o.quick ? 500 : 5000, out);
  const dir = await Deno.makeTempDir({ prefix: "termada-governance-bench-" });
  try {
    const store = Store.open(`${dir}/state/termada.db`);
    try {
      budgetSection(o.quick ? 200 : 2000, out, store);
      grantSection(o.quick ? 200 : 2000, out, store);
    } finally {
      store.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) {
  await governanceBench({
    quick: Deno.env.get("BENCH_QUICK") === "1",
    out: (l) => Deno.stdout.writeSync(new TextEncoder().encode(l + "\n")),
  });
}
