/**
 * Black-box: `install.sh` (under dash) and `termada update` against a local HTTPS release server
 * with its own CA, serving assets that scripts/release.ts built from stand-in binaries (shell
 * scripts that print `termada <version>`) and hostile variants of them: a wrong checksum, a
 * body cut short under a lying Content-Length, a bad or missing signature, archives with
 * `../termada` or a symlink. Every failure must leave the installed binary byte-identical.
 */
import assert from "node:assert/strict";
import { makeTestCerts } from "../src/shared/_test_tls.ts";
import {
  createTar,
  currentTarget,
  formatSums,
  gzip,
  importSigningKey,
  sha256Hex,
  sign,
} from "../src/update/mod.ts";
import { call, ROOT, startDaemon, stdioClient, tempHome, termada } from "./_daemon.ts";

const TARGET = currentTarget();
const LATEST = "9.9.9";
const OLD = "1.0.0";
const enc = new TextEncoder();
const dec = new TextDecoder();

type Files = Map<string, Uint8Array>;

interface Fixture {
  dir: string;
  caFile: string;
  cert: string;
  key: string;
  publicKey: string;
  /** variant → version → file name → bytes. */
  releases: Map<string, Map<string, Files>>;
}

async function run(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string>; clearEnv?: boolean; cwd?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(cmd, {
    args,
    env: opts.env,
    clearEnv: opts.clearEnv ?? false,
    cwd: opts.cwd,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

async function ok(cmd: string, args: string[], opts: Parameters<typeof run>[2] = {}) {
  const r = await run(cmd, args, opts);
  assert.equal(r.code, 0, `${cmd} ${args.join(" ")}: ${r.stderr}`);
  return r;
}

/** A stand-in release binary: `version` prints `termada <v>`; `pad` bytes of inert text follow. */
function standIn(version: string, pad = 0, extra = ""): Uint8Array {
  const head = `#!/bin/sh\n${extra}case "$1" in version) echo "termada ${version}" ;; ` +
    `*) echo "stand-in ${version}: $*" ;; esac\nexit 0\n`;
  // Deterministic filler (an LCG) that gzip cannot shrink much, in 76-character lines.
  const noise = new Uint8Array(Math.ceil(pad * 3 / 4));
  let x = 0x2545f491;
  for (let i = 0; i < noise.length; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    noise[i] = x >>> 24;
  }
  let b64 = "";
  for (let i = 0; i < noise.length; i += 57) {
    b64 += btoa(String.fromCharCode(...noise.subarray(i, i + 57))) + "\n";
  }
  return enc.encode(head + b64.slice(0, pad));
}

async function readDir(dir: string): Promise<Files> {
  const files: Files = new Map();
  for await (const e of Deno.readDir(dir)) {
    files.set(e.name, await Deno.readFile(`${dir}/${e.name}`));
  }
  return files;
}

/** Builds a release with scripts/release.ts from a stand-in, as `deno task release` would. */
async function buildRelease(
  dir: string,
  version: string,
  binary: Uint8Array,
  opts: { signingKey?: string; publicKey: string },
): Promise<Files> {
  const input = `${dir}/in-${version}-${crypto.randomUUID()}`;
  await Deno.mkdir(`${input}/${TARGET}`, { recursive: true });
  await Deno.writeFile(`${input}/${TARGET}/termada`, binary, { mode: 0o755 });
  const out = `${input}/out`;
  await ok(Deno.execPath(), [
    "run",
    "--allow-read",
    "--allow-write",
    "--allow-env",
    "--allow-run",
    "--no-prompt",
    "--quiet",
    `${ROOT}scripts/release.ts`,
    "--version",
    version,
    "--targets",
    TARGET,
    "--input",
    input,
    "--out",
    out,
    ...(opts.signingKey ? ["--signing-key", opts.signingKey] : []),
  ], { env: { TERMADA_RELEASE_PUBKEY: opts.publicKey } });
  return await readDir(out);
}

/** A release whose one asset is `archive` (a hostile one), summed and signed with `key`. */
async function craftedRelease(
  version: string,
  archive: Uint8Array,
  key: CryptoKey,
): Promise<Files> {
  const asset = `termada-${version}-${TARGET}.tar.gz`;
  const sums = enc.encode(formatSums(new Map([[asset, await sha256Hex(archive)]])));
  return new Map([
    [asset, archive],
    ["SHA256SUMS", sums],
    ["SHA256SUMS.sig", await sign(key, sums)],
    ["latest.json", enc.encode(JSON.stringify({ version }))],
  ]);
}

let fixture: Promise<Fixture> | undefined;

function setup(): Promise<Fixture> {
  return fixture ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "termada-release-test-" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    const ssl = (...args: string[]) => ok("openssl", args, { cwd: dir });
    const tls = await makeTestCerts(dir);
    await ssl("genpkey", "-algorithm", "ed25519", "-out", "release.pem");
    await ssl("genpkey", "-algorithm", "ed25519", "-out", "other.pem");
    const signing = await importSigningKey(await Deno.readTextFile(`${dir}/release.pem`));
    const other = await importSigningKey(await Deno.readTextFile(`${dir}/other.pem`));
    const opts = { signingKey: `${dir}/release.pem`, publicKey: signing.publicKey };

    const good = await buildRelease(dir, LATEST, standIn(LATEST, 1 << 20), opts);
    const goodOld = await buildRelease(dir, OLD, standIn(OLD), opts);
    const unsigned = await buildRelease(dir, LATEST, standIn(LATEST), {
      publicKey: signing.publicKey,
    });
    const asset = `termada-${LATEST}-${TARGET}.tar.gz`;
    // Runs fine and claims the right version: only the checksum can stop it.
    const evil = await buildRelease(dir, LATEST, standIn(LATEST, 0, "echo pwned >&2\n"), opts);
    const badsum = new Map(good).set(asset, evil.get(asset)!);
    const sums = good.get("SHA256SUMS")!;
    const badsig = new Map(good).set("SHA256SUMS.sig", await sign(other.key, sums));
    const bin = standIn(LATEST);
    const dotdot = await craftedRelease(
      LATEST,
      await gzip(createTar([{ name: "../termada", data: bin }])),
      signing.key,
    );
    const symlink = await craftedRelease(
      LATEST,
      await gzip(createTar([{ name: "termada", type: "symlink", linkname: "/bin/sh" }])),
      signing.key,
    );
    const releases = new Map<string, Map<string, Files>>([
      ["good", new Map([[LATEST, good], [OLD, goodOld]])],
      ["unsigned", new Map([[LATEST, unsigned]])],
      ["badsum", new Map([[LATEST, badsum]])],
      ["badsig", new Map([[LATEST, badsig]])],
      ["truncated", new Map([[LATEST, good]])],
      ["toolarge", new Map([[LATEST, good]])],
      ["dotdot", new Map([[LATEST, dotdot]])],
      ["symlink", new Map([[LATEST, symlink]])],
    ]);
    return {
      dir,
      caFile: tls.caFile,
      cert: tls.cert,
      key: tls.key,
      publicKey: signing.publicKey,
      releases,
    };
  })();
}

interface ReleaseServer extends AsyncDisposable {
  /** The release base of `variant`: `https://127.0.0.1:<port>/<variant>`. */
  url(variant: string): string;
  /** Paths served so far. */
  hits: string[];
}

/**
 * The GitHub layout: `/<variant>/download/v<version>/<file>`, and `/<variant>/latest/download/
 * <file>` redirecting to the latest version. "truncated" sends half of each asset under the full
 * Content-Length; "toolarge" announces a 300 MiB asset.
 */
function serve(fx: Fixture): ReleaseServer {
  const hits: string[] = [];
  const server = Deno.serve({
    port: 0,
    hostname: "127.0.0.1",
    cert: fx.cert,
    key: fx.key,
    onListen() {},
  }, (req) => {
    const path = new URL(req.url).pathname;
    hits.push(path);
    const latest = /^\/([a-z]+)\/latest\/download\/([^/]+)$/.exec(path);
    if (latest) {
      return new Response(null, {
        status: 302,
        headers: { location: `/${latest[1]}/download/v${LATEST}/${latest[2]}` },
      });
    }
    const m = /^\/([a-z]+)\/download\/v([^/]+)\/([^/]+)$/.exec(path);
    const body = m && fx.releases.get(m[1]!)?.get(m[2]!)?.get(m[3]!);
    if (!m || !body) return new Response("not found", { status: 404 });
    if (m[3]!.endsWith(".tar.gz") && (m[1] === "truncated" || m[1] === "toolarge")) {
      const cut = body.subarray(0, body.length >> 1);
      const length = m[1] === "truncated" ? body.length : 300 * 1024 * 1024;
      const stream = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(cut);
          c.close();
        },
      });
      return new Response(stream, { headers: { "content-length": String(length) } });
    }
    return new Response(body as Uint8Array<ArrayBuffer>);
  });
  const base = `https://127.0.0.1:${server.addr.port}`;
  return {
    url: (variant) => `${base}/${variant}`,
    hits,
    async [Symbol.asyncDispose]() {
      await server.shutdown();
    },
  };
}

