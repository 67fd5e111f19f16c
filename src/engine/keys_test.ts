import assert from "node:assert/strict";
import { TermadaError } from "../shared/mod.ts";
import { encodeKeys, type KeyInput, MAX_KEYS, MAX_KEYS_BYTES, pasteText } from "./keys.ts";

const dec = new TextDecoder();
const keys = (k: KeyInput[], modes = {}) => dec.decode(encodeKeys(k, modes));
const invalid = (key?: string) => (err: unknown) =>
  err instanceof TermadaError && err.code === "INVALID_ARGUMENT" &&
  (key === undefined || (err.details?.key === key && err.message.includes(`"${key}"`)));

// Expected bytes: xterm's defaults as documented in ctlseqs ("PC-Style Function Keys",
// "Special Keyboard Keys"), which are also what xterm.js sends.
Deno.test("keys encode the plain named keys as xterm sends them", () => {
  const table: [string, string][] = [
    ["Enter", "\r"],
    ["Escape", "\x1b"],
    ["Esc", "\x1b"],
    ["Tab", "\t"],
    ["BTab", "\x1b[Z"],
    ["Space", " "],
    ["BSpace", "\x7f"],
    ["Up", "\x1b[A"],
    ["Down", "\x1b[B"],
    ["Right", "\x1b[C"],
    ["Left", "\x1b[D"],
    ["Home", "\x1b[H"],
    ["End", "\x1b[F"],
    ["Insert", "\x1b[2~"],
    ["IC", "\x1b[2~"],
    ["Delete", "\x1b[3~"],
    ["DC", "\x1b[3~"],
    ["PageUp", "\x1b[5~"],
    ["PgUp", "\x1b[5~"],
    ["PPage", "\x1b[5~"],
    ["PageDown", "\x1b[6~"],
    ["PgDn", "\x1b[6~"],
    ["NPage", "\x1b[6~"],
    ["F1", "\x1bOP"],
    ["F2", "\x1bOQ"],
    ["F3", "\x1bOR"],
    ["F4", "\x1bOS"],
    ["F5", "\x1b[15~"],
    ["F6", "\x1b[17~"],
    ["F7", "\x1b[18~"],
    ["F8", "\x1b[19~"],
    ["F9", "\x1b[20~"],
    ["F10", "\x1b[21~"],
    ["F11", "\x1b[23~"],
    ["F12", "\x1b[24~"],
  ];
  for (const [name, bytes] of table) assert.equal(keys([name]), bytes, name);
  // tmux matches names case-insensitively.
  assert.equal(keys(["enter", "ESCAPE", "pageup", "f12"]), "\r\x1b\x1b[5~\x1b[24~");
});

Deno.test("keys follow application cursor mode (DECCKM) for unmodified cursor keys", () => {
  const app = { applicationCursor: true };
  assert.equal(keys(["Up", "Down", "Right", "Left"], app), "\x1bOA\x1bOB\x1bOC\x1bOD");
  assert.equal(keys(["Home", "End"], app), "\x1bOH\x1bOF");
  // Keys outside the cursor group, and modified cursor keys, do not change.
  assert.equal(keys(["PageUp", "Delete", "F1", "F5"], app), "\x1b[5~\x1b[3~\x1bOP\x1b[15~");
  assert.equal(keys(["C-Up", "S-Home"], app), "\x1b[1;5A\x1b[1;2H");
});

Deno.test("keys with modifiers carry xterm's modifier parameter", () => {
  const table: [string, string][] = [
    ["S-Up", "\x1b[1;2A"],
    ["M-Up", "\x1b[1;3A"],
    ["S-M-Up", "\x1b[1;4A"],
    ["C-Right", "\x1b[1;5C"],
    ["C-S-Left", "\x1b[1;6D"],
    ["C-M-Down", "\x1b[1;7B"],
    ["C-M-S-Up", "\x1b[1;8A"],
    ["S-Home", "\x1b[1;2H"],
    ["C-End", "\x1b[1;5F"],
    ["S-Delete", "\x1b[3;2~"],
    ["C-PageDown", "\x1b[6;5~"],
    ["M-Insert", "\x1b[2;3~"],
    ["S-F1", "\x1b[1;2P"],
    ["C-F4", "\x1b[1;5S"],
    ["S-F5", "\x1b[15;2~"],
    ["C-F12", "\x1b[24;5~"],
    ["S-Tab", "\x1b[Z"],
  ];
  for (const [name, bytes] of table) assert.equal(keys([name]), bytes, name);
});

