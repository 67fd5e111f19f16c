import assert from "node:assert/strict";
import { VtCleaner } from "./vt_cleaner.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Everything a fresh cleaner hands out for the chunks, with the pending line after "|". */
function clean(chunks: Array<string | Uint8Array>, cleaner = new VtCleaner()): string {
  const out: Uint8Array[] = [];
  for (const c of chunks) out.push(cleaner.push(typeof c === "string" ? enc.encode(c) : c));
  return dec.decode(concat(out)) + "|" + dec.decode(cleaner.pending());
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

Deno.test("VtCleaner strips SGR colours and keeps the text", () => {
  assert.equal(clean(["\x1b[1;31mred\x1b[0m plain \x1b[38;5;208mo\x1b[m\n"]), "red plain o\n|");
  assert.equal(clean(["\x1b[38;2;10;20;30mrgb\x1b[39;49m\n"]), "rgb\n|");
});

Deno.test("VtCleaner removes cursor movement and private-mode CSI sequences", () => {
  assert.equal(
    clean([
      "\x1b[H\x1b[2J\x1b[10;20Hab\x1b[3A\x1b[2Bc\x1b[5C\x1b[D\x1b[?25l\x1b[?1049h\x1b[>4;1m\n",
    ]),
    "abc\n|",
  );
  assert.equal(clean(["\x1b[?2004lx\x1b[?2004h\n"]), "x\n|");
});

Deno.test("VtCleaner removes OSC strings ended by BEL or ST", () => {
  assert.equal(clean(["\x1b]0;my title\x07a\x1b]2;other\x1b\\b\n"]), "ab\n|");
  assert.equal(clean(["\x1b]8;;https://x.test/?a=b\x1b\\link\x1b]8;;\x1b\\\n"]), "link\n|");
});

Deno.test("VtCleaner removes DCS, SOS, PM and APC strings", async (t) => {
  for (const [name, intro] of [["DCS", "P"], ["SOS", "X"], ["PM", "^"], ["APC", "_"]] as const) {
    await t.step(name, () => {
      assert.equal(clean([`a\x1b${intro}1;2|payload \x07 more\x1b\\b\n`]), "ab\n|");
    });
  }
});

Deno.test("VtCleaner removes charset designations and two-byte escapes", () => {
  assert.equal(
    clean(["\x1b(Ba\x1b)0b\x1b#8c\x1b=\x1b>\x1b7\x1b8\x1bM\x1bD\x1bE\x1bcd\x1b%Ge\n"]),
    "abcde\n|",
  );
});

Deno.test("VtCleaner output does not depend on where sequences are split", async (t) => {
  const sample =
    "\x1b[1;32mgreen\x1b[0m\r\n\x1b]0;title\x07caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" +
    "\x1bP1$r0m\x1b\\\x1b(0\x1b)B\x1b#8x\r\x1b[Ky\b\bz\t\x1b]8;;u\x1b\\end\x1b[?25h\r\r\nlast";
  const bytes = Uint8Array.from(sample, (c) => c.charCodeAt(0));
  const whole = clean([bytes]);
  // "x\r\x1b[K" erases the whole "café € 😀x" line; y is overwritten by z after two backspaces.
  assert.equal(whole, "green\nz\tend\n|last");
  await t.step("one split at every byte position", () => {
    for (let i = 0; i <= bytes.length; i++) {
      assert.equal(clean([bytes.subarray(0, i), bytes.subarray(i)]), whole, `split at ${i}`);
    }
  });
  await t.step("two splits at every pair of positions", () => {
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const parts = [bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)];
        assert.equal(clean(parts), whole, `split at ${i} and ${j}`);
      }
    }
  });
  await t.step("byte by byte", () => {
    const parts = Array.from(bytes, (b) => Uint8Array.of(b));
    assert.equal(clean(parts), whole);
  });
});

Deno.test("VtCleaner collapses a progress bar drawn with CR", async (t) => {
  await t.step("same-width frames keep the last state", () => {
    assert.equal(clean(["[#   ] 25%\r[##  ] 50%\r", "[####] 100%\n"]), "[####] 100%\n|");
  });
  await t.step("a shorter frame keeps the old tail, like a terminal", () => {
    assert.equal(clean(["downloading 100 files\rdone\n"]), "doneloading 100 files\n|");
  });
  await t.step("CR then ESC[K clears the old tail", () => {
    assert.equal(clean(["downloading 100 files\r\x1b[Kdone\n"]), "done\n|");
    assert.equal(clean(["downloading 100 files\r\x1b[0Kdone\n"]), "done\n|");
  });
  await t.step("ESC[2K empties the line", () => {
    assert.equal(clean(["50%\x1b[2K\rdone\n"]), "done\n|");
  });
  await t.step("the pending line shows the latest frame", () => {
    assert.equal(clean(["10%\r20%\r30%"]), "|30%");
  });
  await t.step("EL erases from the cursor, not from column 0", () => {
    assert.equal(clean(["abcdef\rab\x1b[K\n"]), "ab\n|");
    assert.equal(clean(["abcdef\b\b\b\x1b[K!\n"]), "abc!\n|");
  });
});

