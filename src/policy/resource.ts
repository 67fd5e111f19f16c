/**
 * Rules for what is not a command: which servers a session or fleet run may target, which port
 * forwards may be opened, which files `file_read` / `file_write` may touch. Each kind has its
 * own `allow` / `deny` / `confirm` lists in a policy (`servers`, `forwards`, `files.read`,
 * `files.write`); the strictest matching list wins.
 *
 * Patterns:
 * - `*` matches any run of characters except `/`; `**` matches anything, `/` included;
 *   `?` matches one character except `/`; `\` makes the next character literal.
 * - A pattern matches the whole subject.
 * - servers: the server name, or `tag:<pattern>` matching any of its tags.
 * - forwards: `<server>:<remote host>:<remote port>`, e.g. `staging:127.0.0.1:*`.
 * - files: an absolute path (`/etc/**`) for every target, or `<target>:<path>` for one
 *   (`prod:/var/www/**`, `local:/tmp/*`).
 * - vault: an entry name (`db-*`) for every target, or `<target>:<entry>` for one
 *   (`local:npm-token`, `prod:deploy-*`); `vault` rules have no `confirm` list.
 *
 * Matching simulates the pattern as a set of states (linear in the subject, no backtracking).
 */

export interface ResourceRules {
  readonly allow: readonly string[];
  readonly deny: readonly string[];
  readonly confirm: readonly string[];
}

export type ResourceKind =
  | "server"
  | "forward"
  | "file.read"
  | "file.write"
  | "vault"
  | "plugin"
  | "adapter";

/** What is decided: a server (name and tags), a forward spec, or a file on a target. */
export type ResourceSubject =
  | { kind: "server"; name: string; tags: readonly string[] }
  | { kind: "forward"; server: string; host: string; port: number }
  | { kind: "file.read" | "file.write"; target: string; path: string }
  /** A vault entry used by an agent on a target (`local` or a server's name). */
  | { kind: "vault"; target: string; entry: string }
  /** A plugin's tool, by its qualified name (`<plugin>.<tool>`). */
  | { kind: "plugin"; tool: string }
  /** What an adapter run changes (`file.patch` and a file's path, `http.request` and `METHOD URL`). */
  | { kind: "adapter"; adapter: string; resource: string };

export interface ResourceDecision {
  action: "allow" | "deny" | "confirm";
  rule?: { list: "allow" | "deny" | "confirm"; pattern: string };
  reason: string;
}

const ANY = -1; // `*`: any run without `/`
const DEEP = -2; // `**`: any run
const ONE = -3; // `?`: one character but `/`
const SLASH = 0x2f;

interface CompiledPattern {
  source: string;
  /** `tag:` (servers) or the target part (files), compiled; undefined: any. */
  scope?: Int32Array;
  scopeIsTag?: boolean;
  body: Int32Array;
}

function tokens(text: string): Int32Array {
  const out: number[] = [];
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i)!;
    i += cp > 0xffff ? 2 : 1;
    if (cp === 0x5c && i < text.length) {
      const next = text.codePointAt(i)!;
      i += next > 0xffff ? 2 : 1;
      out.push(next);
    } else if (cp === 0x2a) {
      if (text.codePointAt(i) === 0x2a) {
        i++;
        while (text.codePointAt(i) === 0x2a) i++;
        if (out[out.length - 1] === ANY) out.pop();
        if (out[out.length - 1] !== DEEP) out.push(DEEP);
      } else if (out[out.length - 1] !== ANY && out[out.length - 1] !== DEEP) out.push(ANY);
    } else if (cp === 0x3f) out.push(ONE);
    else out.push(cp);
  }
  return Int32Array.from(out);
}

/** Does the whole `text` match `pat`? A set of positions advanced once per character. */
export function matchTokens(pat: Int32Array, text: string): boolean {
  const n = pat.length;
  let cur = new Uint8Array(n + 1);
  let next = new Uint8Array(n + 1);
  const close = (set: Uint8Array) => {
    // A star may match nothing: whoever reaches it also reaches what follows.
    for (let i = 0; i < n; i++) if (set[i] && (pat[i] === ANY || pat[i] === DEEP)) set[i + 1] = 1;
  };
  cur[0] = 1;
  close(cur);
  for (let i = 0; i < text.length;) {
    const cp = text.codePointAt(i)!;
    i += cp > 0xffff ? 2 : 1;
    next.fill(0);
    let any = false;
    for (let s = 0; s < n; s++) {
      if (!cur[s]) continue;
      const t = pat[s]!;
      if (t === DEEP || (t === ANY && cp !== SLASH)) {
        next[s] = 1;
        any = true;
      } else if ((t === ONE && cp !== SLASH) || t === cp) {
        next[s + 1] = 1;
        any = true;
      }
    }
    if (!any) return false;
    close(next);
    [cur, next] = [next, cur];
  }
  return cur[n] === 1;
}

