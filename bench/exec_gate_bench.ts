/**
 * (j) The exec gate: exec-heavy work with the gate on and off, and the gate's decision time per
 * execve (notification received → answer ready to send) for cached programs.
 *
 * Standalone: `deno run -P=bench --no-prompt bench/exec_gate_bench.ts` (BENCH_QUICK=1 for a
 * short run; EXEC_GATE_ONLY_DECISION=1 skips the gate-off side and the C build).
 */
import { policyPort } from "../src/daemon/mod.ts";
import { Config } from "../src/config/mod.ts";
import { loadShellParser } from "../src/policy/mod.ts";
import { testRuntime } from "../src/control/_test_util.ts";
import { preloadNative } from "../src/pty/mod.ts";
import { runAsForDaemon } from "../src/sandbox/mod.ts";

function pct(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}
const ms = (n: number) => `${n.toFixed(3)} ms`;

export async function execGateBench(
  opts: {
    quick: boolean;
    out: (line: string) => void;
    env: Record<string, string>;
    /** Hidden from sessions (the control plane's stand-in). */
    hide: string[];
    /** Only the gated runtime and the exec loops (no C build, no gate-off side). */
    decisionOnly?: boolean;
  },
): Promise<void> {
  const { quick, out, env, hide } = opts;
  // A policy with a deny rule, so every exec is really decided (name, argv, content identity).
  await loadShellParser();
  const config = Config.parse({ policies: { default: { deny: ["touch *"] } } });
  const gated = await testRuntime({
    // As the daemon wires it: with the gate on, a program file is decided at its exec.
    policy: policyPort(config, { PATH: env.PATH, execGate: () => true }),
    engine: { env, record: false, sandbox: { mode: "auto", hide, gateThread: true } },
  });
  // The same gate answered on the daemon's thread (TERMADA_GATE_THREAD=off).
  const onMain = await testRuntime({
    policy: policyPort(config, { PATH: env.PATH, execGate: () => true }),
    engine: { env, record: false, sandbox: { mode: "auto", hide, gateThread: false } },
  });
  // The same static layer on both sides (so only the gate differs).
  const plain = await testRuntime({
    policy: policyPort(config, { PATH: env.PATH, execGate: () => true }),
    engine: { env, record: false, sandbox: { mode: "off", hide: [] } },
  });
  const loops = quick ? 500 : 2000;
  // A small C project built with make -j2 (cc, cc1, as, collect2, ld: execs doing real work).
  // Outside the hidden dirs: those are hidden from sessions.
  const build = await Deno.makeTempDir({ prefix: "termada-bench-build-" });
  const units = Array.from({ length: 8 }, (_, i) => `u${i}`);
  for (const u of units) {
    Deno.writeTextFileSync(`${build}/${u}.c`, `int ${u}(int x) { return x * ${u.length} + 1; }\n`);
  }
  Deno.writeTextFileSync(
    `${build}/main.c`,
    `${units.map((u) => `int ${u}(int);`).join(" ")}\nint main(void) { return ${
      units.map((u) => `${u}(0)`).join(" + ")
    } == 8 ? 0 : 1; }\n`,
  );
  Deno.writeTextFileSync(
    `${build}/Makefile`,
    `OBJS = main.o ${units.map((u) => `${u}.o`).join(" ")}\nprog: $(OBJS)\n\tcc -o prog $(OBJS)\n` +
      `%.o: %.c\n\tcc -O1 -c $< -o $@\nclean:\n\trm -f prog *.o\n`,
  );
  const haveCc = (() => {
    try {
      return Deno.statSync("/usr/bin/cc").isFile && Deno.statSync("/usr/bin/make").isFile;
    } catch {
      return false;
    }
  })();
  const work = [
    ...(haveCc && !opts.decisionOnly
      ? [
        [
          "make -j2 of 9 C files (cc + ld)",
          `make -s -C ${build} clean && make -s -j2 -C ${build}`,
        ] as const,
      ]
      : []),
    [`${loops} × /bin/true in a loop`, `for i in $(seq ${loops}); do /bin/true; done`],
    [
      `parallel build-like (xargs -P4, ${loops / 2} × /bin/echo)`,
      `seq ${loops / 2} | xargs -P 4 -n 1 /bin/echo > /dev/null`,
    ],
  ] as const;
  const reps = quick ? 3 : 5; // odd: a true median
  const sides = opts.decisionOnly
    ? [["on", gated]] as const
    : [["on", gated], ["main", onMain], ["off", plain]] as const;
  try {
    for (const [label, line] of work) {
      const times: Record<string, number[]> = { on: [], main: [], off: [] };
      // One untimed run per side first: the first exec of each program hashes its file for the
      // identity cache (cc1 is tens of MB) and the gate's code is not compiled yet. With two
      // timed runs the median would otherwise be that cold run.
      for (const [, rt] of sides) {
        await rt.engine.run("bench", { command: [line], timeout_ms: 300_000 });
      }
      // Interleaved, so a noisy machine hurts both sides alike.
      for (let r = 0; r < reps; r++) {
        for (const [k, rt] of sides) {
          const t0 = performance.now();
          const j = await rt.engine.run("bench", { command: [line], timeout_ms: 300_000 });
          times[k]!.push(performance.now() - t0);
          if (j.exit_code !== 0) throw new Error(`${label}: ${JSON.stringify(j).slice(0, 300)}`);
        }
      }
      const on = pct(times.on!, 50);
      if (opts.decisionOnly) {
        out(`(j) ${label}: gate on ${ms(on)} (median of ${reps})`);
        continue;
      }
      const off = pct(times.off!, 50);
      const main = pct(times.main!, 50);
      const plus = (x: number) => `${x >= off ? "+" : ""}${((x / off - 1) * 100).toFixed(1)} %`;
      out(
        `(j) ${label}: gate on ${ms(on)} (${plus(on)}; on the daemon's thread ${ms(main)}, ` +
          `${plus(main)}), off ${ms(off)} (median of ${reps} after a warm-up; target ≤ +15 %)`,
      );
    }
    if (!opts.decisionOnly) {
      await breakdown(gated, plain, { env, hide, reps, loops, out });
      await asOrdinaryUser(config, { env, reps, loops, out });
    }
    const st = gated.control.execGateStats();
    out(
      `    exec decision (notification received → answer ready to send: target memory, resolve, ` +
        `identity cache, policy): p50 ${st.p50Us} µs, p99 ${st.p99Us} µs over ${st.decisions} ` +
        `execs (target p50 ≤ 50 µs)`,
    );
    out(
      `    after-exec check (held until the new image is verified, the exec's own time included; ` +
        `${st.verified} execs could race, e.g. as root; ${st.traced} held with ptrace, the rest ` +
        `in the freezer): p50 ${st.verifyP50Us} µs, p99 ${st.verifyP99Us} µs`,
    );
  } finally {
    await gated[Symbol.asyncDispose]();
    await onMain[Symbol.asyncDispose]();
    await plain[Symbol.asyncDispose]();
    await Deno.remove(build, { recursive: true }).catch(() => {});
  }
}

