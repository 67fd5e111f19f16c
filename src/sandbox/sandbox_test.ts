import assert from "node:assert/strict";
import { preloadNative, procStat } from "../pty/mod.ts";
import { isSubreaper } from "./reaper.ts";
import { waitFor } from "./_test_util.ts";

preloadNative(); // libc stays loaded for the process, not for one test

Deno.test("reapOrphans reaps an adopted orphan that exited, and no child it does not own", async () => {
  // The test runner must not become a subreaper (it would collect zombies it never reaps),
  // so a child Deno process does it and reports back.
  assert.equal(isSubreaper(), false);
  const tmp = Deno.makeTempDirSync({ prefix: "termada_reap_" });
  const script = `${tmp}/child.ts`;
  const url = (p: string) => JSON.stringify(new URL(p, import.meta.url).href);
  Deno.writeTextFileSync(
    script,
    `import { becomeSubreaper } from ${url("./reaper.ts")};
    import { reapOrphans } from ${url("./sandbox.ts")};
    import { procStat } from ${url("../pty/mod.ts")};
    const sub = becomeSubreaper();
    // An orphan that is adopted, then exits: a zombie of ours nobody waits for.
    const b = new Deno.Command("bash", { args: ["-c",
      'setsid bash -c "echo \\\\$\\\\$ > ${tmp}/orphan; exec sleep 0.2" & exit 0'] }).spawn();
    await b.status;
    let orphan = 0;
    for (let i = 0; i < 500 && !orphan; i++) {
      try { orphan = Number(Deno.readTextFileSync(${
      JSON.stringify(`${tmp}/orphan`)
    })); } catch { /* not yet */ }
      if (!orphan) await new Promise((r) => setTimeout(r, 10));
    }
    let zombie = false;
    for (let i = 0; i < 500 && !zombie; i++) {
      zombie = procStat(orphan)?.state === "Z";
      if (!zombie) await new Promise((r) => setTimeout(r, 10));
    }
    const reaped = reapOrphans();
    const after = procStat(orphan) === undefined;
    console.log(JSON.stringify({ sub, orphan, zombie, reaped, after, again: reapOrphans() }));
    `,
  );
  let orphan = 0;
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "--no-config",
        "--allow-ffi",
        "--allow-read",
        "--allow-env",
        "--allow-run=bash",
        script,
      ],
      stdin: "null",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, err);
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    orphan = r.orphan;
    assert.equal(r.sub, true);
    assert.ok(orphan > 0);
    assert.equal(r.zombie, true, "the orphan became our zombie");
    assert.equal(r.reaped, 1);
    assert.equal(r.after, true, "reaped: its pid is gone");
    assert.equal(r.again, 0);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
  await waitFor(
    "the orphan to be gone",
    () => !procStat(orphan) || procStat(orphan)!.state === "Z",
  );
});
