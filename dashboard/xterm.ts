/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * Opening an xterm.js terminal the dashboard's way (CSP-safe styles, read-only by default) and
 * fitting it to its box. A terminal keeps the session's PTY size (cols × rows: a different grid
 * would lay full-screen programs out wrong); what fits is the font: the largest size at which
 * the PTY's grid fills the box's width without passing `maxHeight`, between MIN_FONT and
 * MAX_FONT. Below MIN_FONT the box scrolls horizontally instead.
 */
import { type ITerminalInitOnlyOptions, type ITerminalOptions, Terminal } from "@xterm/xterm";
import { cspDocument } from "./styles.ts";

export const MIN_FONT = 7;
export const MAX_FONT = 18;

/** A terminal opened in `host`; `dispose()` disposes it and its mirrored styles. */
export interface OpenTerm {
  term: Terminal;
  dispose(): void;
}

export function openTerm(
  host: HTMLElement,
  options: ITerminalOptions & ITerminalInitOnlyOptions,
): OpenTerm {
  const csp = cspDocument();
  const term = new Terminal({
    convertEol: false,
    fontSize: 13,
    cursorBlink: false,
    ...options,
    documentOverride: csp.document,
  });
  term.open(host);
  return {
    term,
    dispose: () => {
      term.dispose();
      csp.dispose();
    },
  };
}

/**
 * Sets the font size at which `term`'s grid fits `box` (one measured step, then one correction
 * when rounding overshot). Does nothing while the box is hidden (zero size).
 */
export function fitFont(term: Terminal, box: HTMLElement, maxHeight: number): void {
  const screen = box.querySelector<HTMLElement>(".xterm-screen");
  const font = term.options.fontSize ?? 13;
  if (!screen || !box.isConnected) return;
  const w = screen.offsetWidth;
  const h = screen.offsetHeight;
  const style = getComputedStyle(box);
  const availW = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  if (w <= 0 || h <= 0 || availW <= 0) return;
  const byWidth = availW / (w / font);
  const byHeight = Math.max(60, maxHeight) / (h / font);
  const next = Math.max(MIN_FONT, Math.min(MAX_FONT, Math.floor(Math.min(byWidth, byHeight))));
  if (next !== font) term.options.fontSize = next;
  box.dataset.font = String(term.options.fontSize);
  // Character widths do not scale exactly with the font: one step down if it now overflows.
  if (next > MIN_FONT && screen.offsetWidth > availW + 0.5) {
    term.options.fontSize = next - 1;
    box.dataset.font = String(next - 1);
  }
}

/**
 * Keeps `term` fitted to `box`: on the box's size changes (the window, the grid, a tab shown
 * again) and whenever `refit()` is called (the PTY's cols/rows changed). `reserve` is the
 * height kept free for the page around the terminal. Returns the refit function and a stop.
 */
export function watchFit(
  term: Terminal,
  box: HTMLElement,
  reserve: number,
): { refit(): void; stop(): void } {
  let frame = 0;
  const refit = () => {
    cancelAnimationFrame(frame);
    frame = requestAnimationFrame(() => fitFont(term, box, innerHeight - reserve));
  };
  const ro = new ResizeObserver(refit);
  ro.observe(box);
  addEventListener("resize", refit);
  const sized = term.onResize(refit);
  refit();
  return {
    refit,
    stop: () => {
      cancelAnimationFrame(frame);
      ro.disconnect();
      removeEventListener("resize", refit);
      sized.dispose();
    },
  };
}