/** A temp dir removed at the end of `f`. */
async function inTemp<T>(f: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "termada-install-" });
  try {
    return await f(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";
const TOOLS = [
  "sh",
  "dash",
  "uname",
  "mktemp",
  "rm",
  "mkdir",
  "cp",
  "chmod",
  "mv",
  "cat",
  "sed",
  "grep",
  "awk",
  "head",
  "tail",
  "tr",
  "cut",
  "wc",
  "tar",
  "gzip",
  "sha256sum",
  "openssl",
  "dirname",
];

/** A PATH directory holding only TOOLS (and `with`), symlinked from the system. */
async function toolDir(
  dir: string,
  opts: { with?: string[]; uname?: string } = {},
): Promise<string> {
  const tools = `${dir}/tools`;
  await Deno.mkdir(tools);
  for (const t of [...TOOLS, ...(opts.with ?? [])]) {
    const found = (await run("sh", ["-c", `command -v ${t}`])).stdout.trim();
    if (found) await Deno.symlink(found, `${tools}/${t}`);
  }
  if (opts.uname) {
    await Deno.remove(`${tools}/uname`);
    await Deno.writeTextFile(`${tools}/uname`, `#!/bin/sh\n${opts.uname}\n`, { mode: 0o755 });
  }
  return tools;
}

/** Runs install.sh under dash with exactly `env` (plus HOME, PATH, TMPDIR). */
function installSh(dir: string, env: Record<string, string>) {
  return run("dash", [`${ROOT}install.sh`], {
    clearEnv: true,
    env: { HOME: dir, PATH: SYSTEM_PATH, TMPDIR: dir, ...env },
  });
}

function releaseEnv(fx: Fixture, srv: ReleaseServer, variant: string): Record<string, string> {
  return {
    TERMADA_RELEASE_URL: srv.url(variant),
    TERMADA_CA_FILE: fx.caFile,
    TERMADA_RELEASE_PUBKEY: fx.publicKey,
  };
}

async function versionOf(bin: string): Promise<string> {
  return (await ok(bin, ["version"])).stdout.trim();
}

function oneLine(stderr: string): string {
  const lines = stderr.trim().split("\n").filter((l) =>
    !/^termada-install: (installing|note|warning)/.test(l)
  );
  assert.equal(lines.length, 1, `expected one error line, got:\n${stderr}`);
  return lines[0]!;
}

Deno.test("scripts/release.ts lays out a signed release and refuses a key clients would not trust", async () => {
  const fx = await setup();
  const good = fx.releases.get("good")!.get(LATEST)!;
  const asset = `termada-${LATEST}-${TARGET}.tar.gz`;
  assert.deepEqual(
    [...good.keys()].sort(),
    ["SHA256SUMS", "SHA256SUMS.sig", "install.sh", "latest.json", asset].sort(),
  );
  assert.equal(dec.decode(good.get("latest.json")), `{"version":"${LATEST}"}\n`);
  assert.equal(
    dec.decode(good.get("SHA256SUMS")),
    `${await sha256Hex(good.get("install.sh")!)}  install.sh\n` +
      `${await sha256Hex(good.get(asset)!)}  ${asset}\n`,
  );
  assert.equal(good.get("SHA256SUMS.sig")!.length, 64);
  await inTemp(async (dir) => {
    await Deno.writeFile(`${dir}/a.tar.gz`, good.get(asset)!);
    const list = await ok("tar", ["-tvzf", `${dir}/a.tar.gz`]);
    assert.match(list.stdout, /^-rwxr-xr-x \S+ +\d+ [^\n]* termada\n$/);
    await assert.rejects(
      buildRelease(dir, LATEST, standIn(LATEST), {
        signingKey: `${fx.dir}/other.pem`,
        publicKey: fx.publicKey,
      }),
      /release: The signing key's public key \S+ is not the pinned release key/,
    );
  });
});

Deno.test("install.sh installs the latest signed release and prints the PATH hint", async () => {
  const fx = await setup();
  await using srv = serve(fx);
  await inTemp(async (dir) => {
    const bin = `${dir}/bin`;
    const r = await installSh(dir, { ...releaseEnv(fx, srv, "good"), TERMADA_BIN_DIR: bin });
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(
        `^Installed termada ${LATEST} to ${bin}/termada \\(SHA-256 verified, signature verified\\)$`,
        "m",
      ),
    );
    assert.ok(r.stdout.includes(`  export PATH="${bin}:$PATH"\n`), r.stdout);
    assert.equal(await versionOf(`${bin}/termada`), `termada ${LATEST}`);
    assert.equal((await Deno.stat(`${bin}/termada`)).mode! & 0o777, 0o755);
    assert.deepEqual([...Deno.readDirSync(bin)].map((e) => e.name), ["termada"]);
    assert.ok(srv.hits.includes("/good/latest/download/latest.json"));
    // No temp dirs left behind in TMPDIR (= dir): only bin/.
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["bin"]);

    // A pinned version, with the bin dir on PATH (no hint), fetched with wget instead of curl.
    const tools = await toolDir(dir, { with: ["wget"] });
    const r2 = await installSh(dir, {
      ...releaseEnv(fx, srv, "good"),
      TERMADA_BIN_DIR: bin,
      TERMADA_VERSION: `v${OLD}`,
      PATH: `${bin}:${tools}`,
    });
    assert.equal(r2.code, 0, r2.stderr);
    assert.doesNotMatch(r2.stdout, /export PATH/);
    assert.equal(await versionOf(`${bin}/termada`), `termada ${OLD}`);
  });
});

