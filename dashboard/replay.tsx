/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The Replay view: every session recording (`GET /api/recordings`) and a player over one
 * session's asciicast (`GET /api/sessions/:id/recording`) — play, pause, speed, seek, search —
 * in an xterm.js terminal sized from the cast's header (and its resize events). Also the job
 * screen: the screen a job left, rendered from its window of the session's recording.
 */
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { Terminal } from "@xterm/xterm";
import { api, HttpError } from "./api.ts";
import { type Cast, type CastEvent, CastIndex, jobScreen, loadCast, parseSize } from "./cast.ts";
import { openTerm, watchFit } from "./xterm.ts";
import { useThrottledLoad } from "./hooks.ts";

/** One recording as `GET /api/recordings` lists it. */
export interface RecordingRow {
  session_id: string;
  owner: string | null;
  live?: boolean;
  bytes: number;
  parts: number;
  started_at: string;
  ended_at?: string;
  /** The contract's older spelling of `ended_at`. */
  ended?: string;
  close_reason?: string;
}

export const SPEEDS = [0.5, 1, 2, 4, 8] as const;
/** How often playback writes what is due (ms). */
const TICK_MS = 40;

const size = (n: number) =>
  n < 1024
    ? `${n} B`
    : n < 1 << 20
    ? `${(n / 1024).toFixed(1)} KiB`
    : `${(n / (1 << 20)).toFixed(1)} MiB`;

/** `m:ss.s` of a cast time. */
export function clock(s: number): string {
  const m = Math.floor(s / 60);
  const rest = s - m * 60;
  return `${m}:${rest < 10 ? "0" : ""}${rest.toFixed(1)}`;
}

/**
 * Writes a cast into a terminal up to a time. Moving forward writes only the events due;
 * moving back resets the terminal and writes from the start. Resizes are applied between the
 * same bytes as recorded (xterm runs a write's callback before it parses the next write).
 */
export class CastRenderer {
  /** The index of the next event to write. */
  #next = 0;
  #time = 0;
  constructor(readonly term: Terminal, readonly cast: Cast) {
    this.#reset();
  }

  get time(): number {
    return this.#time;
  }

  /** Whether every event is written. */
  get done(): boolean {
    return this.#next >= this.cast.events.length;
  }

