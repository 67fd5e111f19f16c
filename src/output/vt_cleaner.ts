/**
 * Turns raw terminal bytes into plain text lines for agents: escape sequences are removed, carriage
 * returns and backspaces are applied to the current line, and only finished lines are handed out.
 * Works on bytes end to end (no decoding); state is O(1) apart from the pending line.
 */
import { completeEnd, isCont } from "./utf8.ts";
import { ALL_FLAGS, HAS_CONTROL, HAS_ESC } from "./scan.ts";

export interface VtCleanerOptions {
  /**
   * Longest escape sequence, in bytes, followed across chunks (default 4096). A longer one is
   * abandoned: its bytes so far are dropped and parsing resumes as plain text.
   */
  maxCarry?: number;
  /** Pending-line bound in bytes (default 16384): a longer line is committed as is. */
  maxLine?: number;
  /**
   * The secret spans of a pending line (sorted [start, end) byte pairs), asked when text is
   * about to be written over it (after a CR or a backspace): those bytes come out as `*` unless
   * written over themselves. Without it, `token=abc\rXXXXXX` would hand out `XXXXXXabc`: the
   * key that made the value a secret is gone from the final line.
   */
  guard?: (line: Uint8Array) => readonly number[];
}

const DEFAULT_MAX_CARRY = 4096;
const DEFAULT_MAX_LINE = 16384;

const BEL = 0x07;
const BS = 0x08;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const CAN = 0x18;
const SUB = 0x1a;
const ESC = 0x1b;
const DEL = 0x7f;

// Parser states.
const GROUND = 0;
/** After ESC. */
const S_ESC = 1;
/** ESC followed by intermediates (0x20–0x2F), e.g. a charset designation `ESC ( B`. */
const S_ESC_INT = 2;
const S_CSI = 3;
/** OSC string: ends with BEL or ST. */
const S_OSC = 4;
/** DCS/SOS/PM/APC string: ends with ST. */
const S_STR = 5;
/** ESC seen inside an OSC/DCS string: `\` completes ST, anything else starts a new sequence. */
const S_STR_ESC = 6;

const EMPTY = new Uint8Array(0);
const STAR = 0x2a;
/** Runs shorter than this are copied by a loop: a subarray view costs more than the copy. */
const SHORT_COPY = 32;

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`VtCleaner option "${name}" must be a positive integer, got ${value}`);
  }
  return value;
}

export class VtCleaner {
  readonly #maxCarry: number;
  readonly #maxLine: number;

  #state = GROUND;
  /** Bytes of the escape sequence being parsed, ESC included. */
  #seqLen = 0;
  /** First CSI parameter (only EL uses it). */
  #csiParam = 0;
  /** A `;`/`:` ended the first parameter. */
  #csiParamDone = false;
  /** Private marker or intermediate byte seen: not a plain EL. */
  #csiOther = false;

  /** The pending line; bytes [0, #lineLen) are meaningful. */
  #line: Uint8Array;
  #lineLen = 0;
  /** Cursor as a byte index into the pending line (always on a character start). */
  #col = 0;
  /** The last text handed out did not end with a newline (flush, or a line over maxLine). */
  #afterFlush = false;
  /** The cursor moved back into text already handed out: the next printable starts a new line. */
  #breakOnWrite = false;
  readonly #guard: ((line: Uint8Array) => readonly number[]) | undefined;
  /** The line was guarded since the cursor last moved back (nothing to ask before a write-over). */
  #guarded = true;
  /** Per byte of the pending line: 1 for a secret byte kept masked (made on the first). */
  #taint: Uint8Array | undefined;
  /** Some byte of the pending line is tainted. */
  #tainted = false;

  /** Output of the current push; allocated lazily per push and handed to the caller. */
  #out: Uint8Array = EMPTY;
  #outLen = 0;
  /** Size hint for the lazily allocated output of the current push. */
  #outHint = 0;

  constructor(options: VtCleanerOptions = {}) {
    this.#maxCarry = positiveInt("maxCarry", options.maxCarry, DEFAULT_MAX_CARRY);
    this.#maxLine = positiveInt("maxLine", options.maxLine, DEFAULT_MAX_LINE);
    this.#line = new Uint8Array(Math.min(this.#maxLine + 8, 1024));
    this.#guard = options.guard;
  }

