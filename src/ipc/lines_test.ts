import assert from "node:assert/strict";
import { idAtEnd } from "../daemon/mcp_socket.ts";
import { type LineItem, readLines, TAIL_BYTES } from "./lines.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A reader that hands out `data` in pieces of `step` bytes. */
function reader(data: Uint8Array, step: number) {
  let off = 0;
  return {
    read(p: Uint8Array): Promise<number | null> {
      if (off >= data.length) return Promise.resolve(null);
      const n = Math.min(step, p.length, data.length - off);
      p.set(data.subarray(off, off + n));
      off += n;
      return Promise.resolve(n);
    },
  };
}

async function items(text: string, max: number, step: number): Promise<string[]> {
  const out: string[] = [];
  for await (
    const it of readLines(reader(enc.encode(text), step), max) as AsyncGenerator<LineItem>
  ) {
    out.push(it.kind === "line" ? `line:${dec.decode(it.bytes)}` : `big:${dec.decode(it.tail)}`);
  }
  return out;
}

Deno.test("readLines reports a line over the bound once, at its end, with its last bytes", async () => {
  const long = "a".repeat(1000) + "END";
  for (const step of [1, 7, 64, 5000]) {
    const got = await items(`ok\n${long}\nnext\n${long}`, 100, step);
    assert.deepEqual(got, [
      "line:ok",
      `big:${long.slice(-TAIL_BYTES)}`,
      "line:next",
      `big:${long.slice(-TAIL_BYTES)}`,
    ], `step ${step}`);
  }
  // A line just over the bound, whole in one read.
  assert.deepEqual(await items("xxxxxxxxxxx\nyy\n", 10, 100), ["big:xxxxxxxxxxx", "line:yy"]);
});

Deno.test("idAtEnd finds the top-level id a request ends with, and nothing else", () => {
  assert.equal(idAtEnd('"pad":"xxxx"},"id":9}'), 9);
  assert.equal(idAtEnd('xx"}, "id" : "req-7" }\r'), "req-7");
  assert.equal(idAtEnd('xx"},"id":-3}'), -3);
  assert.equal(idAtEnd('"params":{"id":5}}'), null, "a nested object's id");
  assert.equal(idAtEnd('"id":1,"method":"x","params":{"pad":"xx"}}'), null, "not last");
  assert.equal(idAtEnd('"id":{"a":1}}'), null);
  assert.equal(idAtEnd(""), null);
});
