/**
 * Landlock restricts the calling thread for good, so every case runs in a child process
 * (tests/_fixtures/landlock_child.ts) that applies it, tries operations and reports what happened.
 */
import assert from "node:assert/strict";
import { landlockAbi, MAX_LANDLOCK_RULES } from "./landlock.ts";
import type { Op, Outcome, Spec } from "../../tests/_fixtures/landlock_child.ts";

const ABI = landlockAbi(); // also opens libc once, outside any test (the sanitizers see no leak)
const CHILD = new URL("../../tests/_fixtures/landlock_child.ts", import.meta.url).pathname;

interface Report {
  result?: { abi: number; hidden: string[]; scopes: string[]; fsRights: string[] };
  error?: { name: string; message: string; step?: string; errno?: number };
  ops: Outcome[];
}

async function inChild(spec: Spec): Promise<Report> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", "--no-config", CHILD, JSON.stringify(spec)],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `child failed: ${stderr}`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** Runs `ops` under `spec` and returns their outcomes keyed by the given labels. */
async function outcomes(
  spec: Omit<Spec, "ops">,
  ops: Record<string, Op>,
): Promise<{ report: Report; by: Record<string, Outcome> }> {
  const report = await inChild({ ...spec, ops: Object.values(ops) });
  const by = Object.fromEntries(Object.keys(ops).map((k, i) => [k, report.ops[i]!]));
  return { report, by };
}

const DENIED = { ok: false, code: "EACCES" } as const;
const OK = { ok: true } as const;

