import assert from "node:assert/strict";
import { seededRandom } from "../shared/mod.ts";
import { BUILTIN_RULE_COUNT, Redactor } from "./redact.ts";
import { RULE_SAMPLES } from "./_rule_samples.ts";
import {
  ALL_FLAGS,
  ANCHOR_BYTES,
  classify,
  HAS_ANCHOR,
  HAS_CONTROL,
  HAS_ESC,
  PAIR_FLAGS,
} from "./scan.ts";
import { VtCleaner } from "./vt_cleaner.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** The flags of one byte, written out from the definitions (not from scan.ts's tables). */
function flagOf(b: number): number {
  if (b === 0x1b) return HAS_ESC;
  if ((b < 0x20 && b !== 0x09 && b !== 0x0a) || b === 0x7f) return HAS_CONTROL;
  if (ANCHOR_BYTES.includes(String.fromCharCode(b))) return HAS_ANCHOR;
  return 0;
}

function naive(d: Uint8Array): number {
  let f = 0;
  for (const b of d) f |= flagOf(b);
  return f;
}

Deno.test("classify: each byte value alone, and the pair table", () => {
  for (let b = 0; b < 256; b++) {
    assert.equal(classify(Uint8Array.of(b)), flagOf(b), `byte ${b}`);
    // The same byte deep inside a long plain chunk, at an odd and an even index.
    for (const at of [200, 201]) {
      const d = new Uint8Array(400).fill(0x79); // "y"
      d[at] = b;
      assert.equal(classify(d), flagOf(b), `byte ${b} at ${at}`);
    }
  }
  for (let v = 0; v < 65536; v += 257) {
    assert.equal(PAIR_FLAGS[v], flagOf(v & 0xff) | flagOf(v >> 8));
  }
  assert.equal(classify(new Uint8Array(0)), 0);
});

Deno.test("classify agrees with a byte loop at every offset and length (views of one buffer)", () => {
  const rnd = seededRandom(7);
  const plain = enc.encode("the quick brown fox 0123456789 y\n\t");
  const special = [0x1b, 0x0d, 0x08, 0x07, 0x7f, 0x00, ...enc.encode(ANCHOR_BYTES)];
  for (let round = 0; round < 400; round++) {
    const buf = new Uint8Array(64 + Math.floor(rnd() * 600));
    for (let i = 0; i < buf.length; i++) buf[i] = plain[Math.floor(rnd() * plain.length)]!;
    const hits = Math.floor(rnd() * 3);
    for (let h = 0; h < hits; h++) {
      buf[Math.floor(rnd() * buf.length)] = special[Math.floor(rnd() * special.length)]!;
    }
    const from = Math.floor(rnd() * 9);
    const to = buf.length - Math.floor(rnd() * 9);
    const view = buf.subarray(from, to);
    assert.equal(classify(view), naive(view), `round ${round} [${from}, ${to})`);
  }
});

/** Random terminal output rich in what the stages care about. */
function corpus(rnd: () => number, size: number): Uint8Array {
  const pieces = [
    "y\n",
    "compiling crate number 12 of 40\n",
    "plain words and digits 0123 ",
    "\t",
    "password=hunter2secret\n",
    "Authorization: Bearer abcdefghijklmnop\n",
    "export GITHUB_TOKEN=ghp_" + "a1".repeat(20) + "\n",
    "key id AKIAABCDEFGHIJKLMNOP in the log\n",
    "sk-proj-abcdefghij0123456789xyz ",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\nQWERTYUIOPasdfgh\n-----END RSA PRIVATE KEY-----\n",
    "progress 10%\rprogress 50%\rprogress 100%\n",
    "\x1b[31mred\x1b[0m text\n",
    "\x1b]0;title\x07",
    "back\b\bspace\n",
    "token: 'quoted value here'\n",
    "x".repeat(300) + " secret=" + "v".repeat(40) + "\n",
    "é ü 日本 ",
  ];
  const parts: string[] = [];
  let n = 0;
  while (n < size) {
    const p = pieces[Math.floor(rnd() * pieces.length)]!;
    parts.push(p);
    n += p.length;
  }
  return enc.encode(parts.join(""));
}

function chunked(rnd: () => number, d: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let i = 0;
  while (i < d.length) {
    const len = 1 + Math.floor(rnd() * (rnd() < 0.3 ? 8 : 700));
    // A view at a random offset of a larger buffer: odd and even byte offsets both occur.
    const pad = Math.floor(rnd() * 3);
    const buf = new Uint8Array(pad + len);
    const piece = d.subarray(i, i + len);
    buf.set(piece, pad);
    out.push(buf.subarray(pad, pad + piece.length));
    i += len;
  }
  return out;
}

