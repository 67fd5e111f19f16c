/**
 * Finds every simple command a command line would run, normalised for matching, and notes what
 * cannot be known before it runs (opaque). Works on the syntax tree of mvdan-sh: pipelines, lists,
 * subshells, groups, if/while/for/case bodies, function bodies (checked where they are defined),
 * `$(…)` and backticks anywhere in a word, `<(…)`, here-documents, and payloads of `bash -c`,
 * `eval`, `trap`, `watch`, `flock -c`, `su -c` and the wrappers of `_wrappers.ts`.
 */
import {
  type Assign,
  type BinaryCmd,
  type CallExpr,
  type CaseClause,
  type CoprocClause,
  type DblQuoted,
  type DeclClause,
  type ForClause,
  type FuncDecl,
  type HasStmts,
  type IfClause,
  type Lit,
  type Node,
  ops,
  type ParamExp,
  parseBash,
  type Redirect,
  type SglQuoted,
  type Stmt,
  type TimeClause,
  walkChildren,
  type WhileClause,
  type Word,
  type WordIter,
} from "./_parser.ts";
import {
  ANY,
  decodeAnsiC,
  hasBraceExpansion,
  holeWord,
  HOME,
  literalWord,
  makeWord,
  type Piece,
  programName,
  type ShellWord,
} from "./_words.ts";
import { optionTable, scanOptions, WRAPPERS } from "./_wrappers.ts";
import {
  AWKS,
  awkUse,
  type CodeUse,
  findExecs,
  FOREIGN_SHELLS,
  foreignShellUse,
  gitUse,
  interpreterUse,
  isInterpreter,
  sedUse,
  SHELLS,
  shellUse,
} from "./_programs.ts";

/** Bounds past which a command is opaque (fail closed). */
export const POLICY_LIMITS = {
  /** UTF-8 bytes of the whole command. */
  commandBytes: 1 << 20,
  /** Nesting: payloads, substitutions, compound commands, wrappers. */
  depth: 64,
  /** Simple commands found in one command line. */
  commands: 10_000,
} as const;

export interface FoundCommand {
  /** Normalised: the program as its basename, wrappers peeled into commands of their own. */
  argv: ShellWord[];
  /** `NAME=value` words set for this command (dropped from argv, kept for the record). */
  assignments: ShellWord[];
}

export interface Analysis {
  commands: FoundCommand[];
  /** Why some of what runs cannot be known; empty when everything is known. */
  opaque: string[];
  /**
   * Programs read from files by a shell or interpreter (`bash x.sh`, `python3 x.py`, `sh < f`,
   * `bash /dev/stdin`): what they run is only known by running them. Opaque unless an exec gate
   * checks every program they start (DecideOptions.execGate).
   */
  programFiles: string[];
}

type Stdin =
  | { kind: "tty" }
  | { kind: "pipe" }
  | { kind: "file" }
  | { kind: "text"; text: ShellWord };

const TTY: Stdin = { kind: "tty" };

