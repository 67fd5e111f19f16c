/**
 * What the operator commands share: strict argument parsing whose errors are one-line
 * INVALID_ARGUMENTs naming the culprit (exit 2), and plain left-aligned tables.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { TermadaError } from "../shared/mod.ts";

export type Options = NonNullable<ParseArgsConfig["options"]>;

/** What strict parsing of `O` gives: typed `values` and the `positionals`. */
export type Parsed<O extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; allowPositionals: true; strict: true }>
>;

/**
 * `parseArgs` (strict) for `termada <command>`: an unknown option, a missing or unexpected value
 * and more than `positionals` arguments are errors that name the option and point at --help.
 */
export function strictArgs<O extends Options>(
  command: string,
  args: string[],
  options: O,
  positionals: number,
): Parsed<O> {
  let parsed: Parsed<O>;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    const what = /'([^' ]+)/.exec((err as Error).message)?.[1] ?? "";
    const see = `(termada ${command} --help)`;
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      throw new TermadaError("INVALID_ARGUMENT", `Unknown option "${what}" ${see}`);
    }
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      const message = (err as Error).message;
      throw new TermadaError(
        "INVALID_ARGUMENT",
        /does not take an argument/.test(message)
          ? `Option "${what}" takes no value ${see}`
          : `Option "${what}" needs a value ${see}`,
      );
    }
    throw err;
  }
  const help = (parsed.values as { help?: boolean }).help;
  if (!help && parsed.positionals.length > positionals) {
    throw new TermadaError(
      "INVALID_ARGUMENT",
      `Unexpected argument "${parsed.positionals[positionals]}" (termada ${command} --help)`,
    );
  }
  return parsed;
}

/** Left-aligned columns, two spaces apart (the last one unpadded). */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ")
      .trimEnd() + "\n";
  return line(head) + rows.map(line).join("");
}

/**
 * The subcommand of `termada <group> [<sub>] …`: `fallback` when the first word is an option or
 * absent; undefined for `help` (the caller prints the group's overview). An unknown one is
 * INVALID_ARGUMENT naming the choices.
 */
export function subcommand<S extends string>(
  group: string,
  args: string[],
  known: Record<S, unknown>,
  fallback: S,
): { sub: S; rest: string[]; explicit: boolean } | undefined {
  const first = args[0];
  if (first === "help") return undefined;
  const explicit = first !== undefined && !first.startsWith("-");
  const sub = explicit ? first : fallback;
  if (!Object.hasOwn(known, sub)) {
    throw new TermadaError("INVALID_ARGUMENT", `Unknown ${group} command "${sub}"`, {
      hint: `termada ${group} ${Object.keys(known).join(" | ")} (--help for each)`,
    });
  }
  return { sub: sub as S, rest: explicit ? args.slice(1) : args, explicit };
}