/** A resource glob (`*` within a `/` segment, `**` across, `?`, `\\` escapes), compiled. */
export function compileResourceGlob(pattern: string): Int32Array {
  const text = pattern.trim();
  if (text === "") throw new RangeError("Resource pattern is empty");
  return tokens(text);
}

function compilePattern(kind: ResourceKind, source: string): CompiledPattern {
  const text = source.trim();
  if (text === "") throw new RangeError("Resource pattern is empty");
  if (kind === "server" && text.startsWith("tag:")) {
    return { source, scope: tokens(text.slice(4)), scopeIsTag: true, body: new Int32Array() };
  }
  if ((kind === "file.read" || kind === "file.write") && !text.startsWith("/")) {
    const colon = text.indexOf(":");
    if (colon <= 0 || text[colon + 1] !== "/") {
      throw new RangeError(
        `File pattern "${source}" must be an absolute path or "<server>:<absolute path>"`,
      );
    }
    return { source, scope: tokens(text.slice(0, colon)), body: tokens(text.slice(colon + 1)) };
  }
  if (kind === "vault") {
    // `<target>:<entry>` or `<entry>` (entry names never hold ":").
    const colon = text.indexOf(":");
    if (colon === 0 || colon === text.length - 1) {
      throw new RangeError(`Vault pattern "${source}" must be "<entry>" or "<target>:<entry>"`);
    }
    return colon > 0
      ? { source, scope: tokens(text.slice(0, colon)), body: tokens(text.slice(colon + 1)) }
      : { source, body: tokens(text) };
  }
  return { source, body: tokens(text) };
}

/** One kind's rules, compiled once per policy. */
export class CompiledResourceRules {
  readonly kind: ResourceKind;
  readonly allow: readonly CompiledPattern[];
  readonly deny: readonly CompiledPattern[];
  readonly confirm: readonly CompiledPattern[];

  constructor(kind: ResourceKind, rules: ResourceRules) {
    this.kind = kind;
    this.allow = rules.allow.map((p) => compilePattern(kind, p));
    this.deny = rules.deny.map((p) => compilePattern(kind, p));
    this.confirm = rules.confirm.map((p) => compilePattern(kind, p));
  }
}

function matches(p: CompiledPattern, s: ResourceSubject): boolean {
  switch (s.kind) {
    case "server":
      return p.scopeIsTag
        ? s.tags.some((t) => matchTokens(p.scope!, t))
        : matchTokens(p.body, s.name);
    case "forward":
      return matchTokens(p.body, `${s.server}:${s.host}:${s.port}`);
    case "file.read":
    case "file.write":
      return (p.scope === undefined || matchTokens(p.scope, s.target)) &&
        matchTokens(p.body, s.path);
    case "vault":
      return (p.scope === undefined || matchTokens(p.scope, s.target)) &&
        matchTokens(p.body, s.entry);
    case "plugin":
      return matchTokens(p.body, s.tool);
    case "adapter":
      return matchTokens(p.body, `${s.adapter}:${s.resource}`);
  }
}

/** How a subject is named in reasons. */
export function describeSubject(s: ResourceSubject): string {
  switch (s.kind) {
    case "server":
      return `server "${s.name}"`;
    case "forward":
      return `forward to ${s.host}:${s.port} through "${s.server}"`;
    case "file.read":
      return `reading "${s.path}" on ${s.target}`;
    case "file.write":
      return `writing "${s.path}" on ${s.target}`;
    case "vault":
      return `vault entry "${s.entry}" on ${s.target}`;
    case "plugin":
      return `plugin tool "${s.tool}"`;
    case "adapter":
      return `${s.adapter} of "${s.resource}"`;
  }
}

/**
 * Decides one subject: deny, then confirm, then allow. With rules for its kind, a subject no
 * allow rule matches is denied when allow rules exist (and allowed when there are only deny or
 * confirm rules). Without rules for its kind, `fallback` decides (the caller says why).
 */
export function decideResource(
  subject: ResourceSubject,
  rules: CompiledResourceRules | undefined,
  fallback: { action: "allow" | "deny"; reason: string },
): ResourceDecision {
  const what = describeSubject(subject);
  if (!rules || rules.allow.length + rules.deny.length + rules.confirm.length === 0) {
    return { action: fallback.action, reason: `${what}: ${fallback.reason}` };
  }
  for (const list of ["deny", "confirm", "allow"] as const) {
    const hit = rules[list].find((p) => matches(p, subject));
    if (hit) {
      const verb = list === "deny" ? "denied" : list === "confirm" ? "needs approval" : "allowed";
      return {
        action: list,
        rule: { list, pattern: hit.source },
        reason: `${what} ${verb} by rule "${hit.source}"`,
      };
    }
  }
  if (rules.allow.length > 0) {
    return { action: "deny", reason: `${what}: no allow rule matches` };
  }
  return { action: "allow", reason: `${what}: no rule matches` };
}