class Source {
  readonly #ascii: boolean;
  #bytes: Uint8Array | undefined;
  constructor(readonly text: string) {
    this.#ascii = !/\P{ASCII}/u.test(text);
  }
  /** The source text of a node (mvdan-sh offsets are UTF-8 byte offsets). */
  slice(node: Node): string {
    const from = node.pos;
    const to = node.end;
    if (from < 0 || to < from) return "…";
    if (this.#ascii) return this.text.slice(from, to);
    this.#bytes ??= new TextEncoder().encode(this.text);
    return new TextDecoder().decode(this.#bytes.subarray(from, to));
  }
}

interface Ctx {
  src: Source;
  depth: number;
  stdin: Stdin;
}

/**
 * Variables whose value the shell runs or sources later (prompts, hooks, startup files, the
 * dynamic loader): setting one hides a command from this check.
 */
const CODE_VARIABLES = new Set([
  "PROMPT_COMMAND",
  "PS0",
  "PS1",
  "PS2",
  "PS3",
  "PS4",
  "PROMPT",
  "PROMPT2",
  "PROMPT3",
  "PROMPT4",
  "RPROMPT",
  "RPS1",
  "RPROMPT2",
  "RPS2",
  "BASH_ENV",
  "ENV",
  "SHELLOPTS",
  "BASHOPTS",
  "BASH_LOADABLES_PATH",
  "FPATH",
  "fpath",
  "LD_PRELOAD",
  "LD_AUDIT",
  "precmd_functions",
  "preexec_functions",
  "chpwd_functions",
  "periodic_functions",
  "zshaddhistory_functions",
  "zshexit_functions",
]);

/** `a[$(cmd)]` inside a literal: bash runs it when the text is evaluated as arithmetic. */
const ARITHMETIC_INJECTION = /\[[^\]]*(\$\(|`)/;

/** Builtins that evaluate arguments as arithmetic or assign to variables named by arguments. */
const VARIABLE_BUILTINS = new Set([
  "declare",
  "typeset",
  "local",
  "export",
  "readonly",
  "read",
  "mapfile",
  "readarray",
  "printf",
  "getopts",
  "let",
  "test",
  "[",
]);

const DECLARATIONS = new Set(["declare", "typeset", "local", "export", "readonly"]);
const ASSIGNED_NAME = /^([A-Za-z_][A-Za-z0-9_]*)(\[.*\])?\+?=/;
const READ = optionTable("e r s a: d: i: n: N: p: t: u:");
const MAPFILE = optionTable("t d: n: O: s: u: C: c:");

const SAFE_PARAM_OPERATORS = /^[QEAaKkUuL]$/;

class Analyzer {
  readonly commands: FoundCommand[] = [];
  readonly opaque: string[] = [];
  readonly programFiles: string[] = [];
  #count = 0;
  #full = false;

  flag(reason: string): void {
    if (this.opaque.length < 8 && !this.opaque.includes(reason)) this.opaque.push(reason);
  }

  /** A shell or interpreter runs a program file (see Analysis.programFiles). */
  programFile(reason: string): void {
    if (this.programFiles.length < 8 && !this.programFiles.includes(reason)) {
      this.programFiles.push(reason);
    }
  }

  /** Parses and checks shell source at a nesting depth. */
  script(text: string, depth: number, stdin: Stdin): void {
    if (this.#full) return;
    if (depth > POLICY_LIMITS.depth) {
      return this.flag(`commands nest more than ${POLICY_LIMITS.depth} levels deep`);
    }
    const parsed = parseBash(text);
    if (!parsed.ok) return this.flag(`cannot parse "${clip(text)}": ${parsed.error}`);
    this.stmts(parsed.file.Stmts, { src: new Source(text), depth, stdin });
  }

  /** An argv that runs as is (the agent's multi-word command). */
  argv(words: readonly string[]): void {
    const src = new Source("");
    this.simple(words.map(literalWord), [], { src, depth: 0, stdin: TTY });
  }

  #nested(ctx: Ctx, body: (ctx: Ctx) => void): void {
    if (this.#full) return;
    if (ctx.depth + 1 > POLICY_LIMITS.depth) {
      return this.flag(`commands nest more than ${POLICY_LIMITS.depth} levels deep`);
    }
    body({ ...ctx, depth: ctx.depth + 1 });
  }

  stmts(list: readonly Stmt[], ctx: Ctx): void {
    for (const s of list) this.stmt(s, ctx);
  }

  stmt(s: Stmt, ctx: Ctx): void {
    if (this.#full) return;
    let stdin = ctx.stdin;
    for (const r of s.Redirs ?? []) if (r) stdin = this.#redirect(r, ctx, stdin);
    if (s.Cmd) this.#command(s.Cmd, stdin === ctx.stdin ? ctx : { ...ctx, stdin });
  }

  #redirect(r: Redirect, ctx: Ctx, stdin: Stdin): Stdin {
    const o = ops();
    const fd = r.N?.Value;
    const toStdin = fd === undefined || fd === "0";
    if (r.Op === o.hdoc || r.Op === o.dashHdoc) {
      let body = literalWord("");
      if (r.Hdoc) body = quotedDelimiter(r.Word) ? rawText(r.Hdoc) : this.word(r.Hdoc, ctx, "hdoc");
      return toStdin ? { kind: "text", text: body } : stdin;
    }
    const target = r.Word ? this.word(r.Word, ctx) : undefined;
    if (!toStdin) return stdin;
    if (r.Op === o.wordHdoc && target) return { kind: "text", text: target };
    if (r.Op === o.rdrIn || r.Op === o.rdrInOut) return { kind: "file" };
    if (r.Op === o.dplIn) return { kind: "pipe" };
    return stdin;
  }

  #command(cmd: Node, ctx: Ctx): void {
    const type = cmd.type;
    switch (type) {
      case "CallExpr":
        return this.#call(cmd as CallExpr, ctx);
      case "BinaryCmd":
        return this.#binary(cmd as BinaryCmd, ctx);
      case "Subshell":
      case "Block":
        return this.#nested(ctx, (c) => this.stmts((cmd as HasStmts).Stmts, c));
      case "IfClause":
        return this.#nested(ctx, (c) => {
          for (let k: IfClause | null = cmd as IfClause; k; k = k.Else) {
            this.stmts(k.Cond, c);
            this.stmts(k.Then, c);
          }
        });
      case "WhileClause":
        return this.#nested(ctx, (c) => {
          this.stmts((cmd as WhileClause).Cond, c);
          this.stmts((cmd as WhileClause).Do, c);
        });
      case "ForClause":
        return this.#nested(ctx, (c) => {
          const loop = (cmd as ForClause).Loop;
          if (loop && loop.type === "WordIter") {
            for (const w of (loop as WordIter).Items ?? []) if (w) this.word(w, c);
          } else if (loop) {
            this.#expression(loop, c);
          }
          this.stmts((cmd as ForClause).Do, c);
        });
      case "CaseClause":
        return this.#nested(ctx, (c) => {
          const cc = cmd as CaseClause;
          if (cc.Word) this.word(cc.Word, c);
          for (const item of cc.Items ?? []) {
            for (const p of item.Patterns) this.word(p, c, "pattern");
            this.stmts(item.Stmts, c);
          }
        });
      case "FuncDecl": {
        // The body is checked where it is defined: it may run later, even from another line.
        const body = (cmd as FuncDecl).Body;
        return this.#nested(ctx, (c) => body && this.stmt(body, c));
      }
      case "ArithmCmd":
        this.#arithmeticReads(ctx.src.slice(cmd));
        return this.#expression(cmd, ctx);
      case "TestClause":
        return this.#expression(cmd, ctx);
      case "LetClause":
        this.#arithmeticReads(ctx.src.slice(cmd).replace(/^\s*let\b/, ""));
        this.#expression(cmd, ctx);
        return this.simple(
          [literalWord("let"), literalWord(ctx.src.slice(cmd).replace(/^let\s*/, ""))],
          [],
          ctx,
        );
      case "DeclClause":
        return this.#declaration(cmd as DeclClause, ctx);
      case "TimeClause":
        return this.#time(cmd as TimeClause, ctx);
      case "CoprocClause": {
        const inner = (cmd as CoprocClause).Stmt;
        this.simple([literalWord("coproc")], [], ctx);
        return this.#nested(ctx, (c) => inner && this.stmt(inner, c));
      }
      default:
        return this.flag(`unsupported shell syntax (${type})`);
    }
  }

  #binary(cmd: BinaryCmd, ctx: Ctx): void {
    // `a && b && c` is ((a && b) && c): walk the left spine without recursing, so long lists
    // do not count as nesting.
    const o = ops();
    const rights: { stmt: Stmt | null; piped: boolean }[] = [];
    let node = cmd;
    let first: Stmt | null;
    for (;;) {
      rights.push({ stmt: node.Y, piped: node.Op === o.pipe || node.Op === o.pipeAll });
      const x = node.X;
      if (x?.Cmd && !x.Redirs?.length && x.Cmd.type === "BinaryCmd") {
        node = x.Cmd as BinaryCmd;
        continue;
      }
      first = x;
      break;
    }
    if (first) this.stmt(first, ctx);
    for (let i = rights.length - 1; i >= 0; i--) {
      const { stmt, piped } = rights[i]!;
      if (stmt) this.stmt(stmt, piped ? { ...ctx, stdin: { kind: "pipe" } } : ctx);
    }
  }

  #call(ce: CallExpr, ctx: Ctx): void {
    const assignments = (ce.Assigns ?? []).flatMap((a) => (a ? [this.#assign(a, ctx)] : []));
    const args = (ce.Args ?? []).flatMap((w) => (w ? [this.word(w, ctx)] : []));
    if (args.length > 0) this.simple(args, assignments, ctx);
  }

  #assign(a: Assign, ctx: Ctx): ShellWord {
    return this.#assignment(a, ctx).word;
  }

  #assignment(a: Assign, ctx: Ctx): { word: ShellWord; value: ShellWord } {
    const name = a.Name?.Value ?? "";
    this.#checkVariable(name);
    if (a.Index) this.#expression(a.Index, ctx);
    let value = literalWord("");
    if (a.Value) {
      value = this.word(a.Value, ctx, "assign");
      this.#checkArithmetic(value);
    }
    for (const e of a.Array?.Elems ?? []) {
      if (e?.Index) this.#expression(e.Index, ctx);
      if (e?.Value) this.#checkArithmetic(this.word(e.Value, ctx, "assign"));
    }
    const display = a.Array ? `${name}=(…)` : `${name}${a.Append ? "+=" : "="}${value.display}`;
    const pieces = [`${name}=`, ...(a.Array ? [ANY as Piece] : value.pieces)];
    return { word: makeWord(pieces, display, false), value };
  }

  #checkVariable(name: string): void {
    const base = name.replace(/\[.*$/, "");
    if (CODE_VARIABLES.has(base)) {
      this.flag(`setting "${base}" makes the shell run its value later`);
    }
  }

  /**
   * Arithmetic that reads a variable evaluates its value as an expression, and an array
   * subscript there runs `$(…)`: what a variable holds is only known at run time. Under an exec
   * gate whatever it runs is decided at exec; without one (a server) it is opaque.
   */
  #arithmeticReads(text: string): void {
    if (/[A-Za-z_]/.test(text.replace(/^\$\(\(|\)\)$/g, "").replace(/0[xX][0-9a-fA-F]+/g, ""))) {
      this.programFile(`arithmetic "${clip(text)}" evaluates a variable's value as code`);
    }
  }

  #checkArithmetic(word: ShellWord): void {
    const text = word.pieces.filter((p) => typeof p === "string").join("");
    if (ARITHMETIC_INJECTION.test(text)) {
      this.flag(`"${clip(word.display)}" holds an array subscript with a command in it`);
    }
  }

