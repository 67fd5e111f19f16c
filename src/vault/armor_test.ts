import assert from "node:assert/strict";
import { armor } from "age-encryption";
import { decodeArmor } from "./armor.ts";

Deno.test("armor: decodes what age-encryption armors, every length 0–300 and random bytes", () => {
  for (let n = 0; n <= 300; n++) {
    const bytes = crypto.getRandomValues(new Uint8Array(n));
    assert.deepEqual(decodeArmor(armor.encode(bytes)), bytes, `length ${n}`);
  }
  const big = crypto.getRandomValues(new Uint8Array(65536));
  assert.deepEqual(decodeArmor(armor.encode(big)), big);
});

Deno.test("armor: CRLF line ends and whitespace around the armor are accepted", () => {
  const bytes = crypto.getRandomValues(new Uint8Array(100));
  const text = armor.encode(bytes);
  assert.deepEqual(decodeArmor(text.replaceAll("\n", "\r\n")), bytes);
  assert.deepEqual(decodeArmor(`\n  ${text}\n\n `), bytes);
});

Deno.test("armor: anything else is refused, saying what is wrong", () => {
  const bytes = crypto.getRandomValues(new Uint8Array(80)); // 108 base64 characters: 64 + 44
  const good = armor.encode(bytes).trim();
  const lines = good.split("\n");
  const bad = (text: string, re: RegExp) => assert.throws(() => decodeArmor(text), re);
  bad(good.replace("BEGIN", "BEGIM"), /BEGIN/);
  bad(lines.slice(0, -1).join("\n"), /END/);
  bad(`${good}\ntrailing`, /END/);
  // A short line before the last one.
  bad(
    [lines[0], lines[1]!.slice(0, 60), lines[1]!.slice(60), ...lines.slice(2)].join("\n"),
    /line 2/,
  );
  // A last line that is too long, or holds a character base64 has not.
  bad([...lines.slice(0, 2), lines[2] + "AAAA".repeat(20), lines[3]].join("\n"), /line 3/);
  bad([...lines.slice(0, 2), "*" + lines[2]!.slice(1), lines[3]].join("\n"), /line 3/);
  // Non-canonical: the unused bits of the last character set.
  const one = armor.encode(new Uint8Array([0xff])).trim().split("\n"); // "/w=="
  assert.equal(one[1], "/w==");
  bad([one[0], "/x==", one[2]].join("\n"), /canonical/);
  bad([BEGIN_LINE, "", END_LINE].join("\n"), /line 2/);
  bad(BEGIN_LINE, /END/);
});

const BEGIN_LINE = "-----BEGIN AGE ENCRYPTED FILE-----";
const END_LINE = "-----END AGE ENCRYPTED FILE-----";

Deno.test({
  name: "armor: decodes what the real age CLI writes with -a",
  ignore: (() => {
    try {
      return !Deno.statSync("/usr/bin/age").isFile;
    } catch {
      return true;
    }
  })(),
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const key = `${dir}/key`;
      await new Deno.Command("age-keygen", { args: ["-o", key], stderr: "null" }).output();
      const pub = (await new Deno.Command("age-keygen", { args: ["-y", key] }).output()).stdout;
      const recipient = new TextDecoder().decode(pub).trim();
      const plain = crypto.getRandomValues(new Uint8Array(500));
      await Deno.writeFile(`${dir}/p`, plain);
      const enc = async (armored: boolean) => {
        const out = `${dir}/${armored ? "a" : "b"}.age`;
        const args = ["-r", recipient, ...(armored ? ["-a"] : []), "-o", out, `${dir}/p`];
        const r = await new Deno.Command("age", { args }).output();
        assert.equal(r.code, 0);
        return await Deno.readFile(out);
      };
      const armored = new TextDecoder().decode(await enc(true));
      const binary = decodeArmor(armored);
      // The same file as age would have written unarmored, up to its random parts: header line.
      assert.equal(new TextDecoder().decode(binary.subarray(0, 21)), "age-encryption.org/v1");
      // And age itself decrypts the decoded bytes back to the plaintext.
      await Deno.writeFile(`${dir}/d.age`, binary);
      const d = await new Deno.Command("age", { args: ["-d", "-i", key, `${dir}/d.age`] }).output();
      assert.equal(d.code, 0);
      assert.deepEqual(d.stdout, plain);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
