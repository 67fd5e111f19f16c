/**
 * The release layout shared by `install.sh`, `termada update` and scripts/release.ts: target
 * names, asset names, URLs, the `SHA256SUMS` format and the `latest.json` pointer. Pure
 * functions; nothing here touches the network or the disk.
 */
import { TermadaError } from "../shared/mod.ts";

/** Where releases live unless `TERMADA_RELEASE_URL` says otherwise (GitHub-style layout). */
export const DEFAULT_RELEASE_URL = "https://github.com/termada/termada/releases";

/** Release target name → the `deno compile --target` triple that builds it. */
export const TARGETS = {
  "linux-x64": "x86_64-unknown-linux-gnu",
  "linux-arm64": "aarch64-unknown-linux-gnu",
  "darwin-x64": "x86_64-apple-darwin",
  "darwin-arm64": "aarch64-apple-darwin",
  "windows-x64": "x86_64-pc-windows-msvc",
} as const;

export type ReleaseTarget = keyof typeof TARGETS;

export const SUMS_FILE = "SHA256SUMS";
export const SIG_FILE = "SHA256SUMS.sig";
export const LATEST_FILE = "latest.json";

/** Bounds on what a release server may send (the download is aborted beyond them). */
export const LIMITS = {
  asset: 200 * 1024 * 1024,
  sums: 64 * 1024,
  sig: 1024,
  latest: 4 * 1024,
  /** The binary inside the archive, after decompression. */
  member: 512 * 1024 * 1024,
} as const;

const VERSION_RE = /^\d{1,9}\.\d{1,9}\.\d{1,9}(?:-[0-9A-Za-z.-]{1,64})?$/;

/** The release target of a Deno target triple (e.g. `Deno.build.target`), if one is built. */
export function targetOf(triple: string): ReleaseTarget | undefined {
  for (const [name, t] of Object.entries(TARGETS)) if (t === triple) return name as ReleaseTarget;
  return undefined;
}

/** The release target of this process; NOT_SUPPORTED on a platform no release is built for. */
export function currentTarget(triple: string = Deno.build.target): ReleaseTarget {
  const t = targetOf(triple);
  if (t === undefined) {
    throw new TermadaError("NOT_SUPPORTED", `No Termada release is built for "${triple}"`, {
      hint: `Released targets: ${Object.keys(TARGETS).join(", ")}; run from source instead`,
    });
  }
  return t;
}

export function isVersion(v: string): boolean {
  return VERSION_RE.test(v);
}

/** A version as given by a user or a server: "v1.2.3" and "1.2.3" are the same. */
export function parseVersion(v: string): string {
  const s = v.trim().replace(/^v/, "");
  if (!isVersion(s)) {
    throw new TermadaError("INVALID_ARGUMENT", `"${v.slice(0, 80)}" is not a version (1.2.3)`);
  }
  return s;
}

/**
 * Orders two versions: numbers first, then a pre-release ("1.2.3-rc.1") before its release.
 * Pre-release tags compare as plain strings (enough for rc.N with N < 10).
 */
export function compareVersions(a: string, b: string): number {
  const split = (v: string) => {
    const [core = "", pre] = v.split(/-(.*)/s, 2);
    return { nums: core.split(".").map(Number), pre };
  };
  const x = split(a), y = split(b);
  for (let i = 0; i < 3; i++) {
    const d = (x.nums[i] ?? 0) - (y.nums[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  if (x.pre === y.pre) return 0;
  if (x.pre === undefined) return 1;
  if (y.pre === undefined) return -1;
  return x.pre < y.pre ? -1 : 1;
}

/** The file name of the binary inside an archive for `target`. */
export function memberName(target: ReleaseTarget): string {
  return target.startsWith("windows-") ? "termada.exe" : "termada";
}

export function assetName(version: string, target: ReleaseTarget): string {
  return `termada-${version}-${target}.tar.gz`;
}

/** The release base without trailing slashes; HTTPS only (a download is code to run). */
export function releaseBase(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TermadaError("INVALID_ARGUMENT", `The release URL "${url}" is not a URL`);
  }
  if (u.protocol !== "https:") {
    throw new TermadaError("INVALID_ARGUMENT", `The release URL "${url}" is not HTTPS`, {
      hint: "Releases are downloaded over HTTPS only (TERMADA_RELEASE_URL)",
    });
  }
  return url.replace(/\/+$/, "");
}

/** `<base>/download/v<version>/<file>`, or `<base>/latest/download/<file>` without a version. */
export function releaseUrl(base: string, version: string | undefined, file: string): string {
  return version === undefined
    ? `${base}/latest/download/${file}`
    : `${base}/download/v${version}/${file}`;
}

/**
 * `SHA256SUMS` as `sha256sum` writes it: `<64 hex>  <name>` (or ` *<name>` for binary mode) per
 * line. Strict: a malformed line or a name listed twice is an error, so a file cannot say two
 * things about one asset.
 */
export function parseSums(text: string): Map<string, string> {
  const out = new Map<string, string>();
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  lines.forEach((line, i) => {
    const m = /^([0-9a-fA-F]{64}) [ *]([A-Za-z0-9._+-]{1,200})$/.exec(line.replace(/\r$/, ""));
    if (!m) {
      throw new TermadaError("INVALID_ARGUMENT", `${SUMS_FILE} line ${i + 1} is malformed`);
    }
    const [, hash, name] = m as unknown as [string, string, string];
    if (out.has(name)) {
      throw new TermadaError("INVALID_ARGUMENT", `${SUMS_FILE} lists "${name}" more than once`);
    }
    out.set(name, hash.toLowerCase());
  });
  return out;
}

/** The `SHA256SUMS` text for `hashes` (name → hex), sorted by name. */
export function formatSums(hashes: Map<string, string>): string {
  return [...hashes].sort(([a], [b]) => (a < b ? -1 : 1)).map(([n, h]) => `${h}  ${n}\n`).join(
    "",
  );
}

/** `latest.json`: `{"version": "1.2.3"}` (other keys are ignored). */
export function parseLatest(text: string): string {
  let v: unknown;
  try {
    v = (JSON.parse(text) as { version?: unknown }).version;
  } catch {
    v = undefined;
  }
  if (typeof v !== "string" || !isVersion(v.replace(/^v/, ""))) {
    throw new TermadaError("INVALID_ARGUMENT", `${LATEST_FILE} does not name a version`);
  }
  return v.replace(/^v/, "");
}