/** A temp tree: home/{.state/secret, .config/{app/token, other.conf}, notes.txt, project/, data/}. */
async function withTree(fn: (home: string) => Promise<void>): Promise<void> {
  const tmp = Deno.realPathSync(await Deno.makeTempDir({ prefix: "termada-landlock-" }));
  const home = `${tmp}/home`;
  try {
    for (const d of [".state", ".config/app", "project/in", "data"]) {
      await Deno.mkdir(`${home}/${d}`, { recursive: true });
    }
    await Deno.writeTextFile(`${home}/.state/secret`, "secret");
    await Deno.writeTextFile(`${home}/.config/app/token`, "token");
    await Deno.writeTextFile(`${home}/.config/other.conf`, "other");
    await Deno.writeTextFile(`${home}/notes.txt`, "notes");
    await Deno.writeTextFile(`${home}/project/in/file`, "file");
    await Deno.symlink(".state", `${home}/link`);
    await fn(home);
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

Deno.test("landlockAbi reports the kernel's Landlock ABI", () => {
  assert.ok(Number.isInteger(ABI) && ABI > 0, `ABI ${ABI}`);
});

Deno.test("applyLandlock hides the listed paths and leaves the rest usable", async () => {
  await withTree(async (home) => {
    const hide = [`${home}/.state`, `${home}/.config/app`];
    const { report, by } = await outcomes({ hide }, {
      readHidden: { op: "read", path: `${home}/.state/secret` },
      writeHidden: { op: "write", path: `${home}/.state/secret`, data: "x" },
      createHidden: { op: "create", path: `${home}/.state/new` },
      mkdirHidden: { op: "mkdir", path: `${home}/.state/sub` },
      readHidden2: { op: "read", path: `${home}/.config/app/token` },
      viaOldLink: { op: "read", path: `${home}/link/secret` },
      newLink: { op: "symlink", target: `${home}/.state/secret`, path: `${home}/project/ln` },
      viaNewLink: { op: "read", path: `${home}/project/ln` },
      hardLink: { op: "link", from: `${home}/.state/secret`, to: `${home}/project/hl` },
      catHidden: { op: "run", argv: ["/usr/bin/cat", `${home}/.state/secret`] },
      stealHidden: { op: "rename", from: `${home}/.state`, to: `${home}/project/stolen` },
      moveParent: { op: "rename", from: home, to: `${home}2` },
      createInHome: { op: "create", path: `${home}/new.txt` },
      readSibling: { op: "read", path: `${home}/notes.txt` },
      writeSibling: { op: "write", path: `${home}/notes.txt`, data: "changed" },
      readBack: { op: "read", path: `${home}/notes.txt` },
      readConfigSibling: { op: "read", path: `${home}/.config/other.conf` },
      mkdirInProject: { op: "mkdir", path: `${home}/project/x` },
      createInProject: { op: "create", path: `${home}/project/x/f` },
      moveAcrossSiblings: { op: "rename", from: `${home}/project/in/file`, to: `${home}/data/f` },
      listHome: { op: "list", path: home },
      listHiddenNames: { op: "list", path: `${home}/.state` },
      runTrue: { op: "run", argv: ["/usr/bin/true"] },
    });
    assert.equal(report.error, undefined);
    assert.deepEqual(report.result?.hidden, hide.toSorted());
    assert.equal(report.result?.abi, ABI);

    for (const k of ["readHidden", "writeHidden", "createHidden", "mkdirHidden", "readHidden2"]) {
      assert.deepEqual(by[k], DENIED, k);
    }
    assert.deepEqual(by.viaOldLink, DENIED);
    assert.deepEqual(by.newLink, OK); // creating the link is fine, following it is not
    assert.deepEqual(by.viaNewLink, DENIED);
    assert.equal(by.hardLink?.ok, false); // EXDEV: the hidden file's restrictions do not carry over
    assert.match((by.catHidden as { value: string }).value, /^exit 1: .*Permission denied/);
    assert.deepEqual(by.stealHidden, DENIED);
    assert.deepEqual(by.moveParent, DENIED);
    assert.deepEqual(by.createInHome, DENIED); // documented: chain directories are frozen

    assert.deepEqual(by.readSibling, { ok: true, value: "notes" });
    assert.deepEqual(by.writeSibling, OK);
    assert.deepEqual(by.readBack, { ok: true, value: "changed" });
    assert.deepEqual(by.readConfigSibling, { ok: true, value: "other" });
    assert.deepEqual(by.mkdirInProject, OK);
    assert.deepEqual(by.createInProject, OK);
    assert.deepEqual(by.moveAcrossSiblings, OK); // REFER between allowed trees
    assert.deepEqual(by.listHome, {
      ok: true,
      value: ".config,.state,data,link,notes.txt,project",
    });
    // Documented: READ_DIR on `/` is inherited, so names (only) inside hidden dirs are listable.
    assert.deepEqual(by.listHiddenNames, { ok: true, value: "secret" });
    assert.deepEqual(by.runTrue, { ok: true, value: "exit 0: " });

    // Seen from outside the domain: nothing hidden was touched.
    assert.equal(await Deno.readTextFile(`${home}/.state/secret`), "secret");
    assert.deepEqual([...Deno.readDirSync(`${home}/.state`)].map((e) => e.name), ["secret"]);
    assert.equal(await Deno.readTextFile(`${home}/data/f`), "file");
  });
});

Deno.test("applyLandlock with listAncestors false hides names too", async () => {
  await withTree(async (home) => {
    const { report, by } = await outcomes({ hide: [`${home}/.state`], listAncestors: false }, {
      listHidden: { op: "list", path: `${home}/.state` },
      listHome: { op: "list", path: home },
      listRoot: { op: "list", path: "/" },
      listProject: { op: "list", path: `${home}/project` },
      readSibling: { op: "read", path: `${home}/notes.txt` },
    });
    assert.equal(report.error, undefined);
    assert.deepEqual(by.listHidden, DENIED);
    assert.deepEqual(by.listHome, DENIED);
    assert.deepEqual(by.listRoot, DENIED);
    assert.deepEqual(by.listProject, { ok: true, value: "in" });
    assert.deepEqual(by.readSibling, { ok: true, value: "notes" });
  });
});

Deno.test("applyLandlock keeps hidden paths that do not exist yet from being created", async () => {
  await withTree(async (home) => {
    await Deno.symlink("project/future", `${home}/.dangling`); // a link to a missing target
    await Deno.symlink(".config", `${home}/cfg`);
    const hide = [`${home}/.later/deep/x`, `${home}/.soon`, `${home}/.dangling`, `${home}/cfg/app`];
    const { report, by } = await outcomes({ hide }, {
      mkdirLater: { op: "mkdir", path: `${home}/.later` },
      createSoon: { op: "create", path: `${home}/.soon` },
      symlinkSoon: { op: "symlink", target: "project", path: `${home}/.soon` },
      renameIntoSoon: { op: "rename", from: `${home}/project/in`, to: `${home}/.soon` },
      createTarget: { op: "mkdir", path: `${home}/project/future` },
      viaDangling: { op: "write", path: `${home}/.dangling`, data: "x" },
      readThroughLink: { op: "read", path: `${home}/cfg/app/token` },
      readInProject: { op: "read", path: `${home}/project/in/file` },
    });
    assert.equal(report.error, undefined);
    // What is hidden is the real location: the first missing entry, the symlinks' targets.
    assert.deepEqual(report.result?.hidden, [
      `${home}/.config/app`,
      `${home}/.later`,
      `${home}/.soon`,
      `${home}/project/future`,
    ]);
    for (const k of ["mkdirLater", "createSoon", "symlinkSoon", "renameIntoSoon", "createTarget"]) {
      assert.deepEqual(by[k], DENIED, k);
    }
    assert.deepEqual(by.viaDangling, DENIED);
    assert.deepEqual(by.readThroughLink, DENIED);
    assert.deepEqual(by.readInProject, { ok: true, value: "file" });
    for (const p of [".later", ".soon", "project/future"]) {
      assert.equal(await Deno.lstat(`${home}/${p}`).catch(() => null), null, p);
    }
  });
});

Deno.test({
  name: "applyLandlock scopes signals to the domain from ABI 6",
  ignore: ABI < 6,
  fn: async () => {
    const scoped = await outcomes({ hide: [] }, {
      killParent: { op: "killParent" },
      killChild: { op: "killChild" },
    });
    assert.deepEqual(scoped.report.result?.scopes, ["abstract_unix", "signal"]);
    assert.deepEqual(scoped.by.killParent, { ok: false, code: "EPERM" });
    assert.deepEqual(scoped.by.killChild, OK);

    const abi5 = await outcomes({ hide: [], abi: 5 }, { killParent: { op: "killParent" } });
    assert.deepEqual(abi5.report.result?.scopes, []);
    assert.deepEqual(abi5.by.killParent, OK);
  },
});

Deno.test("applyLandlock degrades to older ABIs", async (t) => {
  for (const abi of [1, 2]) {
    await t.step(`ABI ${abi}`, async () => {
      await withTree(async (home) => {
        const { report, by } = await outcomes({ hide: [`${home}/.state`], abi }, {
          readHidden: { op: "read", path: `${home}/.state/secret` },
          readSibling: { op: "read", path: `${home}/notes.txt` },
          moveAcrossSiblings: {
            op: "rename",
            from: `${home}/project/in/file`,
            to: `${home}/data/f`,
          },
        });
        assert.equal(report.result?.abi, abi);
        assert.equal(report.result?.fsRights.length, abi === 1 ? 13 : 14);
        assert.equal(report.result?.fsRights.includes("refer"), abi >= 2);
        assert.deepEqual(by.readHidden, DENIED);
        assert.deepEqual(by.readSibling, { ok: true, value: "notes" });
        // ABI 1 cannot grant REFER: every cross-directory rename is refused.
        assert.deepEqual(by.moveAcrossSiblings, abi === 1 ? { ok: false, code: "EXDEV" } : OK);
      });
    });
  }
});

Deno.test("applyLandlock fails before restricting anything", async (t) => {
  await t.step("too many rules", async () => {
    const crowd = await Deno.makeTempDir({ prefix: "termada-landlock-" });
    try {
      // Directories, not files: creating files is ~1 ms each on some disk-backed /tmp.
      for (let i = 0; i <= MAX_LANDLOCK_RULES; i++) Deno.mkdirSync(`${crowd}/${i}`);
      await Deno.writeTextFile(`${crowd}/hidden`, "hidden");
      const { report, by } = await outcomes({ hide: [`${crowd}/hidden`] }, {
        readHidden: { op: "read", path: `${crowd}/hidden` },
      });
      assert.equal(report.result, undefined);
      assert.equal(report.error?.name, "LandlockError");
      assert.equal(report.error?.step, "rules");
      assert.deepEqual(by.readHidden, { ok: true, value: "hidden" }); // nothing was restricted
    } finally {
      await Deno.remove(crowd, { recursive: true });
    }
  });
  await t.step("a relative path", async () => {
    const { report } = await outcomes({ hide: ["relative/path"] }, {});
    assert.equal(report.error?.name, "TypeError");
  });
});
