/**
 * The linear-time regex engine (src/shared/regex.ts) against native RegExp:
 *   (a) MB/s scanning a 256 KiB job-output window (the exec_wait scan size) for typical patterns,
 *       the match placed at the very end so both engines read the whole text;
 *   (b) `^(a+)+b$` on "a" × n: native backtracking doubles per character, ours stays linear.
 * Run: deno run --allow-read --allow-env bench/regex_bench.ts (BENCH_QUICK=1 for a short run).
 * Prints plain lines; no thresholds fail here.
 */
import { compileRegex, type LinearRegex } from "../src/shared/regex.ts";
import { seededRandom } from "../src/shared/prng.ts";

const QUICK = Deno.env.get("BENCH_QUICK") === "1";
const WINDOW = 256 * 1024;
const encoder = new TextEncoder();
const out = (line: string): void => {
  Deno.stdout.writeSync(encoder.encode(line + "\n"));
};

/** Plausible build/test output: words, paths, numbers, timings; no pattern matches in it. */
function jobOutput(bytes: number): string {
  const rnd = seededRandom(7);
  const words = ["compiling", "module", "src/lib", "test", "ok", "passed", "warning:", "unused"];
  const lines: string[] = [];
  let size = 0;
  while (size < bytes) {
    const n = 3 + Math.floor(rnd() * 8);
    const parts: string[] = [];
    for (let i = 0; i < n; i++) {
      const w = words[Math.floor(rnd() * words.length)]!;
      parts.push(rnd() < 0.2 ? `${w}_${Math.floor(rnd() * 1000)}` : w);
    }
    parts.push(`(${(rnd() * 100).toFixed(2)} ms)`);
    const line = parts.join(" ");
    lines.push(line);
    size += line.length + 1;
  }
  return lines.join("\n").slice(0, bytes);
}

interface Case {
  name: string;
  source: string;
  flags: string;
  /** Appended to the window so there is exactly one match, at the end. */
  tail: string;
}

const CASES: Case[] = [
  { name: "literal", source: "error", flags: "", tail: "\nerror" },
  {
    name: "alternation",
    source: "ready|listening on port \\d+",
    flags: "",
    tail: "\nlistening on port 8080",
  },
  { name: "prompt (m)", source: "^\\$ $", flags: "m", tail: "\n$ " },
  { name: "required literal", source: "\\d+ failed", flags: "", tail: "\n3 failed" },
  { name: "case-insensitive", source: "fatal|panic", flags: "i", tail: "\nPANIC" },
  { name: "class start", source: "[A-Z][a-z]+Error: \\w+", flags: "", tail: "\nTypeError: x" },
  { name: "no prefilter", source: "(?:\\w+\\.)+\\w+:\\d+", flags: "", tail: "\nmain.rs:12" },
];

function timeIt(fn: () => unknown, minMs: number): number {
  fn(); // warm up
  let runs = 0;
  const start = performance.now();
  let now = start;
  while (now - start < minMs || runs < 3) {
    fn();
    runs++;
    now = performance.now();
  }
  return (now - start) / runs;
}

function mbps(chars: number, ms: number): string {
  return `${(chars / 1e6 / (ms / 1000)).toFixed(1)} MB/s`.padStart(12);
}

const base = jobOutput(WINDOW);
out(`(a) scanning a ${WINDOW / 1024} KiB window, match at the end`);
out(
  `${"case".padEnd(18)} ${"pattern".padEnd(28)} ${"linear".padStart(12)} ${"native".padStart(12)}`,
);
for (const c of CASES) {
  const text = base.slice(0, WINDOW - c.tail.length) + c.tail;
  const ours: LinearRegex = compileRegex(c.source, { flags: c.flags });
  const native = new RegExp(c.source, c.flags + "g");
  const mine = ours.exec(text, 0);
  native.lastIndex = 0;
  const theirs = native.exec(text);
  if (mine?.index !== theirs?.index || mine?.match !== theirs?.[0]) {
    throw new Error(`Engines disagree on ${c.source}: ${mine?.index} vs ${theirs?.index}`);
  }
  const minMs = QUICK ? 100 : 500;
  const oursMs = timeIt(() => ours.exec(text, 0), minMs);
  const nativeMs = timeIt(() => {
    native.lastIndex = 0;
    return native.exec(text);
  }, minMs);
  const shown = JSON.stringify(c.source) + (c.flags ? ` /${c.flags}` : "");
  out(
    `${c.name.padEnd(18)} ${shown.padEnd(28)} ${mbps(text.length, oursMs)} ${
      mbps(text.length, nativeMs)
    }`,
  );
}

out("");
out('(b) ^(a+)+b$ on "a" × n (no match): ms per exec');
const catastrophic = compileRegex("^(a+)+b$");
const nativeCat = /^(a+)+b$/;
for (const n of QUICK ? [16, 20, 22] : [16, 20, 22, 24, 25, 26]) {
  const text = "a".repeat(n);
  const oursMs = timeIt(() => catastrophic.exec(text), 20);
  const t = performance.now();
  nativeCat.exec(text);
  const nativeMs = performance.now() - t;
  out(
    `n=${String(n).padEnd(7)} linear ${oursMs.toFixed(4).padStart(10)} ms   native ${
      nativeMs.toFixed(1).padStart(8)
    } ms`,
  );
}
for (const n of [10_000, 100_000, WINDOW]) {
  const text = "a".repeat(n);
  const oursMs = timeIt(() => catastrophic.exec(text), 20);
  out(`n=${String(n).padEnd(7)} linear ${oursMs.toFixed(4).padStart(10)} ms   native (not run)`);
}
