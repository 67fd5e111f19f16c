/**
 * The event bus: what happened, in order, for live views (the dashboard's activity feed,
 * waiters in other layers). Each event gets an increasing id; the last `capacity` events are
 * kept so a client that reconnects with `Last-Event-ID` gets what it missed, or a `resync` when
 * its id fell out of the window. Subscribers are called synchronously and must be cheap.
 */
export interface BusEvent {
  id: number;
  time: string;
  type: string;
  data: Record<string, unknown>;
}

export type BusReplay =
  | { kind: "events"; events: BusEvent[] }
  /** The requested id is older than the kept window: the client must reload its state. */
  | { kind: "resync"; events: BusEvent[] };

export class EventBus {
  #ring: BusEvent[] = [];
  #next = 1;
  #capacity: number;
  #listeners = new Set<(e: BusEvent) => void>();

  /** `capacity`: events kept for replay (default 1000). */
  constructor(capacity = 1000) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("Bad bus capacity");
    this.#capacity = capacity;
  }

  publish(type: string, data: Record<string, unknown> = {}): BusEvent {
    const e: BusEvent = { id: this.#next++, time: new Date().toISOString(), type, data };
    this.#ring.push(e);
    if (this.#ring.length > this.#capacity) this.#ring.shift();
    for (const l of [...this.#listeners]) {
      try {
        l(e);
      } catch {
        // a broken subscriber must not stop the others (it is the subscriber's bug to log)
      }
    }
    return e;
  }

  /** Events after `afterId` (all kept ones when undefined). */
  since(afterId?: number): BusReplay {
    if (afterId === undefined) return { kind: "events", events: [...this.#ring] };
    const first = this.#ring[0]?.id ?? this.#next;
    if (afterId < first - 1) return { kind: "resync", events: [...this.#ring] };
    return { kind: "events", events: this.#ring.filter((e) => e.id > afterId) };
  }

  get lastId(): number {
    return this.#next - 1;
  }

  subscribe(listener: (e: BusEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