Deno.test("keys encode control and meta characters", () => {
  assert.equal(keys(["C-a", "C-c", "C-d", "C-z"]), "\x01\x03\x04\x1a");
  assert.equal(keys(["C-A", "C-Z"]), "\x01\x1a"); // Ctrl+Shift+letter is the same in xterm
  for (let c = 0; c < 26; c++) {
    const letter = String.fromCharCode(0x61 + c);
    assert.deepEqual(encodeKeys([`C-${letter}`]), Uint8Array.of(c + 1), letter);
  }
  const table: [string, number][] = [
    ["C-@", 0x00],
    ["C-Space", 0x00],
    ["C-[", 0x1b],
    ["C-\\", 0x1c],
    ["C-]", 0x1d],
    ["C-^", 0x1e],
    ["C-_", 0x1f],
    ["C-?", 0x7f],
    ["C-BSpace", 0x08],
  ];
  for (const [name, byte] of table) assert.deepEqual(encodeKeys([name]), Uint8Array.of(byte), name);
  assert.equal(keys(["M-x", "M-X", "M-.", "M-é"]), "\x1bx\x1bX\x1b.\x1bé");
  assert.equal(keys(["C-M-x", "M-C-x"]), "\x1b\x18\x1b\x18");
  assert.equal(
    keys(["M-Enter", "M-BSpace", "M-Escape", "M-Space", "M-Tab"]),
    "\x1b\r\x1b\x7f\x1b\x1b\x1b \x1b\t",
  );
  assert.equal(keys(["C-M-Space"]), "\x1b\x00");
});

Deno.test("keys send any other string as literal UTF-8 text", () => {
  assert.equal(keys(["i", "hello wörld", "Escape", ":wq", "Enter"]), "ihello wörld\x1b:wq\r");
  assert.deepEqual(encodeKeys(["日本"]), new TextEncoder().encode("日本"));
  // Lower-case prefixes and bare prefixes are text, as are words containing a key name.
  assert.equal(keys(["c-style", "M-", "C-", "Enterprise", "x-y"]), "c-styleM-C-Enterprisex-y");
  // {text} types even a key name literally.
  assert.equal(keys([{ text: "Enter" }, { text: "C-c" }]), "EnterC-c");
  assert.equal(keys([]), "");
});

Deno.test("keys refuse a modifier combination a terminal cannot send, naming it", () => {
  for (const k of ["C-1", "C-Enter", "C-Tab", "S-Enter", "S-a", "C-Escape", "C-foo", "S-Space"]) {
    assert.throws(() => encodeKeys(["a", k]), invalid(k), k);
  }
  assert.throws(() => encodeKeys(["C-C-a"]), invalid("C-C-a"));
  assert.throws(() => encodeKeys([""]), invalid(""));
  assert.throws(() => encodeKeys(["C-Enter"]), (e: unknown) => {
    assert.ok(e instanceof TermadaError);
    assert.match(e.message, /^Unknown key "C-Enter" \(keys\[0\]\): a terminal sends the same/);
    assert.match(e.hint ?? "", /"Enter"/);
    return true;
  });
  assert.throws(() => encodeKeys([42 as unknown as string]), TypeError);
});

Deno.test("keys are bounded in count and encoded size", () => {
  assert.equal(encodeKeys(Array(MAX_KEYS).fill("a")).length, MAX_KEYS);
  assert.throws(() => encodeKeys(Array(MAX_KEYS + 1).fill("a")), invalid());
  assert.equal(encodeKeys(["x".repeat(MAX_KEYS_BYTES)]).length, MAX_KEYS_BYTES);
  assert.throws(() => encodeKeys(["x".repeat(MAX_KEYS_BYTES), "a"]), invalid());
  // Multibyte text counts in bytes, not characters.
  assert.throws(() => encodeKeys(["é".repeat(MAX_KEYS_BYTES / 2 + 1)]), invalid());
  assert.throws(() => encodeKeys(["x".repeat(10_000_000)]), invalid());
});

