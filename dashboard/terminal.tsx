/** @jsxImportSource preact */
/** @jsxRuntime automatic */
/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** One session as a live xterm.js terminal fed by `/api/sessions/:id/stream`. */
import { useEffect, useRef, useState } from "preact/hooks";
import type { Terminal } from "@xterm/xterm";
import { followStream, fromBase64, type StreamState } from "./sse.ts";
import { openTerm, watchFit } from "./xterm.ts";
import { SessionTarget } from "./servers.tsx";
import type { OperatorSession, PendingApproval, ToolError } from "../src/wire/mod.ts";

/** Page height kept free around a live terminal (the header, the card's own header). */
const FIT_RESERVE = 150;

/** What a card needs to decide a parked command of its session in place. */
export interface CardApprovals {
  /** The session's pending approvals. */
  pending: PendingApproval[];
  busy: Record<string, boolean>;
  onDecide: (id: string, verb: "approve" | "deny") => void;
}

/** "Waiting for approval apr_… — Approve / Deny" for each command parked in the session. */
export function ApprovalBanner(props: { approvals?: CardApprovals }): preact.JSX.Element | null {
  const a = props.approvals;
  if (!a || a.pending.length === 0) return null;
  return (
    <>
      {a.pending.map((p) => (
        <div
          class="approval-banner"
          role="alert"
          key={p.approval_id}
          data-approval-banner={p.approval_id}
        >
          <span class="what">
            Waiting for approval <code>{p.approval_id}</code>: <code>{p.command.join(" ")}</code>
          </span>
          <button
            type="button"
            class="approve"
            data-banner-approve
            disabled={!!a.busy[p.approval_id]}
            onClick={() => a.onDecide(p.approval_id, "approve")}
          >
            Approve
          </button>
          <button
            type="button"
            class="deny danger"
            data-banner-deny
            disabled={!!a.busy[p.approval_id]}
            onClick={() => a.onDecide(p.approval_id, "deny")}
          >
            Deny
          </button>
        </div>
      ))}
    </>
  );
}

/** The PTY's size, as the agent (or an operator's resize) set it. */
function PtySize(props: { session: OperatorSession }): preact.JSX.Element {
  const { cols, rows } = props.session;
  return (
    <span class="pty" data-pty-size={`${cols}x${rows}`} title="The session's PTY size">
      {cols}×{rows}
    </span>
  );
}

/** A session's card: a live terminal when followed, else a button to follow it. */
export function SessionCard(
  props: {
    session: OperatorSession;
    token: string;
    live: boolean;
    onFollow: () => void;
    /** Called after a takeover or release (to refresh the session list). */
    onLease?: () => void;
    /** Commands of this session parked for approval (a banner with Approve / Deny). */
    approvals?: CardApprovals;
  },
): preact.JSX.Element {
  const s = props.session;
  if (props.live) {
    return (
      <SessionTerminal
        session={s}
        token={props.token}
        onLease={props.onLease}
        approvals={props.approvals}
      />
    );
  }
  return (
    <section class="session paused" data-session={s.session_id}>
      <header>
        <span class="sid">{s.session_id}</span>
        <span class={`badge ${s.state}`}>{s.state}</span>
        <SessionTarget session={s} />
        <PtySize session={s} />
        <span class="cwd" title={s.cwd}>{s.shell} · {s.cwd}</span>
        <button type="button" class="follow" onClick={props.onFollow}>Follow live</button>
      </header>
      <ApprovalBanner approvals={props.approvals} />
    </section>
  );
}

/** The operator name the dashboard sends on takeover, input and release (the lease holder). */
export const OPERATOR = "dashboard";
/** Keystrokes typed within this window go out as one request. */
const BATCH_MS = 10;
/** Characters per input request: JSON escaping (≤ 6×) keeps the body under the 64 KiB limit. */
const MAX_CHUNK = 8 * 1024;

/**
 * One session's operator requests (takeover, input, release), strictly one at a time and in
 * order. Keystrokes are buffered for BATCH_MS and sent as one batch; keys typed while a batch
 * is in flight wait for it and go out together in the next.
 */
export class OperatorLink {
  #buf = "";
  #timer: ReturnType<typeof setTimeout> | undefined;
  #sending = false;
  #chain: Promise<unknown> = Promise.resolve();

  constructor(
    readonly sessionId: string,
    readonly token: string,
    /** A failed input batch (the keys it held and any queued after it are dropped). */
    readonly onInputError: (err: Error) => void,
  ) {}