Deno.test("the stages give the same bytes with scan flags as without (random output, random chunks)", async (t) => {
  for (let seed = 1; seed <= 12; seed++) {
    const rnd = seededRandom(seed);
    const data = corpus(rnd, 4000 + seed * 500);
    const chunks = chunked(rnd, data);
    await t.step(`seed ${seed}: VtCleaner`, () => {
      const a = new VtCleaner();
      const b = new VtCleaner({});
      const outA: string[] = [];
      const outB: string[] = [];
      for (const c of chunks) {
        outA.push(dec.decode(a.push(c)));
        outB.push(dec.decode(b.push(c, classify(c))));
      }
      outA.push(dec.decode(a.flush()));
      outB.push(dec.decode(b.flush()));
      assert.equal(outB.join(""), outA.join(""));
    });
    await t.step(`seed ${seed}: Redactor stream`, () => {
      const a = new Redactor().stream();
      const b = new Redactor().stream();
      const outA = chunks.map((c) => dec.decode(a.push(c)));
      const outB = chunks.map((c) => dec.decode(b.push(c, classify(c))));
      assert.equal(outB.join("") + dec.decode(b.flush()), outA.join("") + dec.decode(a.flush()));
    });
    await t.step(`seed ${seed}: Redactor.redact with an anchor-free tail`, () => {
      // Whole lines, split where the tail after a line end has no anchor byte.
      const text = dec.decode(data);
      const lines = text.split("\n").map((l) => l + "\n");
      const full = new Redactor().redact(enc.encode(lines.join("")));
      let from = lines.length;
      while (from > 0 && (classify(enc.encode(lines[from - 1]!)) & HAS_ANCHOR) === 0) from--;
      const head = enc.encode(lines.slice(0, from).join(""));
      const hinted = new Redactor().redact(enc.encode(lines.join("")), head.length);
      assert.equal(dec.decode(hinted), dec.decode(full));
    });
  }
});

Deno.test("every built-in rule's match holds an anchor byte (what lets a chunk without one skip them)", () => {
  const samples = RULE_SAMPLES;
  assert.equal(samples.length, BUILTIN_RULE_COUNT);
  for (const s of samples) {
    const out = dec.decode(new Redactor().redact(enc.encode(s + "\n")));
    assert.notEqual(out, s + "\n", `${s} is masked`);
    // The line a rule matches on (a PEM block's BEGIN line: its body is masked by the block
    // state, which every stage scans under whatever the flags say) holds an anchor byte.
    const first = s.split("\n")[0]!;
    assert.notEqual(classify(enc.encode(first)) & HAS_ANCHOR, 0, `${first} has no anchor byte`);
  }
});

Deno.test("an anchor-free tail inside a PEM block that the head opened is still masked", () => {
  const head = "log line\n-----BEGIN RSA PRIVATE KEY-----\n";
  const tail = "QWERTYUIOPasdfghjklzcvbnm\nqwertyuiopQWERTYUIOP\n";
  assert.equal(classify(enc.encode(tail)) & HAS_ANCHOR, 0);
  const out = dec.decode(new Redactor().redact(enc.encode(head + tail), enc.encode(head).length));
  assert.ok(!out.includes("QWERTYUIOPasdfgh"), out);
  assert.ok(!out.includes("qwertyuiopQWERTYUIOP"), out);
});

Deno.test("a secret at every offset of a long line is masked (the two-byte scan's both alignments)", () => {
  const r = new Redactor();
  for (let pad = 0; pad < 40; pad++) {
    for (const secret of ["ghp_" + "b2".repeat(20), "AKIAABCDEFGHIJKLMNOP", "token=abcdef123"]) {
      const line = "y".repeat(280 + pad) + " " + secret + " " + "z".repeat(pad) + "\n";
      const bytes = enc.encode(line);
      for (const off of [0, 1]) {
        const buf = new Uint8Array(bytes.length + off);
        buf.set(bytes, off);
        const out = dec.decode(r.redact(buf.subarray(off)));
        const value = secret.split("=").pop()!;
        assert.ok(!out.includes(value), `${secret} at pad ${pad}, offset ${off}`);
        assert.equal(out.length, line.length - (value.length >= 10 ? value.length - 10 : 0));
      }
    }
  }
});

Deno.test("flags that are not given mean every scan runs", () => {
  // A stage handed no flags must not skip: the default is ALL_FLAGS.
  const c = new VtCleaner();
  assert.equal(dec.decode(c.push(enc.encode("a\rb\n"))), "b\n");
  assert.equal(ALL_FLAGS & (HAS_ESC | HAS_CONTROL | HAS_ANCHOR), 7);
  const s = new Redactor().stream();
  assert.equal(dec.decode(s.push(enc.encode("password=hunter22 "))), "password=******** ");
});
