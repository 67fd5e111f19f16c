/**
 * The only file that touches `mvdan-sh`: mvdan/sh's bash parser compiled to JavaScript by
 * GopherJS. It is synchronous and returns a typed syntax tree, which is what the policy needs; the
 * WASM build (`sh-syntax`) is async and serialises the tree without node types.
 *
 * GopherJS's public wrapper objects cost ~12 µs per property read (reflection on every access), so
 * the tree is read once through the wrappers' `__internal_object__` — plain JavaScript objects with
 * Go's field names — and copied into the plain nodes below (one pass, no recursion). That relies on
 * GopherJS's object layout, so the version is pinned exactly in deno.json and `parseBash` checks
 * the layout on first use: if it ever changes, every parse fails and every command is opaque
 * (fail closed), and the tests say why.
 *
 * Loading `mvdan-sh` reads `process.env` (GopherJS's `os` package), so whoever loads the parser
 * needs `--allow-env` (the daemon and test permission sets have it). It is ~80 ms of start-up, so
 * it is loaded on demand (`loadShellParser`): a daemon whose policies have no rules never needs
 * it. Until it is loaded every parse fails, so every shell line is opaque — which a policy with
 * rules denies (fail closed).
 */

/** A syntax node: `type` is mvdan/sh's type name; `pos`/`end` are UTF-8 byte offsets (or -1). */
export interface Node {
  type: string;
  pos: number;
  end: number;
}

export interface File extends Node {
  Stmts: Stmt[];
}

export interface Stmt extends Node {
  Cmd: Node | null;
  Redirs: Redirect[];
  Negated: boolean;
  Background: boolean;
}

export interface Redirect extends Node {
  Op: number;
  N: Lit | null;
  Word: Word | null;
  Hdoc: Word | null;
}

export interface Word extends Node {
  Parts: Node[];
}

export interface Lit extends Node {
  Value: string;
}

export interface SglQuoted extends Node {
  Dollar: boolean;
  Value: string;
}

export interface DblQuoted extends Node {
  Dollar: boolean;
  Parts: Node[];
}

export interface HasStmts extends Node {
  Stmts: Stmt[];
}

export interface ParamExp extends Node {
  Param: Lit | null;
  Exp: (Node & { Op: number; Word: Word | null }) | null;
}

export interface Assign extends Node {
  Naked: boolean;
  Append: boolean;
  Name: Lit | null;
  Index: Node | null;
  Value: Word | null;
  Array: (Node & { Elems: (Node & { Index: Node | null; Value: Word | null })[] }) | null;
}

export interface CallExpr extends Node {
  Assigns: Assign[];
  Args: Word[];
}

export interface BinaryCmd extends Node {
  Op: number;
  X: Stmt | null;
  Y: Stmt | null;
}

export interface IfClause extends Node {
  Cond: Stmt[];
  Then: Stmt[];
  Else: IfClause | null;
}

export interface WhileClause extends Node {
  Cond: Stmt[];
  Do: Stmt[];
}

export interface ForClause extends Node {
  Loop: Node | null;
  Do: Stmt[];
}

export interface WordIter extends Node {
  Items: Word[];
}

export interface CaseClause extends Node {
  Word: Word | null;
  Items: (Node & { Patterns: Word[]; Stmts: Stmt[] })[];
}

export interface FuncDecl extends Node {
  Name: Lit | null;
  Body: Stmt | null;
}

export interface DeclClause extends Node {
  Variant: Lit | null;
  Args: Assign[];
}

export interface TimeClause extends Node {
  PosixFormat: boolean;
  Stmt: Stmt | null;
}

export interface CoprocClause extends Node {
  Stmt: Stmt | null;
}

/** Calls `visit` on every node below `node`; `visit` returns false to skip a node's children. */
export function walkChildren(node: Node, visit: (child: Node) => boolean): void {
  const stack: Node[] = [node];
  while (stack.length > 0) {
    const n = stack.pop()!;
    const children: Node[] = [];
    for (const [key, v] of Object.entries(n)) {
      if (key === "type" || v === null || typeof v !== "object") continue;
      if (Array.isArray(v)) {
        for (const e of v) if (e !== null && typeof e === "object" && "type" in e) children.push(e);
      } else if ("type" in v) {
        children.push(v as Node);
      }
    }
    // Children in source order: the stack pops the last pushed first.
    for (let i = children.length - 1; i >= 0; i--) {
      if (visit(children[i]!)) stack.push(children[i]!);
    }
  }
}

// GopherJS values, as far as this file reads them.
type GoValue = Record<string, unknown> & {
  constructor?: { string?: unknown; nil?: unknown };
  Pos?: () => { offs: number };
  End?: () => { offs: number };
};
type GoSlice = { $array: unknown[]; $offset: number; $length: number };

interface Parser {
  Parse(src: string, name: string): { __internal_object__?: GoValue };
}

interface Syntax {
  NewParser(...options: unknown[]): Parser;
  Variant(lang: number): unknown;
  LangBash: number;
}

let syntaxModule: Syntax | undefined;
let loading: Promise<void> | undefined;

/** Loads the bash parser (once). Call before deciding with a policy that has rules. */
export function loadShellParser(): Promise<void> {
  return loading ??= import("mvdan-sh").then((m) => {
    syntaxModule = (m.default as unknown as { syntax: Syntax }).syntax;
  });
}

export function shellParserLoaded(): boolean {
  return syntaxModule !== undefined;
}

/** The Go type name of a non-nil `*syntax.X` pointer, without the package. */
function goType(v: unknown): string | undefined {
  if (v === null || typeof v !== "object") return undefined;
  const ctor = (v as GoValue).constructor;
  const name = ctor?.string;
  if (typeof name !== "string" || !name.startsWith("*syntax.") || v === ctor?.nil) return undefined;
  return name.slice(8);
}