Deno.test("VtCleaner treats CRLF and CR CR LF as one newline", () => {
  assert.equal(clean(["one\r\ntwo\r\r\nthree\n\n"]), "one\ntwo\nthree\n\n|");
  assert.equal(clean(["one\r", "\ntwo\r", "\r", "\n"]), "one\ntwo\n|");
});

Deno.test("VtCleaner applies backspace per UTF-8 character", async (t) => {
  await t.step("over a 2-byte character", () => {
    assert.equal(clean(["café\bE\n"]), "cafE\n|");
  });
  await t.step("over 3- and 4-byte characters", () => {
    assert.equal(clean(["a€😀\b\bbc\n"]), "abc\n|");
    assert.equal(clean(["€€\b😀\n"]), "€😀\n|");
  });
  await t.step("a multibyte character over an ASCII one", () => {
    assert.equal(clean(["abc\b\bé\n"]), "aéc\n|");
  });
  await t.step("not below column 0", () => {
    assert.equal(clean(["ab\b\b\b\bX\n"]), "Xb\n|");
  });
  await t.step("backspace, space, backspace erases a character", () => {
    assert.equal(clean(["abc\b \b\n"]), "ab \n|");
  });
});

Deno.test("VtCleaner keeps UTF-8 characters split across chunks intact", async (t) => {
  const text = "aé€😀b\r€é😀x\n";
  const bytes = enc.encode(text);
  const whole = clean([bytes]);
  assert.equal(whole, "€é😀xb\n|");
  await t.step("every split point, appending and overwriting", () => {
    for (let i = 0; i <= bytes.length; i++) {
      assert.equal(clean([bytes.subarray(0, i), bytes.subarray(i)]), whole, `split at ${i}`);
    }
  });
  await t.step("pending() leaves out a character still incomplete", () => {
    const c = new VtCleaner();
    c.push(enc.encode("ab").slice());
    c.push(enc.encode("😀").subarray(0, 3));
    assert.equal(dec.decode(c.pending()), "ab");
    c.push(enc.encode("😀").subarray(3));
    assert.equal(dec.decode(c.pending()), "ab😀");
  });
});

Deno.test("VtCleaner keeps TAB and LF and drops other C0 controls and DEL", () => {
  assert.equal(clean(["a\tb\x07c\x00d\x7fe\x01\x0b\x0c\x0e\x1ff\n"]), "a\tbcdef\n|");
});

Deno.test("VtCleaner ends a sequence on ESC, CAN or SUB", () => {
  assert.equal(clean(["\x1b[12\x1b[31mred\n"]), "red\n|");
  assert.equal(clean(["\x1b[12\x18ok\n"]), "ok\n|");
  assert.equal(clean(["\x1b]0;title\x1aok\n"]), "ok\n|");
  // An OSC interrupted by another sequence: the string is over, the new sequence is parsed.
  assert.equal(clean(["\x1b]0;title\x1b[1mok\n"]), "ok\n|");
});

Deno.test("VtCleaner bounds an unfinished escape sequence by maxCarry", async (t) => {
  await t.step("within the bound nothing is buffered or handed out", () => {
    const c = new VtCleaner({ maxCarry: 4096 });
    assert.equal(c.push(enc.encode("\x1b]0;")).length, 0);
    for (let i = 0; i < 40; i++) assert.equal(c.push(enc.encode("x".repeat(100))).length, 0);
    assert.equal(c.pending().length, 0);
    assert.equal(dec.decode(c.push(enc.encode("\x07done\n"))), "done\n");
  });
  await t.step("a huge unterminated OSC is dropped and parsing resumes as text", () => {
    const c = new VtCleaner({ maxCarry: 100 });
    const out: Uint8Array[] = [c.push(enc.encode("\x1b]0;"))];
    for (let i = 0; i < 1000; i++) out.push(c.push(enc.encode("x".repeat(1000))));
    out.push(c.push(enc.encode("\nok\n")));
    const text = dec.decode(concat(out));
    // The first 100 bytes of the sequence (ESC ] 0 ; and 96 x) are gone, the rest is text.
    assert.equal(text, "x".repeat(1_000_000 - 96) + "\nok\n");
    assert.equal(c.pending().length, 0);
  });
  await t.step("a long CSI is abandoned the same way", () => {
    assert.equal(
      clean(["\x1b[" + "1;".repeat(10) + "mX\n"], new VtCleaner({ maxCarry: 8 })),
      "1;1;1;1;1;1;1;mX\n|",
    );
  });
  await t.step("a terminated sequence longer than a chunk is removed whole", () => {
    const c = new VtCleaner();
    const parts = ["a\x1b]52;c;", "QUJD".repeat(200), "RA==", "\x07b\n"];
    assert.equal(clean(parts, c), "ab\n|");
  });
});