Deno.test("install.sh refuses a bad download and leaves the installed binary as it was", async (t) => {
  const fx = await setup();
  await using srv = serve(fx);
  const cases: [string, string, RegExp, { wget?: boolean }?][] = [
    [
      "a wrong checksum",
      "badsum",
      /^termada-install: error: checksum mismatch: termada-9\.9\.9-.*\.tar\.gz has SHA-256 [0-9a-f]{64}, SHA256SUMS says [0-9a-f]{64}$/,
    ],
    [
      "a truncated download (curl)",
      "truncated",
      /^termada-install: error: the download of https:.*\.tar\.gz was cut short \(curl exit (18|56|92)\)$/,
    ],
    [
      "a truncated download (wget)",
      "truncated",
      /^termada-install: error: cannot download https:.*\.tar\.gz, or it was cut short \(wget exit 4\)$/,
      { wget: true },
    ],
    [
      "a bad signature",
      "badsig",
      /^termada-install: error: bad signature: SHA256SUMS\.sig of v9\.9\.9 does not verify with the release key$/,
    ],
    [
      "a ../termada member",
      "dotdot",
      /^termada-install: error: termada-9\.9\.9-.*\.tar\.gz must hold exactly one file named termada; refusing it$/,
    ],
    [
      "a symlink member",
      "symlink",
      /^termada-install: error: termada in termada-9\.9\.9-.*\.tar\.gz is not a regular file; refusing it$/,
    ],
    [
      "an unknown version",
      "good",
      /^termada-install: error: cannot download https:.*\/download\/v7\.7\.7\/SHA256SUMS \(HTTP 404\)$/,
    ],
  ];
  for (const [what, variant, error, opts] of cases) {
    await t.step(what, async () => {
      await inTemp(async (dir) => {
        const bin = `${dir}/bin`;
        await Deno.mkdir(bin);
        const old = standIn(OLD);
        await Deno.writeFile(`${bin}/termada`, old, { mode: 0o755 });
        const r = await installSh(dir, {
          ...releaseEnv(fx, srv, variant),
          TERMADA_BIN_DIR: bin,
          ...(variant === "good" ? { TERMADA_VERSION: "7.7.7" } : {}),
          ...(opts?.wget ? { PATH: await toolDir(dir, { with: ["wget"] }) } : {}),
        });
        assert.equal(r.code, 1, r.stderr);
        assert.match(oneLine(r.stderr), error);
        assert.equal(r.stdout, "");
        assert.deepEqual(await Deno.readFile(`${bin}/termada`), old);
        assert.deepEqual([...Deno.readDirSync(bin)].map((e) => e.name), ["termada"]);
      });
    });
  }
});

