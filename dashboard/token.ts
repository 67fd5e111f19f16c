/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** The operator token: taken from `?token=` once, kept in sessionStorage, removed from the URL. */

const KEY = "termada.token";

export function takeToken(): string | undefined {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl) {
    sessionStorage.setItem(KEY, fromUrl);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function forgetToken(): void {
  sessionStorage.removeItem(KEY);
}