Deno.test("VtCleaner commits a line longer than maxLine as is", async (t) => {
  await t.step("the bytes come out unchanged, pending stays bounded", () => {
    const c = new VtCleaner({ maxLine: 10 });
    const out = dec.decode(c.push(enc.encode("abcdefghijklmnopqrstuvwxy")));
    assert.equal(out, "abcdefghijklmnopqrst");
    assert.equal(dec.decode(c.pending()), "uvwxy");
    assert.equal(dec.decode(c.push(enc.encode("z\n"))), "uvwxyz\n");
  });
  await t.step("a multibyte character is never split at the bound", () => {
    const c = new VtCleaner({ maxLine: 4 });
    const out = c.push(enc.encode("abc€€€\n"));
    assert.equal(dec.decode(out), "abc€€€\n");
    const c2 = new VtCleaner({ maxLine: 4 });
    const first = c2.push(enc.encode("abc€€"));
    assert.equal(dec.decode(first), "abc€");
    assert.equal(dec.decode(c2.pending()), "€");
  });
  await t.step("after such a commit a bare CR starts a new line", () => {
    assert.equal(
      clean(["0123456789AB\rX\n"], new VtCleaner({ maxLine: 10 })),
      "0123456789AB\nX\n|",
    );
  });
  await t.step("a huge line without newline flows through", () => {
    const c = new VtCleaner();
    let total = 0;
    for (let i = 0; i < 100; i++) total += c.push(enc.encode("y".repeat(10000))).length;
    assert.ok(c.pending().length <= 16384);
    assert.equal(total + c.pending().length, 1_000_000);
  });
});

Deno.test("VtCleaner flush commits the pending line", async (t) => {
  await t.step("flush returns the prompt text without a newline", () => {
    const c = new VtCleaner();
    assert.equal(c.push(enc.encode("Password: ")).length, 0);
    assert.equal(dec.decode(c.flush()), "Password: ");
    assert.equal(c.pending().length, 0);
    assert.equal(c.flush().length, 0);
  });
  await t.step("a later bare CR starts a new line instead of overwriting", () => {
    const c = new VtCleaner();
    c.push(enc.encode("prompt> "));
    assert.equal(dec.decode(c.flush()), "prompt> ");
    assert.equal(dec.decode(c.push(enc.encode("\rnew text\n"))), "\nnew text\n");
  });
  await t.step("text typed after a flush continues the line", () => {
    const c = new VtCleaner();
    c.push(enc.encode("Name? "));
    c.flush();
    assert.equal(dec.decode(c.push(enc.encode("bob\r\n"))), "bob\n");
  });
  await t.step("a CR over text typed after the flush keeps that text on its line", () => {
    const c = new VtCleaner();
    c.push(enc.encode("$ "));
    c.flush();
    assert.equal(dec.decode(c.push(enc.encode("abc\rxy\n"))), "abc\nxy\n");
  });
  await t.step("after a newline CR overwrites normally again", () => {
    const c = new VtCleaner();
    c.push(enc.encode("$ "));
    c.flush();
    assert.equal(dec.decode(c.push(enc.encode("\n10%\r20%\n"))), "\n20%\n");
  });
  await t.step(
    "flush with the cursor inside the line makes the next write start a new line",
    () => {
      const c = new VtCleaner();
      c.push(enc.encode("50%\r"));
      assert.equal(dec.decode(c.flush()), "50%");
      assert.equal(dec.decode(c.push(enc.encode("99%\n"))), "\n99%\n");
    },
  );
});

Deno.test("VtCleaner returns fresh arrays the caller may keep", () => {
  const c = new VtCleaner();
  const a = c.push(enc.encode("one\n"));
  const b = c.push(enc.encode("two\n"));
  const p = c.pending();
  c.push(enc.encode("three"));
  assert.equal(dec.decode(a), "one\n");
  assert.equal(dec.decode(b), "two\n");
  assert.equal(p.length, 0);
});

Deno.test("VtCleaner refuses invalid options", () => {
  assert.throws(() => new VtCleaner({ maxCarry: 0 }), RangeError);
  assert.throws(() => new VtCleaner({ maxLine: 1.5 }), RangeError);
});