Deno.test("install.sh accepts an unsigned release with a notice, refused when a signature is required", async () => {
  const fx = await setup();
  await using srv = serve(fx);
  await inTemp(async (dir) => {
    const env = { ...releaseEnv(fx, srv, "unsigned"), TERMADA_BIN_DIR: `${dir}/bin` };
    const strict = await installSh(dir, { ...env, TERMADA_REQUIRE_SIGNATURE: "1" });
    assert.equal(strict.code, 1);
    assert.match(
      oneLine(strict.stderr),
      /^termada-install: error: release v9\.9\.9 publishes no SHA256SUMS\.sig and a signature is required$/,
    );
    assert.deepEqual([...Deno.readDirSync(dir)], []);
    const r = await installSh(dir, env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      /^termada-install: note: release v9\.9\.9 publishes no SHA256SUMS\.sig; verifying by SHA-256 only$/m,
    );
    assert.match(r.stdout, /\(SHA-256 verified, unsigned release\)/);
    assert.equal(await versionOf(`${dir}/bin/termada`), `termada ${LATEST}`);
  });
});

Deno.test("install.sh fails clearly on an unsupported platform, without a downloader, or over http", async (t) => {
  const fx = await setup();
  await using srv = serve(fx);
  const cases: [string, { uname?: string; without?: boolean; url?: string }, RegExp][] = [
    [
      "an unsupported OS",
      { uname: `[ "$1" = -s ] && echo FreeBSD || echo x86_64` },
      /unsupported OS "FreeBSD": releases exist for Linux and macOS/,
    ],
    [
      "an unsupported CPU",
      { uname: `[ "$1" = -s ] && echo Linux || echo riscv64` },
      /unsupported CPU "riscv64": releases exist for x86_64 and arm64/,
    ],
    [
      "no curl or wget",
      { without: true },
      /neither curl nor wget is installed: install one of them/,
    ],
    [
      "an http release URL",
      { url: "http://127.0.0.1:1/x" },
      /the release URL must be HTTPS: http:\/\/127\.0\.0\.1:1\/x/,
    ],
  ];
  for (const [what, c, error] of cases) {
    await t.step(what, async () => {
      await inTemp(async (dir) => {
        const tools = await toolDir(dir, { uname: c.uname, with: c.without ? [] : ["curl"] });
        const r = await installSh(dir, {
          ...releaseEnv(fx, srv, "good"),
          ...(c.url ? { TERMADA_RELEASE_URL: c.url } : {}),
          TERMADA_BIN_DIR: `${dir}/bin`,
          PATH: tools,
        });
        assert.equal(r.code, 1, r.stderr);
        assert.match(oneLine(r.stderr), new RegExp(`^termada-install: error: ${error.source}`));
        assert.throws(() => Deno.statSync(`${dir}/bin`));
      });
    });
  }
});

