/**
 * Reading the config file: YAML (npm `yaml`, positions kept), `${NAME}` expansion from an injected
 * environment, then the strict schema. Every error is an INVALID_ARGUMENT whose message names the
 * file, the line and the key path, because it is shown once at startup and must be enough to fix
 * the file.
 */
import type { z } from "zod";
import type { Document, YAMLError } from "yaml";
import { concatBytes, type Logger, logger, TermadaError } from "../shared/mod.ts";
import { Config, CONFIG_LIMITS, DEFAULT_CONFIG } from "./schema.ts";

type Yaml = typeof import("yaml");
let yamlModule: Yaml | undefined;

/**
 * Loads the YAML parser once. It is ~75 ms of module loading (measured), which a daemon on its
 * embedded defaults (no config file) never pays: `loadConfig` loads it only for a file.
 * `parseConfig` needs it loaded first.
 */
export async function loadYaml(): Promise<void> {
  yamlModule ??= await import("yaml");
}

function yaml(): Yaml {
  if (!yamlModule) throw new Error("parseConfig needs loadYaml() first");
  return yamlModule;
}

export interface LoadedConfig {
  config: Config;
  /** The file read (or that would have been read, for `source: "defaults"`). */
  path: string;
  source: "file" | "defaults";
  /**
   * The environment variables the file took values from (`${NAME}`): tokens and the like, so
   * the daemon keeps them out of every session's environment.
   */
  envNames: string[];
}

export interface ParseConfigOptions {
  /** Shown in error messages. */
  path: string;
  /** Values for `${NAME}`; usually `Deno.env.toObject()`. */
  env: Record<string, string | undefined>;
}

export interface LoadConfigOptions {
  /** A missing file is an error instead of the defaults (for an explicit `--config`). */
  required?: boolean;
  /** Where warnings go (default: the `config` stderr logger). */
  logger?: Logger;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

class ConfigProblem {
  constructor(readonly offset: number | undefined, readonly text: string) {}
}

interface Parsed {
  config: Config;
  /** Some agent token is written in the file itself rather than taken from `${ENV}`. */
  literalTokens: boolean;
  envNames: string[];
}

/**
 * Reads and validates the config at `path`. A missing file yields the embedded defaults
 * (`source: "defaults"`) unless `required`. Warns (does not fail) when a file holding literal
 * agent tokens is readable by group or others.
 */
export async function loadConfig(
  path: string,
  env: Record<string, string | undefined>,
  options: LoadConfigOptions = {},
): Promise<LoadedConfig> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { read: true });
  } catch (err) {
    if (err instanceof Deno.errors.NotFound && !options.required) {
      // A fresh copy: callers may adjust their config without touching the shared defaults.
      return { config: Config.parse({}), path, source: "defaults", envNames: [] };
    }
    throw readError(path, err);
  }
  let text: string;
  let info: Deno.FileInfo;
  try {
    info = await file.stat();
    if (!info.isFile) throw configError(path, undefined, "it is not a regular file");
    if (info.size > CONFIG_LIMITS.fileBytes) throw tooLarge(path);
    text = decode(path, await readAtMost(file, CONFIG_LIMITS.fileBytes + 1));
  } catch (err) {
    throw err instanceof TermadaError ? err : readError(path, err);
  } finally {
    file.close();
  }

  await loadYaml();
  const parsed = parse(text, { path, env });
  const log = options.logger ?? logger("config");
  const mode = (info.mode ?? 0) & 0o777;
  if (parsed.literalTokens && (mode & 0o044) !== 0) {
    log.warn("Config file holds agent tokens and is readable by other users", {
      path,
      mode: `0${mode.toString(8)}`,
      fix: `chmod 600 ${path}, or take tokens from the environment with \${NAME}`,
    });
  }
  if (!parsed.config.auth.dev_mode && Object.keys(parsed.config.agents).length === 0) {
    log.warn("auth.dev_mode is false and no agents are configured: no agent can connect", {
      path,
    });
  }
  return { config: parsed.config, path, source: "file", envNames: parsed.envNames };
}

/** Parses config text (what `loadConfig` does after reading the file). */
export function parseConfig(text: string, options: ParseConfigOptions): Config {
  return parse(text, options).config;
}

