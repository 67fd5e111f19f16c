/**
 * The layering, checked on the source: which folder may import which, that folders reach each
 * other only through their `mod.ts`, and that no edge (MCP, HTTP, CLI, the entry point) can get
 * hold of the engine — control is the layer they call, so nothing they do can bypass the gate.
 */
import assert from "node:assert/strict";
import { ROOT } from "./_daemon.ts";

/** Folder → the folders it may import (its own files aside). */
const ALLOWED: Record<string, string[]> = {
  shared: [],
  wire: ["shared", "parse"],
  // Output parsers (src/parse): text in, typed JSON out; the wire contract embeds their schemas.
  parse: ["shared"],
  paths: ["shared"],
  ipc: ["shared"],
  config: ["shared", "paths", "notify"],
  audit: ["shared"],
  store: ["shared", "wire"],
  output: ["shared"],
  pty: ["shared"],
  sandbox: ["shared", "pty"],
  shell: ["shared"],
  policy: ["shared"],
  // The vault's file and crypto (src/vault): no knowledge of who uses it.
  vault: ["shared"],
  engine: ["shared", "wire", "output", "pty", "shell", "sandbox"],
  // Beside the engine: SSH mechanics, and the remote launcher the engine starts sessions with.
  remote: ["shared", "config", "engine", "pty", "shell"],
  // Identity trust, budgets and anchors (src/governance): durable state through the store only.
  governance: ["shared", "wire", "store", "audit"],
  // Content-addressed directory snapshots (src/snapshot): files only, no knowledge of who asks.
  snapshot: ["shared"],
  // Desktop and Telegram notifications (src/notify): the caller maps events and injects redaction.
  notify: ["shared"],
  // Release assets, verified download and atomic self-replace (src/update).
  update: ["shared"],
  // Out-of-process MCP plugins (src/plugins): processes, transport, bounds, supervision.
  plugins: ["shared", "config"],
  // Typed adapters (src/adapters): prepare → execute → verify → compensate, durable phases.
  adapters: ["shared", "wire"],
  control: [
    "plugins",
    "adapters",
    "shared",
    "wire",
    "engine",
    "output",
    "store",
    "audit",
    "policy",
    "remote",
    "vault",
    "governance",
    "snapshot",
    "parse",
  ],
  mission: ["shared", "wire", "control", "store", "audit", "shell"],
  mcp: ["shared", "wire", "control", "mission", "parse"],
  api: ["shared", "wire", "control", "mcp", "mission", "vault"],
  client: ["shared", "paths", "ipc", "config"],
  daemon: [
    "shared",
    "wire",
    "paths",
    "ipc",
    "config",
    "audit",
    "store",
    "output",
    "policy",
    "sandbox",
    "remote",
    "control",
    "mission",
    "mcp",
    "api",
    "vault",
    "governance",
    "notify",
    "plugins",
    "adapters",
  ],
  cli: ["shared", "wire", "config", "audit", "client", "daemon", "vault", "governance", "update"],
};

/** The edges: what agents and operators talk to. None of them may import the engine. */
const EDGES = ["mcp", "api", "cli", "client"];

interface Import {
  file: string;
  spec: string;
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(dir)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...sources(path));
    else if (/\.tsx?$/.test(e.name) && !/_test\.ts$|^_test/.test(e.name)) out.push(path);
  }
  return out;
}

function imports(file: string): Import[] {
  const text = Deno.readTextFileSync(file);
  const out: Import[] = [];
  for (const m of text.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)) {
    out.push({ file, spec: m[1]! });
  }
  return out;
}

/** `src/<folder>/…` of a resolved path, or undefined outside src. */
function folderOf(path: string): string | undefined {
  const m = /\/src\/([a-z_]+)\//.exec(path);
  return m?.[1];
}