  /**
   * Feeds raw terminal bytes; returns the cleaned bytes that are now final (complete lines, each
   * ending "\n"). `flags` (scan.ts `classify`) without HAS_ESC and HAS_CONTROL says the chunk is
   * only text, TABs and LFs: it is then cut into lines without a byte loop.
   */
  push(chunk: Uint8Array, flags: number = ALL_FLAGS): Uint8Array {
    const n = chunk.length;
    this.#out = EMPTY;
    this.#outLen = 0;
    this.#outHint = n;
    let i = 0;
    if ((flags & (HAS_ESC | HAS_CONTROL)) === 0 && this.#state === GROUND && n > 0) {
      this.#text(chunk, 0, n, chunk.indexOf(LF), chunk.lastIndexOf(LF));
      i = n;
    }
    while (i < n) {
      if (this.#state === GROUND) {
        // A stretch of printable bytes, TABs and LFs: the common case, handled in bulk.
        const start = i;
        let firstLf = -1;
        let lastLf = -1;
        while (i < n) {
          const b = chunk[i]!;
          if (b >= 0x20) {
            if (b === DEL) break;
          } else if (b === LF) {
            if (firstLf < 0) firstLf = i;
            lastLf = i;
          } else if (b !== TAB) break;
          i++;
        }
        if (i > start) this.#text(chunk, start, i, firstLf, lastLf);
        if (i >= n) break;
        const b = chunk[i++]!;
        if (b === ESC) {
          this.#state = S_ESC;
          this.#seqLen = 1;
        } else {
          this.#control(b);
        }
        continue;
      }

      // Inside an escape sequence: byte by byte.
      const b = chunk[i]!;
      if (++this.#seqLen > this.#maxCarry) {
        // Abandoned: the byte is reconsidered as plain text.
        this.#state = GROUND;
        continue;
      }
      i++;
      switch (this.#state) {
        case S_ESC:
          if (b === 0x5b) { // [
            this.#state = S_CSI;
            this.#csiParam = 0;
            this.#csiParamDone = false;
            this.#csiOther = false;
          } else if (b === 0x5d) { // ]
            this.#state = S_OSC;
          } else if (b === 0x50 || b === 0x58 || b === 0x5e || b === 0x5f) { // P X ^ _
            this.#state = S_STR;
          } else if (b >= 0x20 && b <= 0x2f) {
            this.#state = S_ESC_INT;
          } else if (b >= 0x30 && b <= 0x7e) {
            this.#state = GROUND;
          } else {
            i = this.#unexpected(b, i);
          }
          break;
        case S_ESC_INT:
          if (b >= 0x30 && b <= 0x7e) this.#state = GROUND;
          else if (!(b >= 0x20 && b <= 0x2f)) i = this.#unexpected(b, i);
          break;
        case S_CSI:
          if (b >= 0x40 && b <= 0x7e) {
            this.#state = GROUND;
            if (b === 0x4b && !this.#csiOther) this.#eraseInLine(this.#csiParam); // K
          } else if (b >= 0x30 && b <= 0x39) {
            if (!this.#csiParamDone && this.#csiParam < 100000) {
              this.#csiParam = this.#csiParam * 10 + (b - 0x30);
            }
          } else if (b === 0x3b || b === 0x3a) {
            this.#csiParamDone = true;
          } else if (b >= 0x20 && b <= 0x3f) {
            this.#csiOther = true; // intermediates and the private markers < = > ?
          } else {
            i = this.#unexpected(b, i);
          }
          break;
        case S_OSC:
          if (b === BEL || b === CAN || b === SUB) this.#state = GROUND;
          else if (b === ESC) this.#state = S_STR_ESC;
          break;
        case S_STR:
          if (b === CAN || b === SUB) this.#state = GROUND;
          else if (b === ESC) this.#state = S_STR_ESC;
          break;
        case S_STR_ESC:
          if (b === 0x5c) { // \ : ST
            this.#state = GROUND;
          } else {
            // The string ended without ST: this ESC starts a new sequence; the byte belongs to it.
            this.#state = S_ESC;
            this.#seqLen = 1;
            i--;
          }
          break;
      }
    }
    const out = this.#out;
    const len = this.#outLen;
    this.#out = EMPTY;
    this.#outLen = 0;
    if (len === 0) return EMPTY;
    // Do not pin a big mostly-empty buffer in the caller's hands.
    return len * 2 < out.length ? out.slice(0, len) : out.subarray(0, len);
  }

  /** The current incomplete line after CR/backspace processing (not yet returned by push). Used as prompt text. */
  pending(): Uint8Array {
    // Leave out a UTF-8 character whose last bytes have not arrived yet.
    const text = this.#line.slice(0, completeEnd(this.#line, 0, this.#lineLen));
    if (this.#tainted) this.#star(text, 0, 0, text.length);
    return text;
  }

  /**
   * Commits and returns the pending line (job end, input awaited, reader asked). After a flush, a
   * later bare CR starts a new line instead of overwriting text already handed out.
   */
  flush(): Uint8Array {
    if (this.#lineLen === 0) return EMPTY;
    const text = this.#line.slice(0, this.#lineLen);
    if (this.#tainted) this.#star(text, 0, 0, text.length);
    this.#afterFlush = true;
    if (this.#col < this.#lineLen) this.#breakOnWrite = true;
    this.#resetLine();
    return text;
  }

  /** Empties the pending line (its taint with it). */
  #resetLine(): void {
    if (this.#tainted) {
      this.#taint!.fill(0, 0, this.#lineLen);
      this.#tainted = false;
    }
    this.#lineLen = 0;
    this.#col = 0;
    this.#guarded = true;
  }

  /** Stars the tainted bytes of line bytes [from, to) copied to `out` at `at`. */
  #star(out: Uint8Array, at: number, from: number, to: number): void {
    const taint = this.#taint!;
    for (let k = from; k < to; k++) if (taint[k] === 1) out[at + k - from] = STAR;
  }

  /** About to write over the pending line: its secret bytes stay masked from now on. */
  #guardLine(): void {
    this.#guarded = true;
    if (!this.#guard || this.#lineLen === 0) return;
    const spans = this.#guard(this.#line.subarray(0, this.#lineLen));
    if (spans.length === 0) return;
    const taint = this.#taint ??= new Uint8Array(this.#line.length);
    for (let k = 0; k + 1 < spans.length; k += 2) {
      const s = Math.max(0, spans[k]!);
      const e = Math.min(this.#lineLen, spans[k + 1]!);
      if (e > s) {
        taint.fill(1, s, e);
        this.#tainted = true;
      }
    }
  }

  #reserve(extra: number): void {
    const need = this.#outLen + extra;
    if (need <= this.#out.length) return;
    const size = Math.max(need, this.#outHint + this.#lineLen + 64, this.#out.length * 2);
    const next = new Uint8Array(size);
    next.set(this.#out.subarray(0, this.#outLen));
    this.#out = next;
  }

  /** A stretch src[start, end) of text, TABs and LFs whose first and last LF are known (-1: none). */
  #text(src: Uint8Array, start: number, end: number, firstLf: number, lastLf: number): void {
    if (firstLf < 0) {
      this.#write(src, start, end);
      return;
    }
    this.#write(src, start, firstLf);
    this.#commitLine();
    // Every line between the first and the last LF is complete and starts at column 0: copy
    // them in one go. Lines over maxLine would be committed as is anyway, so the bytes out are
    // the same.
    if (lastLf > firstLf) this.#emit(src, firstLf + 1, lastLf + 1);
    this.#write(src, lastLf + 1, end);
  }

  /** Appends src[start, end) to the output. */
  #emit(src: Uint8Array, start: number, end: number): void {
    const len = end - start;
    if (len <= 0) return;
    this.#reserve(len);
    if (len < SHORT_COPY) {
      const out = this.#out;
      let o = this.#outLen;
      for (let k = start; k < end; k++) out[o++] = src[k]!;
      this.#outLen = o;
    } else {
      this.#out.set(src.subarray(start, end), this.#outLen);
      this.#outLen += len;
    }
  }

  /** Hands out the pending line, its tainted bytes starred. */
  #emitLine(): void {
    const at = this.#outLen;
    this.#emit(this.#line, 0, this.#lineLen);
    if (this.#tainted) this.#star(this.#out, at, 0, this.#lineLen);
  }

  /** Hands out the pending line plus LF and starts a fresh line. */
  #commitLine(): void {
    this.#emitLine();
    this.#reserve(1);
    this.#out[this.#outLen++] = LF;
    this.#resetLine();
    this.#afterFlush = false;
    this.#breakOnWrite = false;
  }

  /** Hands out the pending line without LF (maxLine reached), like flush. */
  #commitAsIs(): void {
    const cursorInside = this.#col < this.#lineLen;
    this.#emitLine();
    this.#resetLine();
    if (cursorInside) {
      // The cursor sat inside text just handed out: what follows goes to a new line.
      this.#reserve(1);
      this.#out[this.#outLen++] = LF;
      this.#afterFlush = false;
    } else {
      this.#afterFlush = true;
    }
    this.#breakOnWrite = false;
  }

  #ensureLine(cap: number): void {
    if (cap <= this.#line.length) return;
    const next = new Uint8Array(Math.max(cap, Math.min(this.#line.length * 2, this.#maxLine + 8)));
    next.set(this.#line.subarray(0, this.#lineLen));
    this.#line = next;
    if (this.#taint) {
      const taint = new Uint8Array(next.length);
      taint.set(this.#taint.subarray(0, this.#lineLen));
      this.#taint = taint;
    }
  }

  /** Writes printable bytes (and TABs) src[start, end) at the cursor. */
  #write(src: Uint8Array, start: number, end: number): void {
    if (start >= end) return;
    if (this.#breakOnWrite) this.#commitLine();
    const maxLine = this.#maxLine;
    let k = start;
    while (k < end) {
      if (this.#col === this.#lineLen) {
        // Appending at the end of the line: bulk copy up to maxLine.
        const room = maxLine - this.#lineLen;
        if (room > 0) {
          const take = Math.min(room, end - k);
          this.#ensureLine(this.#lineLen + take);
          const line = this.#line;
          let o = this.#lineLen;
          if (take < SHORT_COPY) {
            for (const stop = k + take; k < stop;) line[o++] = src[k++]!;
          } else {
            line.set(src.subarray(k, k + take), o);
            k += take;
            o += take;
          }
          this.#lineLen = o;
          this.#col = o;
          continue;
        }
        const b = src[k]!;
        // At the bound: finish the current character (at most 3 more bytes), then commit as is.
        if (isCont(b) && this.#lineLen < maxLine + 3) {
          this.#ensureLine(this.#lineLen + 1);
          this.#line[this.#lineLen++] = b;
          this.#col = this.#lineLen;
          k++;
        } else {
          this.#commitAsIs();
        }
        continue;
      }
      this.#overwrite(src[k++]!);
    }
  }

  /** Writes one byte over the character cell at the cursor (the cursor is inside the line). */
  #overwrite(b: number): void {
    if (!this.#guarded) this.#guardLine();
    const line = this.#line;
    const col = this.#col;
    if (isCont(b)) {
      // A continuation byte completes the character just written: insert it.
      if (this.#lineLen >= this.#maxLine + 3) {
        this.#commitAsIs();
        this.#write(ONE[b]!, 0, 1);
        return;
      }
      this.#ensureLine(this.#lineLen + 1);
      const l = this.#line;
      l.copyWithin(col + 1, col, this.#lineLen);
      l[col] = b;
      if (this.#tainted) {
        this.#taint!.copyWithin(col + 1, col, this.#lineLen);
        this.#taint![col] = 0;
      }
      this.#lineLen++;
      this.#col = col + 1;
      return;
    }
    // Replace the whole old character (lead byte plus its continuation bytes) by this byte.
    let m = 1;
    while (m < 4 && col + m < this.#lineLen && isCont(line[col + m]!)) m++;
    line[col] = b;
    const taint = this.#tainted ? this.#taint! : undefined;
    if (taint) taint[col] = 0; // written over: what is there now is not the secret
    if (m > 1) {
      line.copyWithin(col + 1, col + m, this.#lineLen);
      if (taint) {
        taint.copyWithin(col + 1, col + m, this.#lineLen);
        taint.fill(0, this.#lineLen - (m - 1), this.#lineLen);
      }
      this.#lineLen -= m - 1;
    }
    this.#col = col + 1;
  }

  /** C0 controls outside escape sequences (ESC is handled by the caller). */
  #control(b: number): void {
    switch (b) {
      case LF:
        this.#commitLine();
        break;
      case CR:
        this.#col = 0;
        if (this.#lineLen > 0) this.#guarded = false;
        if (this.#afterFlush) this.#breakOnWrite = true;
        break;
      case BS: {
        let col = this.#col;
        if (col === 0) break;
        col--;
        while (col > 0 && isCont(this.#line[col]!)) col--;
        this.#col = col;
        this.#guarded = false;
        break;
      }
      case TAB:
        this.#write(ONE[TAB]!, 0, 1);
        break;
      default:
        // BEL, NUL, DEL and the other C0 controls carry no text.
        break;
    }
  }

  /**
   * A byte that cannot continue the current escape sequence: C0 controls act as in a terminal,
   * ESC/CAN/SUB end the sequence, and anything else ends it and is reconsidered as text.
   * Returns the next read index.
   */
  #unexpected(b: number, i: number): number {
    if (b === ESC) {
      this.#state = S_ESC;
      this.#seqLen = 1;
    } else if (b === CAN || b === SUB) {
      this.#state = GROUND;
    } else if (b < 0x20) {
      this.#control(b);
    } else if (b !== DEL) {
      this.#state = GROUND;
      return i - 1;
    }
    return i;
  }

  /** EL: 0 erases from the cursor to the end of the line, 2 the whole line; others are ignored. */
  #eraseInLine(mode: number): void {
    if (mode === 0) {
      if (this.#col < this.#lineLen) {
        if (this.#tainted) this.#taint!.fill(0, this.#col, this.#lineLen);
        this.#lineLen = this.#col;
      }
    } else if (mode === 2) {
      this.#resetLine();
    }
  }
}

/** One-byte arrays for writing a single byte through #write. */
const ONE: Uint8Array[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