function isSlice(v: unknown): v is GoSlice {
  return v !== null && typeof v === "object" && "$array" in v && "$length" in v;
}

const utf8 = new TextDecoder();

/** Go strings are byte strings in GopherJS: one char per UTF-8 byte. */
function goString(s: string): string {
  if (!/[\u0080-\u00ff]/.test(s)) return s;
  return utf8.decode(Uint8Array.from(s, (c) => c.charCodeAt(0)));
}

const SKIPPED = new Set(["$val", "Comments", "Last", "CondLast", "ThenLast", "DoLast"]);

function shell(v: GoValue, type: string): Node {
  const node: Node = { type, pos: -1, end: -1 };
  if (typeof v.Pos === "function" && typeof v.End === "function") {
    try {
      node.pos = v.Pos().offs;
      node.end = v.End().offs;
    } catch {
      // Some nodes have no position (an empty word): only displays use it.
    }
  }
  return node;
}

/** Copies a GopherJS syntax tree into plain nodes, iteratively (deep trees do not recurse). */
function convert(root: GoValue, type: string): Node {
  const top = shell(root, type);
  const stack: [GoValue, Record<string, unknown>][] = [[
    root,
    top as unknown as Record<string, unknown>,
  ]];
  const child = (v: unknown): unknown => {
    const t = goType(v);
    if (t !== undefined) {
      const out = shell(v as GoValue, t);
      stack.push([v as GoValue, out as unknown as Record<string, unknown>]);
      return out;
    }
    if (typeof v === "string") return goString(v);
    if (typeof v === "number" || typeof v === "boolean") return v;
    return null;
  };
  while (stack.length > 0) {
    const [src, dst] = stack.pop()!;
    for (const key of Object.keys(src)) {
      if (SKIPPED.has(key)) continue;
      const v = src[key];
      if (isSlice(v)) {
        const list: unknown[] = [];
        for (let i = 0; i < v.$length; i++) {
          const e = child(v.$array[v.$offset + i]);
          if (e !== null) list.push(e);
        }
        dst[key] = list;
      } else {
        dst[key] = child(v);
      }
    }
  }
  return top;
}

export type ParseResult = { ok: true; file: File } | { ok: false; error: string };

let parser: Parser | undefined;
let layoutChecked = false;

/** Parses bash source. Never throws: a syntax error (or a parser crash) is `ok: false`. */
export function parseBash(src: string): ParseResult {
  const syntax = syntaxModule;
  if (syntax === undefined) return { ok: false, error: "the shell parser is not loaded" };
  try {
    if (!layoutChecked) checkLayout(syntax);
    parser ??= syntax.NewParser(syntax.Variant(syntax.LangBash));
    const internal = parser.Parse(src, "").__internal_object__;
    if (internal === undefined) throw new Error("mvdan-sh returned no syntax tree");
    return { ok: true, file: convert(internal, "File") as File };
  } catch (err) {
    // A crashed parser (stack overflow on absurd nesting) is not reused.
    parser = undefined;
    return { ok: false, error: errorText(err) };
  }
}

function checkLayout(syntax: Syntax): void {
  const p = syntax.NewParser(syntax.Variant(syntax.LangBash));
  const internal = p.Parse("a 'é' | b", "").__internal_object__;
  const file = internal && convert(internal, "File") as File;
  const pipe = file?.Stmts[0]?.Cmd as BinaryCmd | undefined;
  const word = (pipe?.X?.Cmd as CallExpr | undefined)?.Args[1];
  const quoted = word?.Parts[0] as SglQuoted | undefined;
  if (pipe?.type !== "BinaryCmd" || quoted?.type !== "SglQuoted" || quoted.Value !== "é") {
    throw new Error("mvdan-sh's object layout is not the one this policy reads (version changed?)");
  }
  layoutChecked = true;
}

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  const goError = err as { Error?: () => string } | null;
  if (goError && typeof goError.Error === "function") {
    try {
      return goString(String(goError.Error()));
    } catch {
      // Fall through to the generic text: the message is only for the human reason.
    }
  }
  return "unknown parser error";
}

/** Operator numbers of this mvdan-sh build, read from parsing samples rather than hard-coded. */
export interface Operators {
  rdrIn: number;
  rdrInOut: number;
  dplIn: number;
  hdoc: number;
  dashHdoc: number;
  wordHdoc: number;
  pipe: number;
  pipeAll: number;
  paramAt: number;
}

let operators: Operators | undefined;

export function ops(): Operators {
  if (operators) return operators;
  const r = parseBash("a <x <>y <&3 <<<w <<E <<-F\nE\nF\n");
  const p = parseBash("a | b\na |& b\n: ${x@P}\n");
  if (!r.ok || !p.ok) throw new Error("mvdan-sh cannot parse its calibration samples");
  const redirs = r.file.Stmts[0]!.Redirs.map((x) => x.Op);
  const pipes = p.file.Stmts.slice(0, 2).map((s) => (s.Cmd as BinaryCmd).Op);
  const at = (p.file.Stmts[2]!.Cmd as CallExpr).Args[1]!.Parts[0] as ParamExp;
  operators = {
    rdrIn: redirs[0]!,
    rdrInOut: redirs[1]!,
    dplIn: redirs[2]!,
    wordHdoc: redirs[3]!,
    hdoc: redirs[4]!,
    dashHdoc: redirs[5]!,
    pipe: pipes[0]!,
    pipeAll: pipes[1]!,
    paramAt: at.Exp!.Op,
  };
  return operators;
}