  #declaration(dc: DeclClause, ctx: Ctx): void {
    const words: ShellWord[] = [literalWord(dc.Variant?.Value ?? "declare")];
    for (const a of dc.Args ?? []) {
      if (!a) continue;
      if (a.Naked && a.Value && !a.Name) {
        const w = this.word(a.Value, ctx);
        if (w.literal === undefined) {
          this.flag(`"${words[0]!.display}" gets a name only known at run time ("${w.display}")`);
        } else if (CODE_VARIABLES.has(w.literal)) {
          this.#checkVariable(w.literal);
        }
        words.push(w);
      } else if (a.Naked && a.Name) {
        words.push(literalWord(a.Name.Value));
      } else {
        const { word, value } = this.#assignment(a, ctx);
        // `declare -n ref=PS1` makes later assignments to ref land in PS1.
        if (value.literal !== undefined) this.#checkVariable(value.literal);
        words.push(word);
      }
    }
    this.simple(words, [], ctx);
  }

  #time(tc: TimeClause, ctx: Ctx): void {
    const prefix = [literalWord("time"), ...(tc.PosixFormat ? [literalWord("-p")] : [])];
    const inner = tc.Stmt;
    if (inner?.Cmd && inner.Cmd.type === "CallExpr") {
      let stdin = ctx.stdin;
      for (const r of inner.Redirs ?? []) if (r) stdin = this.#redirect(r, ctx, stdin);
      const ce = inner.Cmd as CallExpr;
      const assignments = (ce.Assigns ?? []).flatMap((a) => (a ? [this.#assign(a, ctx)] : []));
      const args = (ce.Args ?? []).flatMap((w) => (w ? [this.word(w, ctx)] : []));
      return this.simple([...prefix, ...args], assignments, { ...ctx, stdin });
    }
    this.simple(prefix, [], ctx);
    if (inner) this.#nested(ctx, (c) => this.stmt(inner, c));
  }

  /** Arithmetic, test clauses, parameter-expansion internals: find words and substitutions. */
  #expression(node: Node, ctx: Ctx): void {
    walkChildren(node, (n) => {
      const type = n.type;
      if (type === "Word") {
        this.#checkArithmetic(this.word(n as Word, ctx));
        return false;
      }
      if (type === "CmdSubst" || type === "ProcSubst") {
        this.#nested(ctx, (c) => this.stmts((n as HasStmts).Stmts, c));
        return false;
      }
      if (type === "ParamExp") this.#checkParam(n as ParamExp);
      return true;
    });
  }

  #checkParam(pe: ParamExp): void {
    if (pe.Exp && pe.Exp.Op === ops().paramAt) {
      const op = pe.Exp.Word?.Parts?.map((p) => (p as Lit).Value ?? "?").join("") ?? "";
      if (!SAFE_PARAM_OPERATORS.test(op)) {
        this.flag(`"\${…@${op}}" expands text as a prompt, which can run commands`);
      }
    }
  }

  /**
   * A word's value as far as it is known. `mode`: "assign" (no globbing or brace expansion),
   * "pattern" (a case pattern), "hdoc" (a here-document body with an unquoted delimiter).
   */
  word(w: Word, ctx: Ctx, mode: "arg" | "assign" | "pattern" | "hdoc" = "arg"): ShellWord {
    const pieces: Piece[] = [];
    let active = "";
    let splits = false;
    const parts = w.Parts ?? [];
    for (let index = 0; index < parts.length; index++) {
      const part = parts[index]!;
      const type = part.type;
      if (type === "Lit") {
        const raw = (part as Lit).Value;
        if (mode === "hdoc") {
          pieces.push(unescape(raw, "hdoc"));
          continue;
        }
        if (raw === "$" && index < parts.length - 1) {
          // zsh expansions bash does not have: `$=cmd`, `$~pat`, `$^arr`.
          pieces.push(ANY);
          active += "\0";
          splits = true;
          continue;
        }
        const lit = unquotedLit(raw, index === 0, mode === "arg");
        pieces.push(...lit.pieces);
        active += lit.active;
        if (lit.glob) splits = true;
      } else if (type === "SglQuoted") {
        const q = part as SglQuoted;
        const text = q.Dollar ? decodeAnsiC(q.Value) : q.Value;
        pieces.push(text);
        active += "\0".repeat(text.length);
      } else if (type === "DblQuoted") {
        const q = part as DblQuoted;
        if (q.Dollar) {
          // $"…" is translated through the locale's message catalog: its text is not known.
          pieces.push(ANY);
        }
        for (const inner of q.Parts ?? []) {
          if (inner.type === "Lit") {
            if (!q.Dollar) pieces.push(unescape((inner as Lit).Value, "double"));
          } else {
            pieces.push(this.#expansion(inner, ctx));
          }
        }
        active += "\0";
      } else {
        pieces.push(this.#expansion(part, ctx));
        active += "\0";
        if (mode === "arg") splits = true;
      }
    }
    const brace = mode === "arg" && hasBraceExpansion(active);
    if (!brace && pieces.every((p) => typeof p === "string")) {
      const word = makeWord(pieces, "", splits);
      if (word.literal !== undefined) return word;
    }
    const display = ctx.src.slice(w);
    return brace ? holeWord(display, true) : makeWord(pieces, display, splits);
  }

  /** `$x`, `${x…}`, `$(…)`, backticks, `$((…))`, `<(…)`: a hole, after checking what is inside. */
  #expansion(part: Node, ctx: Ctx): Piece {
    const type = part.type;
    switch (type) {
      case "CmdSubst":
      case "ProcSubst":
        this.#nested(ctx, (c) => this.stmts((part as HasStmts).Stmts, c));
        return ANY;
      case "ParamExp":
        this.#checkParam(part as ParamExp);
        this.#expression(part, ctx);
        return ANY;
      case "ArithmExp":
        this.#arithmeticReads(ctx.src.slice(part));
        this.#expression(part, ctx);
        return ANY;
      case "ExtGlob":
        // zsh glob qualifiers like *(e:…:) run code; bash's extglob patterns are rare in commands.
        this.flag(`extended glob "${ctx.src.slice(part)}"`);
        return ANY;
      default:
        this.flag(`unsupported word part (${type})`);
        return ANY;
    }
  }

  /** One simple command: record it, then look inside wrappers, shells and interpreters. */
  simple(words: ShellWord[], assignments: ShellWord[], ctx: Ctx): void {
    let argv = words;
    let assigns = assignments;
    let current = ctx;
    for (let hop = 0; argv.length > 0; hop++) {
      if (this.#full) return;
      if (hop > POLICY_LIMITS.depth) return this.flag(`more than ${POLICY_LIMITS.depth} wrappers`);
      if (++this.#count > POLICY_LIMITS.commands) {
        this.#full = true;
        return this.flag(`more than ${POLICY_LIMITS.commands} commands`);
      }
      for (const a of assigns) this.#checkVariable(assignmentName(a));
      const head = argv[0]!;
      const name = head.literal ?? knownBasename(head);
      if (name === undefined) {
        this.commands.push({ argv, assignments: assigns });
        return this.flag(`the command name "${head.display}" is only known at run time`);
      }
      const normalized = [literalWord(programName(name)), ...argv.slice(1)];
      this.commands.push({ argv: normalized, assignments: assigns });
      // A program named by its path may be a script or a copy written a moment ago: what it is
      // (and runs) is only known at exec — fine under an exec gate, opaque without one.
      if (name.includes("/")) this.programFile(`"${clip(name)}" runs the program in that file`);
      else if (RUNNERS.has(programName(name))) {
        this.programFile(`"${programName(name)}" runs programs in ways the policy does not read`);
      }
      const next = this.#program(normalized, current);
      if (next === undefined) return;
      argv = next.argv;
      assigns = next.assignments;
      if (next.stdinClosed) current = { ...current, stdin: { kind: "file" } };
    }
  }

  /** What a program runs besides itself: the inner command of a wrapper, or code it reads. */
  #program(
    argv: ShellWord[],
    ctx: Ctx,
  ): { argv: ShellWord[]; assignments: ShellWord[]; stdinClosed?: boolean } | undefined {
    const name = argv[0]!.literal!;
    const wrapper = WRAPPERS.get(name);
    if (wrapper) {
      const u = wrapper(argv);
      if (u.kind === "run") return u;
      if (u.kind === "script") {
        for (const text of u.scripts) this.#payload(name, text, ctx);
      }
      if (u.kind === "shell") this.#code(name, { kind: "stdin" }, ctx, true);
      if (u.kind === "opaque") this.flag(u.reason);
      return undefined;
    }
    if (SHELLS.has(name)) return void this.#code(name, shellUse(name, argv), ctx, true);
    if (FOREIGN_SHELLS.has(name)) return void this.#code(name, foreignShellUse(name, argv), ctx);
    if (isInterpreter(name)) return void this.#code(name, interpreterUse(name, argv), ctx);
    if (AWKS.has(name)) return void this.#code(name, awkUse(name, argv), ctx);
    if (name === "sed" || name === "gsed") return void this.#code(name, sedUse(argv), ctx);
    if (name === "git") return void this.#code(name, gitUse(argv), ctx);
    if (name === "find") {
      const found = findExecs(argv);
      if ("reason" in found) return void this.flag(found.reason);
      for (const inner of found) this.#nested(ctx, (c) => this.simple(inner, [], c));
      return undefined;
    }
    this.#builtin(name, argv, ctx);
    return undefined;
  }

  #builtin(name: string, argv: ShellWord[], ctx: Ctx): void {
    const args = argv.slice(1);
    const literals = args.map((w) => w.literal);
    const dynamic = args.find((w) => w.literal === undefined);
    const hasFlag = (letter: string) =>
      literals.some((s) => s !== undefined && /^-[A-Za-z]+$/.test(s) && s.includes(letter));
    switch (name) {
      case "eval": {
        if (dynamic) {
          return this.flag(`"eval" runs text only known at run time ("${dynamic.display}")`);
        }
        return this.#nested(ctx, (c) => this.script(literals.join(" "), c.depth, c.stdin));
      }
      case "trap": {
        // trap [-lp] [[ACTION] SIGNAL…]: the action runs later, in this shell.
        let i = 0;
        if (literals[0] === "--") i = 1;
        else if (literals[0]?.startsWith("-")) return;
        const action = args[i];
        if (action === undefined || args.length - i < 2) return;
        if (action.literal === "-" || action.literal === "") return;
        return this.#payload("trap", action, ctx);
      }
      case "source":
      case ".":
        return this.flag(`"${name}" runs the commands of a file in the session's shell`);
      case "alias":
        if (dynamic || literals.some((s) => s!.includes("="))) {
          return this.flag(`an alias changes what later commands mean`);
        }
        return;
      case "hash":
        if (dynamic || hasFlag("p")) {
          return this.flag(`"hash -p" changes which program a name runs`);
        }
        return;
      case "enable":
        if (args.length > 0) return this.flag(`"enable" changes or loads shell builtins`);
        return;
      case "fc":
        if (!literals.some((s) => s !== undefined && /^-[a-zA-Z]*l/.test(s))) {
          return this.flag(`"fc" runs commands from the history`);
        }
        return;
      case "bind":
        if (dynamic || hasFlag("x")) return this.flag(`"bind -x" binds a key to a command`);
        return;
      case "complete":
      case "compgen":
        if (dynamic || hasFlag("C")) return this.flag(`"${name} -C" runs a command to complete`);
        return;
    }
    if (!VARIABLE_BUILTINS.has(name)) return;
    for (const w of args) this.#checkArithmetic(w);
    const names: ShellWord[] = [];
    if (name === "read" || name === "mapfile" || name === "readarray") {
      const scan = scanOptions(name, argv, 1, name === "read" ? READ : MAPFILE);
      if (!scan.ok) return this.flag(scan.reason);
      if (scan.options.some((o) => o.id === "C")) this.flag(`"${name} -C" runs a callback`);
      for (const o of scan.options) if (o.id === "a" && o.value) names.push(o.value);
      names.push(...argv.slice(scan.next));
    } else if (name === "getopts") {
      if (args[1]) names.push(args[1]);
    } else if (name === "printf") {
      const v = literals.indexOf("-v");
      if (v !== -1 && args[v + 1]) names.push(args[v + 1]!);
    } else if (DECLARATIONS.has(name)) {
      for (const w of args) {
        const first = w.pieces[0];
        const assigned = typeof first === "string" ? ASSIGNED_NAME.exec(first)?.[1] : undefined;
        if (assigned !== undefined) {
          this.#checkVariable(assigned);
          // declare 'a=($(cmd))' evaluates the quoted text as a compound assignment.
          if (/\$\(|`/.test(first as string)) {
            this.flag(`"${name}" evaluates "${clip(w.display)}", which holds a command`);
          }
        } else {
          names.push(w);
        }
      }
    }
    for (const w of names) {
      if (w.literal === undefined) {
        this.flag(
          `"${name}" sets a variable whose name is only known at run time ("${w.display}")`,
        );
      } else {
        this.#checkVariable(w.literal);
      }
    }
  }

  #payload(name: string, script: ShellWord, ctx: Ctx): void {
    if (script.literal === undefined) {
      return this.flag(
        `the commands "${name}" runs are only known at run time ("${clip(script.display)}")`,
      );
    }
    this.script(script.literal, ctx.depth + 1, ctx.stdin);
  }

  #code(name: string, use: CodeUse, ctx: Ctx, shell = false): void {
    switch (use.kind) {
      case "script":
        return this.#payload(name, use.script, ctx);
      case "file":
        if (use.path.literal === undefined) {
          this.flag(`"${name}" runs a program file only known at run time ("${use.path.display}")`);
        } else {
          this.programFile(`"${name}" runs the program in file "${clip(use.path.literal)}"`);
        }
        return;
      case "opaque":
        return this.flag(use.reason);
      case "none":
        return;
      case "stdin":
        switch (ctx.stdin.kind) {
          case "tty": // interactive: what is typed next is checked as it is typed
            return;
          case "file": // a program file, like `sh < script.sh`
            return this.programFile(`"${name}" runs the program its input file holds`);
          case "pipe":
            return this.flag(`"${name}" reads the program it runs from its input`);
          case "text":
            if (!shell) return this.flag(`"${name}" reads its program from a here-document`);
            if (ctx.stdin.text.literal === undefined) {
              return this.flag(`the script "${name}" reads is only known at run time`);
            }
            // Commands in the script may read the rest of it: their input is unknown.
            return this.script(ctx.stdin.text.literal, ctx.depth + 1, { kind: "pipe" });
        }
    }
  }
}

/** `~/bin/rm`, `"$DIR"/rm`: the directory is unknown, the program name is not. */
function knownBasename(word: ShellWord): string | undefined {
  const last = word.pieces[word.pieces.length - 1];
  if (word.splits || typeof last !== "string" || !last.includes("/")) return undefined;
  const base = last.slice(last.lastIndexOf("/") + 1);
  return base === "" ? undefined : base;
}

function assignmentName(word: ShellWord): string {
  const first = word.pieces[0];
  return typeof first === "string" ? first.slice(0, Math.max(0, first.indexOf("="))) : "";
}

/** A here-document delimiter with any quoting (`'EOF'`, `"EOF"`, `\EOF`) keeps the body literal. */
function quotedDelimiter(word: Word | null): boolean {
  if (!word) return true;
  return (word.Parts ?? []).some((p) => p.type !== "Lit" || (p as Lit).Value.includes("\\"));
}

function rawText(word: Word): ShellWord {
  return literalWord((word.Parts ?? []).map((p) => (p as Lit).Value ?? "").join(""));
}

/** Backslash escapes inside double quotes or an unquoted here-document body. */
function unescape(raw: string, where: "double" | "hdoc"): string {
  const special = where === "double" ? '$`"\\\n' : "$`\\\n";
  let out = "";
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === "\\" && i + 1 < raw.length && special.includes(raw[i + 1]!)) {
      const next = raw[++i]!;
      if (next !== "\n") out += next;
    } else {
      out += c;
    }
  }
  return out;
}

/**
 * An unquoted literal: escapes resolved, pathname patterns (`*`, `?`, `[…]`) and a leading `~`
 * turned into holes. `active` has the unescaped characters (NUL for the rest), for brace checks.
 */
function unquotedLit(
  raw: string,
  first: boolean,
  expand: boolean,
): { pieces: Piece[]; active: string; glob: boolean } {
  const pieces: Piece[] = [];
  let text = "";
  let active = "";
  let glob = false;
  const flush = () => {
    if (text !== "") pieces.push(text);
    text = "";
  };
  let i = 0;
  if (first && raw[0] === "~") {
    let end = raw.indexOf("/");
    if (end === -1) end = raw.length;
    const user = raw.slice(1, end);
    if (/^[A-Za-z0-9._-]*$/.test(user) || user === "+" || user === "-") {
      pieces.push(user === "" ? HOME : ANY);
      active += "\0".repeat(end);
      i = end;
    }
  }
  for (; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === "\\") {
      if (i + 1 < raw.length) {
        const next = raw[++i]!;
        if (next !== "\n") {
          text += next;
          active += "\0";
        }
      } else {
        text += c;
        active += "\0";
      }
      continue;
    }
    if (expand && (c === "*" || c === "?")) {
      flush();
      pieces.push(ANY);
      active += "\0";
      glob = true;
      continue;
    }
    if (expand && c === "[") {
      const close = raw.indexOf("]", i + (raw[i + 1] === "!" || raw[i + 1] === "^" ? 3 : 2));
      if (close !== -1) {
        flush();
        pieces.push(ANY);
        active += "\0".repeat(close - i + 1);
        glob = true;
        i = close;
        continue;
      }
    }
    text += c;
    active += c;
  }
  flush();
  return { pieces, active, glob };
}

/**
 * Programs whose purpose is to run other programs, in ways the wrapper table does not unwrap
 * (debuggers, tracers, namespace and limit tools, job runners). Under an exec gate each program
 * they start is decided at its exec; without one (a server) they make the command opaque.
 */
const RUNNERS = new Set([
  "setpriv",
  "prlimit",
  "unshare",
  "nsenter",
  "strace",
  "ltrace",
  "gdb",
  "lldb",
  "valgrind",
  "perf",
  "capsh",
  "sg",
  "newgrp",
  "firejail",
  "bwrap",
  "systemd-run",
  "systemd-nspawn",
  "machinectl",
  "at",
  "batch",
  "tmux",
  "screen",
  "expect",
  "parallel",
  "xvfb-run",
  "dbus-run-session",
  "fakeroot",
  "proot",
  "catchsegv",
  "sshpass",
  "socat",
]);

function clip(text: string, max = 80): string {
  const one = text.replace(/\s+/g, " ");
  return one.length > max ? one.slice(0, max - 1) + "…" : one;
}

/** History expansion (`!!`, `!-2`, `!$`…) in a line typed into an interactive shell. */
export function hasHistoryExpansion(line: string): boolean {
  let double = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "\\") {
      i++;
      continue;
    }
    if (c === "'" && !double) {
      const ansi = line[i - 1] === "$";
      for (i++; i < line.length && line[i] !== "'"; i++) if (ansi && line[i] === "\\") i++;
      continue;
    }
    if (c === '"') {
      double = !double;
      continue;
    }
    if (c !== "!") continue;
    const next = line[i + 1];
    if (next === undefined || " \t\n\r=(".includes(next)) continue;
    if (double && next === '"') continue;
    const before = line[i - 1];
    if (before === "$" || before === "[" || (before === "{" && line[i - 2] === "$")) continue;
    return true;
  }
  return false;
}

/** Checks environment variables the engine sets for the command (`exec_run`'s `env`). */
export function analyzeEnv(a: Analysis, env: Readonly<Record<string, string>>): void {
  for (const name of Object.keys(env)) {
    if (CODE_VARIABLES.has(name)) {
      const reason = `setting "${name}" makes the shell run its value later`;
      if (!a.opaque.includes(reason)) a.opaque.push(reason);
    }
  }
}

/** Everything a shell command line would run. */
export function analyzeLine(line: string): Analysis {
  const a = new Analyzer();
  if (utf8Length(line) > POLICY_LIMITS.commandBytes) {
    a.flag(`the command is longer than ${POLICY_LIMITS.commandBytes} bytes`);
    return a;
  }
  if (hasHistoryExpansion(line)) {
    a.flag(`"!" in the line triggers history expansion, which can re-run earlier commands`);
  }
  try {
    a.script(line, 0, TTY);
  } catch (err) {
    a.flag(`cannot analyse the command: ${err instanceof Error ? err.message : String(err)}`);
  }
  return a;
}

/** Everything an exact argv would run. */
export function analyzeArgv(argv: readonly string[]): Analysis {
  const a = new Analyzer();
  let bytes = 0;
  for (const w of argv) bytes += utf8Length(w) + 1;
  if (argv.length === 0) {
    a.flag("the command is empty");
  } else if (bytes > POLICY_LIMITS.commandBytes) {
    a.flag(`the command is longer than ${POLICY_LIMITS.commandBytes} bytes`);
  } else {
    try {
      a.argv(argv);
    } catch (err) {
      a.flag(`cannot analyse the command: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return a;
}

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
