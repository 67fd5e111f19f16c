/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** One session as a live xterm.js terminal fed by `/api/sessions/:id/stream`. */
import { useEffect, useRef, useState } from "preact/hooks";
import { Terminal } from "@xterm/xterm";
import { followStream, fromBase64, type StreamState } from "./sse.ts";
import { mirrorStyles } from "./styles.ts";

export interface SessionInfo {
  session_id: string;
  owner: string;
  shell: string;
  cwd: string;
  state: string;
  cols: number;
  rows: number;
  created_at: string;
  current_job_id?: string;
}

/** A session's card: a live terminal when followed, else a button to follow it. */
export function SessionCard(
  props: { session: SessionInfo; token: string; live: boolean; onFollow: () => void },
): preact.JSX.Element {
  const s = props.session;
  if (props.live) return <SessionTerminal session={s} token={props.token} />;
  return (
    <section class="session paused" data-session={s.session_id}>
      <header>
        <span class="sid">{s.session_id}</span>
        <span class={`badge ${s.state}`}>{s.state}</span>
        <span class="cwd" title={s.cwd}>{s.shell} · {s.cwd}</span>
        <button type="button" class="follow" onClick={props.onFollow}>Follow live</button>
      </header>
    </section>
  );
}

function SessionTerminal(
  props: { session: SessionInfo; token: string },
): preact.JSX.Element {
  const host = useRef<HTMLDivElement>(null);
  const [state, setState] = useState<StreamState>("connecting");
  const { session_id, cols, rows } = props.session;

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const term = new Terminal({
      cols: Math.max(2, cols),
      rows: Math.max(1, rows),
      disableStdin: true,
      convertEol: false,
      scrollback: 5000,
      fontSize: 13,
      cursorBlink: false,
    });
    const unmirror = mirrorStyles(el);
    term.open(el);
    const abort = new AbortController();
    followStream(
      `/api/sessions/${encodeURIComponent(session_id)}/stream`,
      {
        token: props.token,
        endEvent: "end",
        onState: setState,
        // The daemon restarted or the ring moved past our cursor: start over from what it keeps.
        onReset: () => term.reset(),
        onMessage: (m) => {
          if (m.event === "data") term.write(fromBase64(m.data));
          else if (m.event === "gap") {
            term.write("\r\n\x1b[2m[… earlier output dropped …]\x1b[0m\r\n");
          }
        },
      },
      abort.signal,
    );
    return () => {
      abort.abort();
      term.dispose();
      unmirror();
    };
  }, [session_id, cols, rows, props.token]);

  const s = props.session;
  return (
    <section class="session" data-session={s.session_id}>
      <header>
        <span class="sid">{s.session_id}</span>
        <span class={`badge ${s.state}`}>{s.state}</span>
        <span class="cwd" title={s.cwd}>{s.shell} · {s.cwd}</span>
        <span class={`stream ${state}`}>{state}</span>
      </header>
      <div class="term" ref={host} />
    </section>
  );
}
