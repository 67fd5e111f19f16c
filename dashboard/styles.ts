/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * xterm.js's DOM renderer writes its sizes and theme into `<style>` elements, which a strict
 * CSP (`style-src 'self'`, no 'unsafe-inline') does not apply. Mirror their text into
 * constructable stylesheets (`adoptedStyleSheets`), which CSP does not restrict.
 */
export function mirrorStyles(root: HTMLElement): () => void {
  const sheets = new Map<HTMLStyleElement, CSSStyleSheet>();
  const sync = () => {
    const seen = new Set<HTMLStyleElement>();
    for (const el of root.querySelectorAll("style")) {
      seen.add(el);
      let sheet = sheets.get(el);
      if (!sheet) {
        sheet = new CSSStyleSheet();
        sheets.set(el, sheet);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
      }
      sheet.replaceSync(el.textContent ?? "");
    }
    for (const [el, sheet] of sheets) {
      if (!seen.has(el)) drop(el, sheet);
    }
  };
  const drop = (el: HTMLStyleElement, sheet: CSSStyleSheet) => {
    sheets.delete(el);
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
  };
  const obs = new MutationObserver(sync);
  obs.observe(root, { childList: true, subtree: true, characterData: true });
  return () => {
    obs.disconnect();
    for (const [el, sheet] of [...sheets]) drop(el, sheet);
  };
}