function parse(text: string, { path, env }: ParseConfigOptions): Parsed {
  if (new TextEncoder().encode(text).length > CONFIG_LIMITS.fileBytes) throw tooLarge(path);
  const { LineCounter, parseDocument } = yaml();
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const lineOf = (offset: number | undefined) =>
    offset === undefined ? undefined : lineCounter.linePos(offset).line;

  // Warnings too (an unknown `!tag`): a config that is only half understood must not start.
  const yamlProblem: YAMLError | undefined = doc.errors[0] ?? doc.warnings[0];
  if (yamlProblem) {
    // Errors found at end of input (an unclosed quote or bracket) point past the last line.
    const offset = Math.min(yamlProblem.pos[0], Math.max(0, text.trimEnd().length - 1));
    throw configError(path, lineOf(offset), yamlProblem.message);
  }

  const literalTokens = hasLiteralTokens(doc);
  const envNames = new Set<string>();
  try {
    expandEnv(doc, env, envNames);
  } catch (err) {
    if (err instanceof ConfigProblem) throw configError(path, lineOf(err.offset), err.text);
    throw err;
  }

  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 }) ?? {};
  } catch (err) {
    // e.g. an alias bomb ("Excessive alias count").
    throw configError(path, undefined, err instanceof Error ? err.message : String(err));
  }

  const result = Config.safeParse(data);
  if (result.success) return { config: result.data, literalTokens, envNames: [...envNames] };

  const problems = result.error.issues
    .flatMap((issue) => describeIssue(issue, data))
    .map((p) => ({ ...p, line: lineOf(offsetOf(doc, p.path)) }))
    .sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
  const first = problems[0]!;
  const messages = problems.map((p) => formatMessage(path, p.line, p.text));
  throw new TermadaError("INVALID_ARGUMENT", messages[0]!, {
    hint: first.unknownKey
      ? knownKeysHint(first.path)
      : "See docs/CONFIG.md for every key and its bounds",
    details: { file: path, line: first.line, problems: messages },
  });
}

/** One issue → one problem per key it is about, with the path used to find its line. */
function describeIssue(
  issue: z.core.$ZodIssue,
  data: unknown,
): { path: PropertyKey[]; text: string; unknownKey?: boolean }[] {
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => {
      const path = [...issue.path, key];
      return { path, text: `unknown key "${dotted(path)}"`, unknownKey: true };
    });
  }
  if (issue.code === "invalid_key") {
    const why = issue.issues[0]?.message ?? issue.message;
    return [{ path: issue.path, text: `invalid key "${dotted(issue.path)}": ${why}` }];
  }
  if (issue.path.length === 0) {
    return [{ path: [], text: `the file must be a mapping of keys, like "sessions:"` }];
  }
  if (issue.code === "invalid_type" && valueAt(data, issue.path) === undefined) {
    return [{ path: issue.path, text: `missing required key "${dotted(issue.path)}"` }];
  }
  const why = issue.message.charAt(0).toLowerCase() + issue.message.slice(1);
  return [{ path: issue.path, text: `invalid value for "${dotted(issue.path)}": ${why}` }];
}

function formatMessage(path: string, line: number | undefined, text: string): string {
  return line === undefined
    ? `Config "${path}": ${text}`
    : `Config "${path}" line ${line}: ${text}`;
}

function dotted(path: readonly PropertyKey[]): string {
  return path.map(String).join(".");
}

function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let v = data;
  for (const seg of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[seg];
  }
  return v;
}

/** The keys valid where an unknown key was found, from the defaults (they hold every key). */
function knownKeysHint(path: readonly PropertyKey[]): string {
  const parent = path.slice(0, -1);
  let keys: string[] | undefined;
  if (parent.length === 2 && parent[0] === "agents") {
    keys = ["token", "name", "policy"];
  } else {
    const v = valueAt(DEFAULT_CONFIG, parent);
    if (v !== null && typeof v === "object" && parent[0] !== "agents") keys = Object.keys(v);
  }
  const where = parent.length === 0 ? "at the top level" : `under "${dotted(parent)}"`;
  return keys ? `Valid keys ${where}: ${keys.join(", ")}` : "See docs/CONFIG.md";
}

/**
 * Offset of the YAML node a key path points at: the key itself when the last step is a map key
 * (so a block value on the next line still reports the key's line), or the nearest existing
 * ancestor when the path goes further than the document.
 */