Deno.test("pasted text is bracketed only when the program asked for it", async (t) => {
  await t.step("plain: line ends become CR", () => {
    assert.equal(pasteText("a\nb\r\nc\rd", false), "a\rb\rc\rd");
    assert.equal(keys([{ paste: "x\ny" }]), "x\ry");
  });
  await t.step("bracketed (DEC mode 2004)", () => {
    assert.equal(pasteText("a\nb", true), "\x1b[200~a\rb\x1b[201~");
    assert.equal(keys([{ paste: "ls\n" }], { bracketedPaste: true }), "\x1b[200~ls\r\x1b[201~");
  });
  await t.step("markers inside the text cannot end the paste", () => {
    assert.equal(pasteText("a\x1b[201~rm -rf ~\n", true), "\x1b[200~arm -rf ~\r\x1b[201~");
    assert.equal(pasteText("\x1b[20\x1b[201~1~x", true), "\x1b[200~x\x1b[201~");
    assert.equal(pasteText("\x1b[200~x", false), "x");
  });
});

/** Runs tmux; resolves with its exit status and stdout. */
async function tmux(sock: string, ...args: string[]): Promise<{ code: number; stdout: string }> {
  const out = await new Deno.Command("tmux", {
    args: ["-S", sock, "-f", "/dev/null", ...args],
    stderr: "null",
    env: { TERM: "xterm-256color" },
  }).output();
  return { code: out.code, stdout: dec.decode(out.stdout).trim() };
}

async function hasTmux(): Promise<boolean> {
  try {
    return (await new Deno.Command("tmux", { args: ["-V"], stdout: "null", stderr: "null" })
      .output()).success;
  } catch {
    return false; // not installed: the cross-check is skipped
  }
}

Deno.test({
  name: "keys match what tmux send-keys writes to a raw-mode program",
  ignore: !(await hasTmux()),
  fn: async (t) => {
    // Names tmux 3.3 knows, with the same bytes (it differs only for Home/End, which it sends as
    // vt220 `CSI 1 ~`/`CSI 4 ~`: we follow xterm and its terminfo, khome=\EOH kend=\EOF).
    const names = [
      ..."Enter Escape Tab BTab Space BSpace Up Down Left Right IC DC Insert Delete".split(" "),
      ..."PPage NPage PageUp PageDown PgUp PgDn".split(" "),
      ...Array.from({ length: 12 }, (_, i) => `F${i + 1}`),
      ..."C-a C-z C-@ C-Space C-[ C-\\ C-] C-^ C-_ C-? M-x C-M-x M-Enter M-BSpace".split(" "),
      ..."S-Up C-Right M-Up C-S-Left C-M-Down S-F1 C-F4 C-F5 S-F12 S-Delete C-PageDown".split(" "),
      "x",
      ":wq",
    ];
    const dir = await Deno.makeTempDir({ prefix: "termada-keys-" });
    const sock = `${dir}/sock`;
    try {
      for (const app of [false, true]) {
        await t.step(app ? "application cursor mode" : "normal cursor mode", async () => {
          const out = `${dir}/out-${app}`;
          const setup = app ? "printf '\\033[?1h'; " : "";
          const prog = `stty raw -echo; ${setup}exec cat > ${out}`;
          assert.equal((await tmux(sock, "new-session", "-d", "-s", `k${app}`, prog)).code, 0);
          const deadline = Date.now() + 10_000;
          const read = async () => await Deno.readFile(out).catch(() => null);
          while (await read() === null) {
            assert.ok(Date.now() < deadline, "the pane program did not start");
            await new Promise((r) => setTimeout(r, 20));
          }
          // tmux has parsed the DECCKM switch (printed before cat started).
          const flag = async () =>
            (await tmux(sock, "display-message", "-p", "-t", `k${app}`, "#{keypad_cursor_flag}"))
              .stdout;
          while (await flag() !== (app ? "1" : "0")) {
            assert.ok(Date.now() < deadline, "tmux did not see the cursor mode");
            await new Promise((r) => setTimeout(r, 20));
          }
          const args = names.flatMap((n) => [n, "|"]);
          assert.equal((await tmux(sock, "send-keys", "-t", `k${app}`, ...args)).code, 0);
          let got: Uint8Array | null = null;
          for (;;) {
            got = await read();
            if (got && got.filter((b) => b === 0x7c).length === names.length) break;
            assert.ok(Date.now() < deadline, "tmux did not deliver every key");
            await new Promise((r) => setTimeout(r, 20));
          }
          const theirs = dec.decode(got!).split("|").slice(0, -1);
          const ours = names.map((n) => keys([n], { applicationCursor: app }));
          for (let i = 0; i < names.length; i++) {
            assert.equal(JSON.stringify(ours[i]), JSON.stringify(theirs[i]), names[i]);
          }
        });
      }
    } finally {
      await tmux(sock, "kill-server");
      await Deno.remove(dir, { recursive: true });
    }
  },
});
