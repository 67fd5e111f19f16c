/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * xterm.js's DOM renderer and viewport write their sizes and theme into `<style>` elements, which
 * a strict CSP (`style-src 'self'`, no 'unsafe-inline') refuses — and Chromium reports every
 * refusal on the console. `cspDocument()` hands xterm (its `documentOverride` option) a view of
 * the page's document whose `<div>`s never take a `<style>` child: the element stays detached
 * (so the CSP never sees it), and its text is mirrored into a constructable stylesheet
 * (`adoptedStyleSheets`), which CSP does not restrict. The caller owns the result and must call
 * `dispose()` after the terminal is disposed.
 */
export interface CspDocument {
  /** Pass as xterm's `documentOverride`. */
  readonly document: Document;
  /** Drops the mirrored stylesheets. */
  dispose(): void;
}

export function cspDocument(): CspDocument {
  const sheets = new Map<HTMLStyleElement, { sheet: CSSStyleSheet; obs: MutationObserver }>();
  const adopt = (style: HTMLStyleElement) => {
    if (sheets.has(style)) return;
    const sheet = new CSSStyleSheet();
    const sync = () => sheet.replaceSync(style.textContent ?? "");
    // A MutationObserver sees a detached node's text changes too (xterm rewrites it on resize).
    const obs = new MutationObserver(sync);
    obs.observe(style, { childList: true, characterData: true, subtree: true });
    sync();
    sheets.set(style, { sheet, obs });
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  };
  const hook = (el: HTMLElement) => {
    const append = el.appendChild.bind(el);
    Object.defineProperty(el, "appendChild", {
      configurable: true,
      value: <T extends Node>(child: T): T => {
        if (child instanceof HTMLStyleElement) {
          adopt(child);
          return child;
        }
        return append(child);
      },
    });
  };
  const real = document;
  const doc = new Proxy(real, {
    get(target, prop) {
      if (prop === "createElement") {
        return (tag: string, options?: ElementCreationOptions) => {
          const el = target.createElement(tag, options);
          if (tag.toLowerCase() === "div") hook(el);
          return el;
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  return {
    document: doc,
    dispose: () => {
      for (const { sheet, obs } of sheets.values()) {
        obs.disconnect();
        document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
      }
      sheets.clear();
    },
  };
}
