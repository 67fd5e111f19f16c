/**
 * Parses the invisible markers the shell integration prints: `ESC ] 7717 ; <nonce> ; <kind>
 * [; fields…] BEL`. Markers with the session's nonce are taken out of the byte stream; anything
 * else (ordinary output, other OSC sequences, markers with a wrong nonce — i.e. forgeries) stays
 * data. Sequences split across reads are carried (bounded).
 */

export type Marker =
  /** The prompt was printed: the shell is ready for a command line. */
  | { kind: "prompt" }
  /** The shell accepted a command line and is about to run it (bash PS0, zsh preexec). */
  | { kind: "start" }
  /** The command finished: its status and the shell's cwd afterwards. */
  | { kind: "end"; status: number; cwd: string };

export type ParsedPiece = { data: Uint8Array } | { marker: Marker };

const ESC = 0x1b;
const BEL = 0x07;
const PREFIX = new TextEncoder().encode("\x1b]7717;");
/** Longest marker we accept (a cwd can be long); beyond it the bytes are plain data. */
export const MAX_MARKER_BYTES = 8192;
const decoder = new TextDecoder();

export class MarkerParser {
  #nonce: string;
  #carry: Uint8Array | undefined;

  constructor(nonce: string) {
    if (!/^[0-9a-f]{16,64}$/.test(nonce)) throw new RangeError("nonce must be 16–64 hex chars");
    this.#nonce = nonce;
  }

  /**
   * Splits one chunk into data pieces and markers, in order. `hasEsc: false` (the caller scanned
   * the chunk, src/output/scan.ts) skips the search when nothing is carried over.
   */
  push(chunk: Uint8Array, hasEsc = true): ParsedPiece[] {
    if (!hasEsc && !this.#carry) return chunk.length > 0 ? [{ data: chunk }] : [];
    let buf = chunk;
    if (this.#carry) {
      buf = new Uint8Array(this.#carry.length + chunk.length);
      buf.set(this.#carry);
      buf.set(chunk, this.#carry.length);
      this.#carry = undefined;
    }
    const out: ParsedPiece[] = [];
    let dataStart = 0;
    let i = buf.indexOf(ESC);
    while (i !== -1) {
      const m = this.#matchPrefix(buf, i);
      if (m === "partial") {
        if (i > dataStart) out.push({ data: buf.subarray(dataStart, i) });
        this.#carry = buf.slice(i);
        return out;
      }
      if (m === "yes") {
        const end = buf.indexOf(BEL, i + PREFIX.length);
        if (end === -1) {
          if (buf.length - i <= MAX_MARKER_BYTES) {
            if (i > dataStart) out.push({ data: buf.subarray(dataStart, i) });
            this.#carry = buf.slice(i);
            return out;
          }
        } else if (end - i <= MAX_MARKER_BYTES) {
          const marker = this.#decode(buf.subarray(i + PREFIX.length, end));
          if (marker) {
            if (i > dataStart) out.push({ data: buf.subarray(dataStart, i) });
            out.push({ marker });
            dataStart = end + 1;
            i = buf.indexOf(ESC, dataStart);
            continue;
          }
        }
      }
      i = buf.indexOf(ESC, i + 1);
    }
    if (dataStart < buf.length) out.push({ data: buf.subarray(dataStart) });
    return out;
  }

  /** Bytes are held for a possibly incomplete marker: the next push hands some of them out. */
  get carrying(): boolean {
    return this.#carry !== undefined;
  }

  /** Hands back bytes held for a possibly incomplete marker (end of stream). */
  flush(): Uint8Array | undefined {
    const c = this.#carry;
    this.#carry = undefined;
    return c;
  }

  #matchPrefix(buf: Uint8Array, at: number): "yes" | "no" | "partial" {
    for (let k = 0; k < PREFIX.length; k++) {
      if (at + k >= buf.length) return "partial";
      if (buf[at + k] !== PREFIX[k]) return "no";
    }
    return "yes";
  }

  #decode(body: Uint8Array): Marker | undefined {
    const text = decoder.decode(body);
    const first = text.indexOf(";");
    if (first === -1 || text.slice(0, first) !== this.#nonce) return undefined;
    const rest = text.slice(first + 1);
    if (rest === "P") return { kind: "prompt" };
    if (rest === "C") return { kind: "start" };
    if (rest.startsWith("D;")) {
      const semi = rest.indexOf(";", 2);
      if (semi === -1) return undefined;
      const status = Number(rest.slice(2, semi));
      if (!Number.isInteger(status) || status < 0 || status > 255) return undefined;
      return { kind: "end", status, cwd: rest.slice(semi + 1) };
    }
    return undefined;
  }
}