type Runtime = Awaited<ReturnType<typeof testRuntime>>;

/**
 * The unprivileged case (what most installs are): sessions of an ordinary user, here `nobody`
 * through security.run_as (a root daemon is needed to become it). Such a user cannot swap the
 * system's programs, so their execs need no check after the exec; the deny rule still makes
 * every exec decided. Skipped, and said, when not root or without `nobody`.
 */
async function asOrdinaryUser(
  config: Config,
  o: { env: Record<string, string>; reps: number; loops: number; out: (l: string) => void },
): Promise<void> {
  let runAs;
  try {
    runAs = runAsForDaemon({ user: "nobody" });
  } catch (err) {
    o.out(`    as an ordinary user: not measured (${(err as Error).message})`);
    return;
  }
  // Sessions' scratch directories outside the state directory, which that user cannot enter.
  const sessionsDir = await Deno.makeTempDir({ prefix: "termada-bench-sessions-" });
  Deno.chmodSync(sessionsDir, 0o711);
  const mk = (mode: "auto" | "off") =>
    testRuntime({
      policy: policyPort(config, { PATH: o.env.PATH, execGate: () => true }),
      engine: {
        env: o.env,
        record: false,
        runAs,
        sessionsDir,
        defaultCwd: "/tmp",
        sandbox: { mode, hide: [], gateThread: true },
      },
    });
  const on = await mk("auto");
  const off = await mk("off");
  try {
    const times: Record<string, number[]> = { on: [], off: [] };
    const line = `for i in $(seq ${o.loops}); do /bin/true; done`;
    for (let r = 0; r < o.reps; r++) {
      for (const [k, rt] of [["on", on], ["off", off]] as const) {
        const t0 = performance.now();
        const j = await rt.engine.run("bench", { command: [line], timeout_ms: 300_000 });
        times[k]!.push(performance.now() - t0);
        if (j.exit_code !== 0) throw new Error(`as nobody: ${JSON.stringify(j).slice(0, 300)}`);
      }
    }
    const a = pct(times.on!, 50);
    const b = pct(times.off!, 50);
    const st = on.control.execGateStats();
    o.out(
      `(j) ${o.loops} × /bin/true as an ordinary user (run_as nobody): gate on ${ms(a)}, off ` +
        `${ms(b)} (median of ${o.reps}; +${((a / b - 1) * 100).toFixed(1)} %; target ≤ +15 %); ` +
        `decision p50 ${st.p50Us} µs, p99 ${st.p99Us} µs; ${st.verified} of ${st.decisions} ` +
        `checked after the exec`,
    );
  } finally {
    await on[Symbol.asyncDispose]();
    await off[Symbol.asyncDispose]();
    await Deno.remove(sessionsDir, { recursive: true }).catch(() => {});
  }
}