Deno.test("install.sh TERMADA_FROM_SOURCE=1 installs a launcher that runs the checkout", async () => {
  await inTemp(async (dir) => {
    const bin = `${dir}/bin`;
    // The inherited environment: the launcher's Deno uses the same module cache as these tests.
    const r = await run("dash", [`${ROOT}install.sh`], {
      env: {
        TERMADA_FROM_SOURCE: "1",
        TERMADA_BIN_DIR: bin,
        PATH: `${bin}:${Deno.env.get("PATH")}`,
      },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(
        `^Installed ${bin}/termada \\(runs ${ROOT.replace(/\/$/, "")} with Deno 2\\.9\\.6\\)$`,
        "m",
      ),
    );
    assert.doesNotMatch(r.stdout, /export PATH/);
    const launcher = await Deno.readTextFile(`${bin}/termada`);
    assert.match(
      launcher,
      /exec '.*\/\.tools\/node_modules\/\.bin\/deno' run -P=daemon .* "\$@"$/m,
    );
    const { version } = await import("../src/cli/mod.ts").then((m) => ({ version: m.VERSION }));
    assert.equal(await versionOf(`${bin}/termada`), `termada ${version}`);
  });
});

/** `termada update …` from source against `variant`, replacing `target`. */
function update(
  fx: Fixture,
  srv: ReleaseServer,
  home: string,
  target: string | undefined,
  variant: string,
  args: string[] = [],
  env: Record<string, string> = {},
) {
  return termada(home, ["update", ...args], {
    ...releaseEnv(fx, srv, variant),
    ...(target ? { TERMADA_UPDATE_TARGET: target } : {}),
    ...env,
  });
}

Deno.test("termada update replaces the installed binary with the verified latest release", async () => {
  const fx = await setup();
  await using srv = serve(fx);
  await inTemp(async (dir) => {
    const target = `${dir}/termada`;
    await Deno.writeFile(target, standIn(OLD), { mode: 0o755 });
    const check = await update(fx, srv, dir, target, "good", ["--check"]);
    assert.equal(check.code, 0, check.stderr);
    assert.equal(check.stdout, `termada ${LATEST} is available (this is ${OLD}): termada update\n`);

    const r = await update(fx, srv, dir, target, "good", ["--json"]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.updated, true);
    assert.equal(out.previous, OLD);
    assert.equal(out.version, LATEST);
    assert.equal(out.signature, "verified");
    assert.equal(out.target, target);
    assert.ok(out.bytes > 1 << 19, `downloaded ${out.bytes}`);
    assert.ok(out.ms < 10_000, `took ${out.ms} ms`);
    assert.equal(await versionOf(target), `termada ${LATEST}`);
    assert.equal((await Deno.stat(target)).mode! & 0o777, 0o755);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["termada"]);

    const again = await update(fx, srv, dir, target, "good");
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, `termada ${LATEST} is up to date (latest ${LATEST})\n`);
    const down = await update(fx, srv, dir, target, "good", ["--version", `v${OLD}`]);
    assert.equal(down.code, 0, down.stderr);
    assert.match(
      down.stdout,
      new RegExp(
        `^Updated ${target}: ${LATEST} -> ${OLD} \\(sha256 [0-9a-f]{12}…, signature verified\\)$`,
        "m",
      ),
    );
    assert.equal(await versionOf(target), `termada ${OLD}`);
  });
});