  /** Serializes `fn` after every request already queued for this session. */
  #run<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#chain.then(fn);
    this.#chain = p.catch(() => {});
    return p;
  }

  async #post(verb: string, payload: unknown): Promise<unknown> {
    const res = await fetch(`/api/sessions/${encodeURIComponent(this.sessionId)}/${verb}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${this.token}`,
        "content-type": "application/json",
        "x-termada-operator": OPERATOR,
      },
      body: JSON.stringify(payload),
      cache: "no-store",
    });
    const body = await res.json().catch(() => ({}));
    if (!res.ok) {
      const e = (body as Partial<ToolError>).error;
      throw new Error(e?.message ?? `HTTP ${res.status}`);
    }
    return body;
  }

  /**
   * Hands the keyboard back while the page goes away (close, reload, navigation): a `keepalive`
   * request outlives the page. Buffered keys are dropped.
   */
  releaseOnExit(): void {
    this.clear();
    fetch(`/api/sessions/${encodeURIComponent(this.sessionId)}/release`, {
      method: "POST",
      keepalive: true,
      headers: {
        authorization: `Bearer ${this.token}`,
        "content-type": "application/json",
        "x-termada-operator": OPERATOR,
      },
      body: "{}",
    }).catch(() => {});
  }

  /** Holds back what agents read from the session's current job (lease holder only). */
  pauseOutput(): Promise<unknown> {
    return this.#run(() => this.#post("pause", {}));
  }

  /** Lets agents read the session's output again. */
  resumeOutput(): Promise<unknown> {
    return this.#run(() => this.#post("resume-output", {}));
  }

  takeover(): Promise<unknown> {
    return this.#run(() => this.#post("takeover", {}));
  }

  /** Sends what is still buffered, then hands the keyboard back. */
  async release(): Promise<unknown> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#buf) await this.#sendChunk();
    return await this.#run(() => this.#post("release", {}));
  }

  /** Queues keys typed into the terminal. */
  type(data: string): void {
    this.#buf += data;
    if (this.#timer === undefined && !this.#sending) {
      this.#timer = setTimeout(() => this.#flush(), BATCH_MS);
    }
  }

  /** Drops buffered keys (after an error or when the lease is gone). */
  clear(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#buf = "";
  }

  #take(): string {
    let n = Math.min(this.#buf.length, MAX_CHUNK);
    // Never split a surrogate pair between two batches.
    if (n < this.#buf.length) {
      const c = this.#buf.charCodeAt(n - 1);
      if (c >= 0xd800 && c <= 0xdbff) n--;
    }
    const chunk = this.#buf.slice(0, n);
    this.#buf = this.#buf.slice(n);
    return chunk;
  }

  #sendChunk(): Promise<unknown> {
    const data = this.#take();
    return this.#run(() => this.#post("input", { data }));
  }

  #flush(): void {
    this.#timer = undefined;
    if (this.#sending || !this.#buf) return;
    this.#sending = true;
    this.#sendChunk().then(
      () => {
        this.#sending = false;
        if (this.#buf && this.#timer === undefined) this.#flush();
      },
      (err) => {
        this.#sending = false;
        this.clear();
        this.onInputError(err as Error);
      },
    );
  }
}