/**
 * Where the gate's cost per exec goes, on the /bin/true loop, interleaved: the boundary without
 * the gate (namespaces, cgroup, Landlock), the gate's notification round trip (a policy without
 * exec rules: answered before anything is read), and reading, deciding and checking after the
 * exec (the deny rule, as this user: as root every exec is checked).
 */
async function breakdown(
  gated: Runtime,
  plain: Runtime,
  o: {
    env: Record<string, string>;
    hide: string[];
    reps: number;
    loops: number;
    out: (l: string) => void;
  },
): Promise<void> {
  const mk = (config: Config, missing: string[]) =>
    testRuntime({
      policy: policyPort(config, { PATH: o.env.PATH, execGate: () => true }),
      engine: {
        env: o.env,
        record: false,
        sandbox: { mode: "auto", hide: o.hide, missing: missing as never },
      },
    });
  const noRules = await mk(Config.parse({}), []);
  const noGate = await mk(Config.parse({}), ["seccomp"]);
  try {
    const sides = { off: plain, noGate, noRules, gated } as const;
    const times: Record<string, number[]> = {};
    const line = `for i in $(seq ${o.loops}); do /bin/true; done`;
    for (let r = 0; r < o.reps; r++) {
      for (const [k, rt] of Object.entries(sides)) {
        const t0 = performance.now();
        const j = await rt.engine.run("bench", { command: [line], timeout_ms: 300_000 });
        (times[k] ??= []).push(performance.now() - t0);
        if (j.exit_code !== 0) throw new Error(`breakdown: ${JSON.stringify(j).slice(0, 300)}`);
      }
    }
    const us = (k: string) => (pct(times[k]!, 50) / o.loops) * 1000;
    const d = (a: string, b: string) => `+${(us(a) - us(b)).toFixed(0)} µs`;
    const rel = (k: string) => ((us(k) / us("off") - 1) * 100).toFixed(1);
    o.out(
      `(j) ${o.loops} × /bin/true with the default policy (no exec rules): +${rel("noRules")} % ` +
        `(the gate's round trip only: an exec is answered before anything of it is read; ` +
        `target ≤ +15 %)`,
    );
    o.out(
      `    per /bin/true: off ${us("off").toFixed(0)} µs; the boundary without the gate ` +
        `${d("noGate", "off")}; the gate's round trip ${d("noRules", "noGate")}; reading, ` +
        `deciding and the check after the exec (a deny rule, as root) ${d("gated", "noRules")} ` +
        `(median of ${o.reps}, interleaved)`,
    );
  } finally {
    await noRules[Symbol.asyncDispose]();
    await noGate[Symbol.asyncDispose]();
  }
}

if (import.meta.main) {
  preloadNative();
  const dir = await Deno.makeTempDir({ prefix: "termada-bench-" });
  try {
    await execGateBench({
      quick: Deno.env.get("BENCH_QUICK") === "1",
      decisionOnly: Deno.env.get("EXEC_GATE_ONLY_DECISION") === "1",
      out: (line) => Deno.stdout.writeSync(new TextEncoder().encode(line + "\n")),
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: dir, LANG: "C.UTF-8" },
      hide: [dir],
    });
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