Deno.test("termada update refuses a bad release and leaves the old binary byte-identical", async (t) => {
  const fx = await setup();
  await using srv = serve(fx);
  const cases: [string, string, RegExp, string[]?, Record<string, string>?][] = [
    [
      "a wrong checksum",
      "badsum",
      /The SHA-256 of "termada-9\.9\.9-.*\.tar\.gz" is [0-9a-f]{64}, SHA256SUMS says [0-9a-f]{64}/,
    ],
    [
      "a truncated download",
      "truncated",
      /The download of "https:.*\.tar\.gz" broke off after \d+ bytes/,
    ],
    [
      "an oversized download",
      "toolarge",
      /"https:.*\.tar\.gz" is 314572800 bytes, more than 209715200/,
    ],
    [
      "a bad signature",
      "badsig",
      /The signature SHA256SUMS\.sig of release v9\.9\.9 does not verify with the release key/,
    ],
    [
      "no signature when required (flag)",
      "unsigned",
      /Release v9\.9\.9 has no SHA256SUMS\.sig and a signature is required/,
      ["--require-signature"],
    ],
    [
      "no signature when required (env)",
      "unsigned",
      /Release v9\.9\.9 has no SHA256SUMS\.sig and a signature is required/,
      [],
      { TERMADA_REQUIRE_SIGNATURE: "1" },
    ],
    ["a ../termada member", "dotdot", /The archive has a member with a path: "\.\.\/termada"/],
    [
      "a symlink member",
      "symlink",
      /The archive member "termada" is a symlink, not a regular file/,
    ],
    [
      "another release key",
      "good",
      /The signature SHA256SUMS\.sig of release v9\.9\.9 does not verify with the release key/,
      [],
      {
        TERMADA_RELEASE_PUBKEY: btoa("k".repeat(32)),
      },
    ],
  ];
  for (const [what, variant, error, args, env] of cases) {
    await t.step(what, async () => {
      await inTemp(async (dir) => {
        const target = `${dir}/termada`;
        const old = standIn(OLD);
        await Deno.writeFile(target, old, { mode: 0o755 });
        const r = await update(fx, srv, dir, target, variant, args, env);
        assert.equal(r.code, 1, r.stderr);
        const line = r.stderr.trim();
        assert.ok(!line.includes("\n"), line);
        assert.match(line, new RegExp(`^termada update: ${error.source}.*; nothing was changed$`));
        assert.deepEqual(await Deno.readFile(target), old);
        assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["termada"]);
      });
    });
  }
  await t.step("an unsigned release is accepted with a note", async () => {
    await inTemp(async (dir) => {
      const target = `${dir}/termada`;
      await Deno.writeFile(target, standIn(OLD), { mode: 0o755 });
      const r = await update(fx, srv, dir, target, "unsigned");
      assert.equal(r.code, 0, r.stderr);
      assert.equal(
        r.stderr,
        "termada update: note: release v9.9.9 publishes no SHA256SUMS.sig; verified by SHA-256 only\n",
      );
      assert.match(r.stdout, /signature absent\)/);
      assert.equal(await versionOf(target), `termada ${LATEST}`);
    });
  });
});