function SessionTerminal(
  props: {
    session: OperatorSession;
    token: string;
    onLease?: () => void;
    approvals?: CardApprovals;
  },
): preact.JSX.Element {
  const host = useRef<HTMLDivElement>(null);
  const termRef = useRef<Terminal | undefined>(undefined);
  const releaseRef = useRef<HTMLButtonElement>(null);
  const [state, setState] = useState<StreamState>("connecting");
  // `held`: this page holds the session's keyboard lease; `pending`: a takeover/release in flight.
  const [held, setHeld] = useState(false);
  const heldRef = useRef(false);
  const [pending, setPending] = useState(false);
  // Agents' output held back (only while this page holds the keyboard; a release resumes it).
  const [outPaused, setOutPaused] = useState(false);
  const [opError, setOpError] = useState<string | undefined>();
  // The live xterm's size (exposed as data-cols / data-rows on the terminal element).
  const [termSize, setTermSize] = useState<{ cols: number; rows: number } | undefined>();
  const { session_id, cols, rows } = props.session;
  // The size the terminal opens with; later changes resize the live xterm (no reconnect).
  const sizeRef = useRef({ cols, rows });
  sizeRef.current = { cols, rows };

  const linkRef = useRef<OperatorLink | undefined>(undefined);
  const setHolding = (v: boolean) => {
    heldRef.current = v;
    setHeld(v);
    if (!v) setOutPaused(false);
    const term = termRef.current;
    if (term) term.options.disableStdin = !v;
  };

  useEffect(() => {
    const link = new OperatorLink(session_id, props.token, (err) => {
      setHolding(false);
      setOpError(`input: ${err.message}`);
    });
    linkRef.current = link;
    const onPageHide = () => {
      if (!heldRef.current) return;
      // If the page comes back from the back/forward cache it shows the session as released.
      setHolding(false);
      link.releaseOnExit();
    };
    addEventListener("pagehide", onPageHide);
    return () => {
      removeEventListener("pagehide", onPageHide);
      linkRef.current = undefined;
      // Leaving the view (or unfollowing) hands the keyboard back to agents.
      if (heldRef.current) {
        heldRef.current = false;
        link.release().catch(() => {});
      }
    };
  }, [session_id, props.token]);

  useEffect(() => {
    const el = host.current;
    if (!el) return;
    const opened = openTerm(el, {
      cols: Math.max(2, sizeRef.current.cols),
      rows: Math.max(1, sizeRef.current.rows),
      disableStdin: !heldRef.current,
      scrollback: 5000,
    });
    const term = opened.term;
    termRef.current = term;
    setTermSize({ cols: term.cols, rows: term.rows });
    const sized = term.onResize((sz) => setTermSize({ cols: sz.cols, rows: sz.rows }));
    // The PTY's grid, at the font that fills the card (refit on window and grid changes).
    const fit = watchFit(term, el, FIT_RESERVE);
    // While taken over, keys go to the session; Shift+Escape leaves the terminal (Tab is the
    // shell's) and moves focus to the Release button.
    term.attachCustomKeyEventHandler((e) => {
      if (e.type === "keydown" && e.key === "Escape" && e.shiftKey) {
        term.blur();
        releaseRef.current?.focus();
        return false;
      }
      return true;
    });
    const onData = term.onData((data) => {
      if (heldRef.current) linkRef.current?.type(data);
    });
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
      onData.dispose();
      sized.dispose();
      fit.stop();
      if (termRef.current === term) termRef.current = undefined;
      opened.dispose();
    };
  }, [session_id, props.token]);

  // `/api/sessions` reported a new size (an agent resized the session): follow it.
  useEffect(() => {
    const term = termRef.current;
    const c = Math.max(2, cols);
    const r = Math.max(1, rows);
    if (term && (term.cols !== c || term.rows !== r)) term.resize(c, r);
  }, [cols, rows]);

  const takeover = async () => {
    const link = linkRef.current;
    if (!link || pending) return;
    setPending(true);
    setOpError(undefined);
    try {
      await link.takeover();
      setHolding(true);
      termRef.current?.focus();
    } catch (err) {
      setOpError(`take over: ${(err as Error).message}`);
    } finally {
      setPending(false);
      props.onLease?.();
    }
  };
  const release = async () => {
    const link = linkRef.current;
    if (!link || pending) return;
    setPending(true);
    setOpError(undefined);
    // Stop sending keys at once; what was typed before goes out first.
    heldRef.current = false;
    if (termRef.current) termRef.current.options.disableStdin = true;
    try {
      await link.release();
      setHolding(false);
    } catch (err) {
      link.clear();
      setHolding(false);
      setOpError(`release: ${(err as Error).message}`);
    } finally {
      setPending(false);
      props.onLease?.();
    }
  };

  const toggleOutput = async () => {
    const link = linkRef.current;
    if (!link || pending || !heldRef.current) return;
    setPending(true);
    setOpError(undefined);
    const pause = !outPaused;
    try {
      await (pause ? link.pauseOutput() : link.resumeOutput());
      setOutPaused(pause);
    } catch (err) {
      setOpError(`${pause ? "pause" : "resume"} output: ${(err as Error).message}`);
    } finally {
      setPending(false);
      props.onLease?.();
    }
  };

  const s = props.session;
  return (
    <section
      class={`session ${held ? "held" : ""}`}
      data-session={s.session_id}
      data-held={String(held)}
      data-output-paused={String(held && outPaused)}
    >
      <header>
        <span class="sid">{s.session_id}</span>
        <span class={`badge ${s.state}`}>{s.state}</span>
        <SessionTarget session={s} />
        <PtySize session={s} />
        <span class="cwd" title={s.cwd}>{s.shell} · {s.cwd}</span>
        <span class={`stream ${state}`}>{state}</span>
        {held && (
          <button
            type="button"
            class="pause-output"
            data-pause-output
            aria-pressed={outPaused}
            disabled={pending}
            title={outPaused
              ? "Let agents read this session's output again"
              : "Hold back what agents read from this session's job until you resume or release"}
            onClick={toggleOutput}
          >
            {outPaused ? "Resume agent output" : "Pause agent output"}
          </button>
        )}
        {held
          ? (
            <button
              type="button"
              class="release"
              data-release
              ref={releaseRef}
              disabled={pending}
              onClick={release}
            >
              Release
            </button>
          )
          : (
            <button
              type="button"
              class="takeover"
              data-takeover
              disabled={pending}
              title="Type into this session; agents wait until you release it"
              onClick={takeover}
            >
              Take over
            </button>
          )}
      </header>
      <p class="kbd" role="status" aria-live="polite">
        {held
          ? (
            <span class="held-note" data-keyboard>
              You have the keyboard: agents wait until you release it (Shift+Esc leaves the
              terminal).{outPaused && " Agent output is paused."}
            </span>
          )
          : null}
        {opError ? <span class="op-error">{opError}</span> : null}
      </p>
      <ApprovalBanner approvals={props.approvals} />
      <div class="term" ref={host} data-cols={termSize?.cols} data-rows={termSize?.rows} />
    </section>
  );
}
