/** Hooks shared by the dashboard's views. */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

/** Refetches run at most this often while events arrive. */
export const THROTTLE_MS = 500;

/**
 * A throttled refetch of a view: at most one `load` every THROTTLE_MS while the view is shown,
 * re-run on every `pulse` (an event the view cares about), the last request of a burst always
 * running. `now()` drops a pending one and loads at once (a new selection).
 */
export function useThrottledLoad(
  load: () => unknown,
  visible: boolean,
  pulse: number,
): { now(): Promise<void> } {
  const loadRef = useRef(load);
  loadRef.current = load;
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const last = useRef(0);
  const schedule = useCallback(() => {
    if (timer.current !== undefined) return;
    const wait = Math.max(0, last.current + THROTTLE_MS - Date.now());
    timer.current = setTimeout(() => {
      timer.current = undefined;
      last.current = Date.now();
      loadRef.current();
    }, wait);
  }, []);
  useEffect(() => () => clearTimeout(timer.current), []);
  useEffect(() => {
    if (visible) schedule();
  }, [visible, pulse, schedule]);
  return {
    now: async () => {
      clearTimeout(timer.current);
      timer.current = undefined;
      last.current = Date.now();
      await loadRef.current();
    },
  };
}

/**
 * Which actions of a view are running (by key), and `run(key, fn)` that marks one busy while
 * `fn` runs (buttons disable themselves on `busy[key]`).
 */
export function useBusy(): [
  Record<string, boolean>,
  (key: string, fn: () => Promise<void>) => Promise<void>,
] {
  const [busy, setBusy] = useState<Record<string, boolean>>({});
  const run = async (key: string, fn: () => Promise<void>) => {
    setBusy((b) => ({ ...b, [key]: true }));
    try {
      await fn();
    } finally {
      setBusy(({ [key]: _, ...rest }) => rest);
    }
  };
  return [busy, run];
}