Deno.test("termada update refuses to replace a source checkout, a non-HTTPS URL and unknown flags", async () => {
  const fx = await setup();
  await using srv = serve(fx);
  await inTemp(async (dir) => {
    const src = await update(fx, srv, dir, undefined, "good");
    assert.equal(src.code, 1);
    assert.equal(src.stderr, "termada update: running from source; use git pull or install.sh\n");
    const http = await update(fx, srv, dir, `${dir}/x`, "good", [], {
      TERMADA_RELEASE_URL: "http://127.0.0.1:1/r",
    });
    assert.equal(http.code, 2);
    assert.match(http.stderr, /The release URL "http:\/\/127\.0\.0\.1:1\/r" is not HTTPS/);
    const flag = await update(fx, srv, dir, `${dir}/x`, "good", ["--yes"]);
    assert.equal(flag.code, 2);
    assert.match(flag.stderr, /Unknown option "--yes" \(termada update --help\)/);
  });
});

Deno.test("termada update refuses while the daemon runs a job, unless --force", async () => {
  const fx = await setup();
  await using srv = serve(fx);
  const home = await tempHome();
  try {
    await using _d = await startDaemon(home);
    await using c = await stdioClient(home, ["--agent", "ci"]);
    const session = (await call(c, "session_create", {})).session_id as string;
    const job = await call(c, "exec_start", { session, command: ["sleep 30"], mode: "background" });
    assert.equal(job.status, "running");
    const target = `${home}/termada-bin`;
    const old = standIn(OLD);
    await Deno.writeFile(target, old, { mode: 0o755 });
    const busy = await update(fx, srv, home, target, "good");
    assert.equal(busy.code, 1);
    assert.equal(
      busy.stderr,
      "termada update: The daemon has 1 active job; nothing was changed\n" +
        "  hint: Wait for them (termada jobs) or run termada update --force\n",
    );
    assert.deepEqual(await Deno.readFile(target), old);
    const forced = await update(fx, srv, home, target, "good", ["--force"]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(await versionOf(target), `termada ${LATEST}`);
    await call(c, "exec_kill", { job_id: job.job_id as string }).catch(() => undefined);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
