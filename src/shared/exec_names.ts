/**
 * The two pieces of the exec-time check that run on every `execve` and need nothing compiled:
 * the names a program goes by, and whether a rule's literal start can fit a program's words. Kept
 * apart (and low: src/sandbox may not import src/policy) so that the exec gate's own thread
 * (src/sandbox/gate_thread.ts) can run the common case without loading the policy engine.
 */
import { basename } from "node:path";

/**
 * Every name a program goes by at its exec: its path's basename, argv[0]'s, and the names rules
 * give files with its content (`idx`: SHA-256 → program names, see identityIndex).
 */
export function execNames(
  idx: ReadonlyMap<string, ReadonlySet<string>>,
  path: string,
  argv0: string | undefined,
  sha?: string,
): string[] {
  const names = new Set<string>();
  if (path !== "") names.add(basename(path));
  if (argv0) names.add(basename(argv0));
  if (sha) { for (const n of idx.get(sha) ?? []) names.add(n); }
  // No name at all (fexecve of a memfd with an empty argv): still one subject, the empty name, so
  // that rules that start with a glob (`*`, `*sudo*`) see it.
  if (names.size === 0) names.add("");
  return [...names];
}

/** `[name, ...args].join(" ").startsWith(prefix)`, without joining. */
export function wordsStartWith(name: string, args: readonly string[], prefix: string): boolean {
  let at = 0;
  for (let w = 0; at < prefix.length; w++) {
    if (w > 0) {
      if (w > args.length || prefix.charCodeAt(at) !== 0x20) return false;
      at++;
    }
    const word = w === 0 ? name : args[w - 1]!;
    const n = Math.min(word.length, prefix.length - at);
    for (let i = 0; i < n; i++) {
      if (word.charCodeAt(i) !== prefix.charCodeAt(at + i)) return false;
    }
    at += n;
    // A shorter word ends here: the prefix must go on with the next word's space.
    if (n < word.length) return true;
  }
  return true;
}