function offsetOf(doc: Document, path: readonly PropertyKey[]): number | undefined {
  const { isAlias, isMap, isSeq } = yaml();
  let node: unknown = doc.contents;
  let offset = rangeStart(node) ?? 0;
  for (const seg of path) {
    while (isAlias(node)) node = node.resolve(doc);
    if (isMap(node)) {
      const pair = node.items.find((p) => keyText(p.key) === String(seg));
      if (!pair) break;
      offset = rangeStart(pair.key) ?? rangeStart(pair.value) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof seg === "number") {
      const item = node.items[seg];
      if (item === undefined) break;
      offset = rangeStart(item) ?? offset;
      node = item;
    } else {
      break;
    }
  }
  return offset;
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as { range?: [number, number, number] } | null)?.range;
  return range?.[0];
}

function keyText(key: unknown): string | undefined {
  const { isScalar } = yaml();
  if (isScalar(key)) return String(key.value);
  return typeof key === "string" ? key : undefined;
}

function hasLiteralTokens(doc: Document): boolean {
  const { isMap, isScalar } = yaml();
  const agents = doc.get("agents", true);
  if (!isMap(agents)) return false;
  return agents.items.some((pair) => {
    if (!isMap(pair.value)) return false;
    const token = pair.value.get("token", true);
    return isScalar(token) && typeof token.value === "string" && !token.value.includes("${");
  });
}

/**
 * Replaces `${NAME}` in every string value (not in keys) from `env`, in place. `$${` is a literal
 * `${`; a lone `$` is kept. An unset or empty variable is an error: substituting "" would turn
 * a missing secret into an empty (or silently different) setting.
 */
function expandEnv(
  doc: Document,
  env: Record<string, string | undefined>,
  names: Set<string>,
): void {
  yaml().visit(doc, {
    Scalar(key, node) {
      if (key === "key" || typeof node.value !== "string") return;
      if (!node.value.includes("${")) return;
      node.value = expandString(node.value, env, node.range?.[0], names);
    },
  });
}

function expandString(
  value: string,
  env: Record<string, string | undefined>,
  offset: number | undefined,
  names: Set<string>,
): string {
  let out = "";
  let i = 0;
  while (i < value.length) {
    const dollar = value.indexOf("$", i);
    if (dollar === -1) break;
    out += value.slice(i, dollar);
    if (value.startsWith("$${", dollar)) {
      out += "${";
      i = dollar + 3;
    } else if (value.startsWith("${", dollar)) {
      const close = value.indexOf("}", dollar + 2);
      if (close === -1) {
        throw new ConfigProblem(
          offset,
          `unterminated "\${" (write "$\${" for a literal "\${")`,
        );
      }
      const name = value.slice(dollar + 2, close);
      if (!ENV_NAME.test(name)) {
        throw new ConfigProblem(
          offset,
          `invalid environment variable name "${name}" in "\${…}" ` +
            `(letters, digits and _, not starting with a digit; "$\${" is a literal "\${")`,
        );
      }
      const replacement = env[name];
      if (replacement === undefined || replacement === "") {
        throw new ConfigProblem(offset, `environment variable "${name}" is not set`);
      }
      out += replacement;
      names.add(name);
      i = close + 1;
    } else {
      out += "$";
      i = dollar + 1;
    }
  }
  return out + value.slice(i);
}

async function readAtMost(file: Deno.FsFile, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(64 * 1024);
  while (total < limit) {
    const n = await file.read(buf);
    if (n === null) break;
    chunks.push(buf.slice(0, n));
    total += n;
  }
  return concatBytes(chunks, total);
}

function decode(path: string, data: Uint8Array): string {
  // The file may have grown between stat and read.
  if (data.length > CONFIG_LIMITS.fileBytes) throw tooLarge(path);
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch (err) {
    throw new TermadaError("INVALID_ARGUMENT", `Config "${path}": it is not valid UTF-8`, {
      cause: err,
    });
  }
}

function tooLarge(path: string): TermadaError {
  return configError(path, undefined, `it is larger than ${CONFIG_LIMITS.fileBytes} bytes`);
}

function configError(path: string, line: number | undefined, text: string): TermadaError {
  return new TermadaError("INVALID_ARGUMENT", formatMessage(path, line, text), {
    details: { file: path, ...(line === undefined ? {} : { line }) },
  });
}

function readError(path: string, err: unknown): TermadaError {
  const why = err instanceof Deno.errors.NotFound
    ? "it does not exist"
    : err instanceof Deno.errors.PermissionDenied
    ? "permission denied"
    : err instanceof Error
    ? err.message
    : String(err);
  return new TermadaError("INVALID_ARGUMENT", `Cannot read config "${path}": ${why}`, {
    cause: err,
    details: { file: path },
  });
}