  #reset(): void {
    this.term.reset();
    this.term.resize(this.cast.header.width, this.cast.header.height);
    this.#next = 0;
    this.#time = 0;
  }

  /** Shows the terminal as it was at `t` seconds (inclusive of events at `t`). */
  seek(t: number): void {
    if (t < this.#time) this.#reset();
    this.#time = Math.max(0, Math.min(t, this.cast.duration));
    const events = this.cast.events;
    let end = this.#next;
    while (end < events.length && events[end]!.t <= t) end++;
    writeEvents(this.term, events.slice(this.#next, end));
    this.#next = end;
  }

  /** Shows the terminal right after event `i` (a search match). */
  seekEvent(i: number): void {
    const e = this.cast.events[i];
    if (!e) return;
    if (i < this.#next) this.#reset();
    writeEvents(this.term, this.cast.events.slice(this.#next, i + 1));
    this.#next = i + 1;
    this.#time = e.t;
  }
}

/** Writes events in order: output batched, each resize between the bytes around it. */
export function writeEvents(term: Terminal, events: CastEvent[]): void {
  let buf: string[] = [];
  const flush = () => {
    if (buf.length) term.write(buf.join(""));
    buf = [];
  };
  for (const e of events) {
    if (e.code === "o") buf.push(e.data);
    else if (e.code === "r") {
      const s = parseSize(e.data);
      if (!s) continue;
      flush();
      term.write("", () => term.resize(s.cols, s.rows));
    }
  }
  flush();
}

/** The recording list and the player of the selected one. */
export function ReplayView(props: {
  token: string;
  visible: boolean;
  pulse: number;
  selected?: string;
  onSelect: (id: string | undefined) => void;
}): preact.JSX.Element {
  const [rows, setRows] = useState<RecordingRow[] | undefined>();
  const [enabled, setEnabled] = useState<boolean | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [missing, setMissing] = useState(false);
  const load = async () => {
    try {
      const r = await api<{ recordings: RecordingRow[]; enabled?: boolean }>(
        props.token,
        "/api/recordings",
      );
      setRows(Array.isArray(r.recordings) ? r.recordings : []);
      setEnabled(r.enabled);
      setError(undefined);
      setMissing(false);
    } catch (err) {
      if (err instanceof HttpError && err.status === 404) setMissing(true);
      else setError(`recordings: ${(err as Error).message}`);
    }
  };
  useThrottledLoad(load, props.visible, props.pulse);
  const selected = props.selected;
  return (
    <>
      {missing && (
        <p class="note" data-recordings-missing>
          This daemon has no recordings API (<code>GET /api/recordings</code>); a session's
          recording can still be played when its id is opened.
        </p>
      )}
      {error && <p class="error" role="alert">{error}</p>}
      {enabled === false && (
        <p class="note">
          New sessions are not recorded (<code>sessions.record</code> is off).
        </p>
      )}
      {selected && (
        <Player
          key={selected}
          token={props.token}
          sessionId={selected}
          visible={props.visible}
          onClose={() => props.onSelect(undefined)}
        />
      )}
      <h2>Recordings</h2>
      {rows && rows.length === 0 && <p class="empty">No recordings.</p>}
      {rows && rows.length > 0 && (
        <div class="table-scroll">
          <table class="recordings">
            <thead>
              <tr>
                <th>Session</th>
                <th>Agent</th>
                <th>Started</th>
                <th>Ended</th>
                <th>Size</th>
                <th>Parts</th>
                <th></th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr
                  key={r.session_id}
                  data-recording={r.session_id}
                  class={selected === r.session_id ? "open" : ""}
                >
                  <td class="mono">{r.session_id}</td>
                  <td>{r.owner ?? "—"}</td>
                  <td title={r.started_at}>{new Date(r.started_at).toLocaleString()}</td>
                  <td title={r.ended_at ?? r.ended ?? ""}>
                    {r.ended_at ?? r.ended
                      ? new Date((r.ended_at ?? r.ended)!).toLocaleTimeString()
                      : r.live === false
                      ? "—"
                      : "running"}
                  </td>
                  <td>{size(r.bytes)}</td>
                  <td>{r.parts}</td>
                  <td>
                    <button
                      type="button"
                      data-play-recording={r.session_id}
                      onClick={() => props.onSelect(r.session_id)}
                    >
                      Play
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

/** The player of one session's recording. */
function Player(props: {
  token: string;
  sessionId: string;
  visible: boolean;
  onClose: () => void;
}): preact.JSX.Element {
  const host = useRef<HTMLDivElement>(null);
  const [cast, setCast] = useState<Cast | undefined>();
  const [error, setError] = useState<string | undefined>();
  const [reloads, setReloads] = useState(0);
  const renderer = useRef<CastRenderer | undefined>(undefined);
  const [time, setTime] = useState(0);
  const [playing, setPlaying] = useState(false);
  const [speed, setSpeed] = useState(1);
  const [query, setQuery] = useState("");
  const [match, setMatch] = useState<
    { n: number; of: number; offset: number; t: number } | "none" | undefined
  >();
  const [size, setSize] = useState<{ cols: number; rows: number } | undefined>();

  useEffect(() => {
    const abort = new AbortController();
    setError(undefined);
    loadCast(props.token, props.sessionId, abort.signal).then(
      (c) => setCast(c),
      (err) => !abort.signal.aborted && setError((err as Error).message),
    );
    return () => abort.abort();
  }, [props.sessionId, props.token, reloads]);

  const index = useMemo(() => cast && new CastIndex(cast), [cast]);

  useEffect(() => {
    const el = host.current;
    if (!el || !cast) return;
    const opened = openTerm(el, {
      cols: cast.header.width,
      rows: cast.header.height,
      disableStdin: true,
      scrollback: 1000,
    });
    const term = opened.term;
    setSize({ cols: term.cols, rows: term.rows });
    const sized = term.onResize((s) => setSize({ cols: s.cols, rows: s.rows }));
    const fit = watchFit(term, el, 260);
    renderer.current = new CastRenderer(term, cast);
    setTime(0);
    setPlaying(false);
    setMatch(undefined);
    return () => {
      renderer.current = undefined;
      sized.dispose();
      fit.stop();
      opened.dispose();
    };
  }, [cast]);

  // Playback: every tick writes what is due at the cast time, `speed` times the wall clock.
  useEffect(() => {
    if (!playing || !props.visible) return;
    let last = performance.now();
    const timer = setInterval(() => {
      const r = renderer.current;
      if (!r) return;
      const now = performance.now();
      const t = r.time + ((now - last) / 1000) * speed;
      last = now;
      r.seek(t);
      setTime(r.time);
      if (r.time >= r.cast.duration) setPlaying(false);
    }, TICK_MS);
    return () => clearInterval(timer);
  }, [playing, speed, props.visible]);

  const seek = (t: number) => {
    const r = renderer.current;
    if (!r) return;
    r.seek(t);
    setTime(r.time);
  };
  const play = () => {
    const r = renderer.current;
    if (!r) return;
    // At the end, play starts over.
    if (r.time >= r.cast.duration) seek(0);
    setPlaying(true);
  };
  const find = (next: boolean) => {
    const r = renderer.current;
    if (!r || !index || !query) return;
    const from = next && match && match !== "none" ? match.offset + 1 : 0;
    const hit = index.find(query, from) ?? (next ? index.find(query, 0) : undefined);
    if (!hit) {
      setMatch("none");
      return;
    }
    setPlaying(false);
    r.seekEvent(hit.event);
    setTime(r.time);
    const of = index.count(query);
    // The ordinal of this match: matches before its offset, plus one.
    let n = 1;
    for (
      let h = index.find(query, 0);
      h && h.offset < hit.offset;
      h = index.find(query, h.offset + 1)
    ) {
      n++;
    }
    setMatch({ n, of, offset: hit.offset, t: r.time });
  };

  const duration = cast?.duration ?? 0;
  return (
    <section
      class="player"
      data-player={props.sessionId}
      aria-label={`Recording of ${props.sessionId}`}
    >
      <header>
        <h2>
          Recording of <span class="mono">{props.sessionId}</span>
        </h2>
        {size && (
          <span class="pty" data-cast-size={`${size.cols}x${size.rows}`}>
            {size.cols}×{size.rows}
          </span>
        )}
        {cast && (
          <span class="dim" data-cast-events={cast.events.length}>
            {cast.events.length} events
            {cast.skipped > 0 && (
              <span data-cast-skipped={cast.skipped}>· {cast.skipped} bad lines skipped</span>
            )}
            {cast.truncated && <span data-cast-truncated>· cut at the size limit</span>}
          </span>
        )}
        <button type="button" data-reload-recording onClick={() => setReloads((n) => n + 1)}>
          Reload
        </button>
        <button type="button" data-close-player onClick={props.onClose}>Close</button>
      </header>
      {error && <p class="error" role="alert" data-player-error>{error}</p>}
      {!cast && !error && <p class="empty">Loading the recording…</p>}
      <div class="controls" hidden={!cast}>
        {playing
          ? <button type="button" data-pause onClick={() => setPlaying(false)}>Pause</button>
          : <button type="button" data-play onClick={play}>Play</button>}
        <label>
          Speed{" "}
          <select
            data-speed
            value={String(speed)}
            onChange={(e) => setSpeed(Number((e.target as HTMLSelectElement).value))}
          >
            {SPEEDS.map((s) => <option key={s} value={String(s)}>{s}×</option>)}
          </select>
        </label>
        <input
          type="range"
          class="seek"
          data-seek
          aria-label="Position"
          min="0"
          max={String(duration)}
          step="0.01"
          value={String(time)}
          onInput={(e) => {
            setPlaying(false);
            seek(Number((e.target as HTMLInputElement).value));
          }}
        />
        <span class="mono" data-time={time.toFixed(2)} data-duration={duration.toFixed(2)}>
          {clock(time)} / {clock(duration)}
        </span>
      </div>
      <form
        class="search"
        hidden={!cast}
        onSubmit={(e) => {
          e.preventDefault();
          find(false);
        }}
      >
        <input
          type="search"
          data-search
          aria-label="Find in the output"
          placeholder="Find in the output"
          value={query}
          onInput={(e) => {
            setQuery((e.target as HTMLInputElement).value);
            setMatch(undefined);
          }}
        />
        <button type="submit" data-find disabled={!query}>Find</button>
        <button type="button" data-find-next disabled={!query} onClick={() => find(true)}>
          Next
        </button>
        {match === "none" && <span data-match="none">no match</span>}
        {match && match !== "none" && (
          <span data-match={`${match.n}/${match.of}`}>
            match {match.n} of {match.of} at {clock(match.t)}
          </span>
        )}
      </form>
      <div
        class="term"
        ref={host}
        data-replay-term
        data-cols={size?.cols}
        data-rows={size?.rows}
      />
    </section>
  );
}

/**
 * The screen a job left (or shows now, while it runs), rendered from the session's recording:
 * the events up to the job's end, with a full-screen program's last frame kept. `onFullScreen`
 * says whether the job used the alternate screen (its text output then runs frames together).
 */
export function JobScreen(props: {
  token: string;
  sessionId: string;
  startedAt: string;
  durationMs: number;
  active: boolean;
  /** Bumped to read the recording again (new output of a running job). */
  reload: number;
  onFullScreen: (v: boolean) => void;
}): preact.JSX.Element {
  const host = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | undefined>();
  const [size, setSize] = useState<{ cols: number; rows: number } | undefined>();
  const onFull = useRef(props.onFullScreen);
  onFull.current = props.onFullScreen;
  // A running job's duration grows with every list refresh: it reads to the end anyway.
  const until = props.active ? -1 : props.durationMs;
  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const abort = new AbortController();
    let dispose = () => {};
    loadCast(props.token, props.sessionId, abort.signal).then((cast) => {
      if (abort.signal.aborted) return;
      // The header's timestamp has whole seconds: the window starts a second early.
      const t0 = cast.header.timestamp ?? Date.parse(props.startedAt) / 1000;
      const start = Date.parse(props.startedAt) / 1000 - t0 - 1;
      const end = props.active ? Infinity : start + 1 + props.durationMs / 1000 + 0.25;
      const { writes, fullScreen } = jobScreen(cast, start, end);
      const opened = openTerm(el, {
        cols: cast.header.width,
        rows: cast.header.height,
        disableStdin: true,
        scrollback: 1000,
      });
      const sized = opened.term.onResize((s) => setSize({ cols: s.cols, rows: s.rows }));
      setSize({ cols: opened.term.cols, rows: opened.term.rows });
      const fit = watchFit(opened.term, el, 260);
      writeEvents(opened.term, writes);
      onFull.current(fullScreen);
      setError(undefined);
      dispose = () => {
        sized.dispose();
        fit.stop();
        opened.dispose();
      };
    }, (err) => {
      if (abort.signal.aborted) return;
      const status = (err as { status?: number }).status;
      setError(
        status === 404
          ? "No recording of this session (recording off, or the API is missing)"
          : (err as Error).message,
      );
    });
    return () => {
      abort.abort();
      dispose();
    };
  }, [props.sessionId, props.startedAt, until, props.reload]);
  return (
    <>
      {error && <p class="note" data-screen-error>{error}</p>}
      <div
        class="term"
        ref={host}
        data-job-screen
        data-cols={size?.cols}
        data-rows={size?.rows}
      />
    </>
  );
}