Deno.test("folders import only what the layering allows, and only through mod.ts", () => {
  const problems: string[] = [];
  for (const file of sources(`${ROOT}src`)) {
    const from = folderOf(file)!;
    for (const imp of imports(file)) {
      if (!imp.spec.startsWith(".")) continue;
      const target = new URL(imp.spec, `file://${file}`).pathname;
      const to = folderOf(target);
      if (to === undefined || to === from) continue;
      const rel = file.slice(ROOT.length);
      if (!(ALLOWED[from] ?? []).includes(to)) {
        problems.push(
          `${rel} imports src/${to} (${from} may import: ${ALLOWED[from]?.join(", ")})`,
        );
      }
      if (!target.endsWith(`/src/${to}/mod.ts`)) {
        problems.push(`${rel} reaches into src/${to} past its mod.ts (${imp.spec})`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

Deno.test("no edge and not the entry point can import the engine", () => {
  const problems: string[] = [];
  const files = [
    `${ROOT}mod.ts`,
    ...EDGES.flatMap((e) => sources(`${ROOT}src/${e}`)),
  ];
  for (const file of files) {
    for (const imp of imports(file)) {
      const target = new URL(imp.spec, `file://${file}`).pathname;
      if (folderOf(target) === "engine") problems.push(`${file.slice(ROOT.length)}: ${imp.spec}`);
    }
  }
  assert.deepEqual(problems, []);
  // And the public entry exports nothing of the engine.
  const entry = Deno.readTextFileSync(`${ROOT}mod.ts`);
  assert.doesNotMatch(entry, /Engine\b/);
});

Deno.test("the dashboard imports types only from the wire contract (and its zod-free status sets)", () => {
  const problems: string[] = [];
  for (const file of sources(`${ROOT}dashboard`)) {
    const text = Deno.readTextFileSync(file);
    for (const m of text.matchAll(/^(import\s+(type\s+)?[^;]*?from\s+"([^"]+)")/gms)) {
      const spec = m[3]!;
      if (!spec.includes("/src/")) continue;
      const typeOnly = m[2] !== undefined;
      if (!typeOnly && !spec.endsWith("/src/wire/statuses.ts")) {
        problems.push(`${file.slice(ROOT.length)}: ${m[1]!.replace(/\s+/g, " ")}`);
      }
      if (!/\/src\/wire\/(mod|statuses)\.ts$/.test(spec)) {
        problems.push(`${file.slice(ROOT.length)} imports outside the wire contract: ${spec}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

Deno.test("the daemon's import map and lock hold only what it runs; dev packages are apart, at the same versions", () => {
  const read = (f: string) => JSON.parse(Deno.readTextFileSync(`${ROOT}${f}`));
  const daemon = read("deno.json").imports as Record<string, string>;
  const dev = read("imports.dev.json").imports as Record<string, string>;
  for (const [k, v] of Object.entries(daemon)) assert.equal(dev[k], v, `imports.dev.json "${k}"`);
  const devOnly = Object.keys(dev).filter((k) => !(k in daemon));
  assert.ok(devOnly.includes("puppeteer-core") && devOnly.includes("preact"), "dev-only packages");
  // What the binary runs (mod.ts, src/, ffi/) never imports a dev-only package.
  const runtime = [`${ROOT}mod.ts`, ...sources(`${ROOT}src`), ...sources(`${ROOT}ffi`)];
  for (const { file, spec } of runtime.flatMap(imports)) {
    const hit = devOnly.find((k) => spec === k || (k.endsWith("/") && spec.startsWith(k)));
    assert.equal(hit, undefined, `${file.slice(ROOT.length)} imports dev-only "${spec}"`);
  }
  // Every package the daemon's lock pins is pinned identically in the dev lock, so the tests
  // run the versions a first start downloads.
  const lock = read("deno.lock").npm as Record<string, { integrity?: string }>;
  const devLock = read("deno.dev.lock").npm as Record<string, { integrity?: string }>;
  for (const [name, entry] of Object.entries(lock)) {
    assert.equal(devLock[name]?.integrity, entry.integrity, `deno.dev.lock "${name}"`);
  }
});
