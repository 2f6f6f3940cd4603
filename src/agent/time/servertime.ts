import type { TimeReader } from '../../clock.js';

export interface ServerTimeOptions {
  /** Samples whose request took longer are dropped: the Date was stamped somewhere in too wide a window. */
  maxRttMs?: number | undefined;
  /** Samples older than this no longer constrain the estimate. */
  maxSampleAgeMs?: number;
}

export const DEFAULT_MAX_RTT_MS = 5000;
export const DEFAULT_MAX_SAMPLE_AGE_MS = 15 * 60_000;

/** The HTTP Date header is truncated to the second. */
const DATE_RESOLUTION_MS = 1000;
/** Rate difference allowed between our monotonic clock and the server's (crystal tolerance, generous). */
const MAX_DRIFT = 100e-6;
/** Enough to narrow to a few ms; more only costs memory. */
const MAX_SAMPLES = 64;

/** Bounds on (server wall − local mono), as seen by one response, and when it arrived. */
interface Sample {
  lo: number;
  hi: number;
  mono: number;
}

/**
 * The token service's wall clock, estimated from `Date` headers and anchored to monotonic time, so a
 * local wall-clock step does not make it stale. Each sample bounds the offset (server wall − mono);
 * intersecting the bounds of recent samples taken at different sub-second phases narrows the estimate
 * well below the header's one-second resolution.
 */
export class ServerTime {
  private readonly clock: TimeReader;
  private readonly maxRttMs: number;
  private readonly maxSampleAgeMs: number;
  private samples: Sample[] = [];

  constructor(clock: TimeReader, opts: ServerTimeOptions = {}) {
    this.clock = clock;
    this.maxRttMs = opts.maxRttMs ?? DEFAULT_MAX_RTT_MS;
    this.maxSampleAgeMs = opts.maxSampleAgeMs ?? DEFAULT_MAX_SAMPLE_AGE_MS;
  }

  /**
   * Records a sample from a response's Date header; monoSent/monoReceived bracket the request.
   * Returns false when dropped (no/invalid header, RTT negative or too long).
   */
  addSample(dateHeader: string | undefined, monoSent: number, monoReceived: number): boolean {
    if (dateHeader === undefined) return false;
    const serverMs = Date.parse(dateHeader);
    const rtt = monoReceived - monoSent;
    if (!Number.isFinite(serverMs) || !(rtt >= 0) || rtt > this.maxRttMs) return false;
    // The server stamped the Date at some mono instant in [sent, received]; its true time was in [D, D + 1 s).
    const sample = { lo: serverMs - monoReceived, hi: serverMs + DATE_RESOLUTION_MS - monoSent, mono: monoReceived };
    const current = this.interval();
    // Disjoint bounds mean the server's clock stepped: older samples describe a clock that no longer exists.
    if (current && (sample.lo > current.hi || sample.hi < current.lo)) this.samples = [];
    this.samples.push(sample);
    if (this.samples.length > MAX_SAMPLES) this.samples.shift();
    return true;
  }

  /** Best estimate of the server's wall clock now (integer ms), or undefined without a usable sample. */
  now(): number | undefined {
    const mono = this.clock.monoNow();
    const iv = this.interval();
    return iv && Math.round(mono + (iv.lo + iv.hi) / 2);
  }

  /** Estimated server − local wall offset in ms, undefined without a sample. */
  offsetMs(): number | undefined {
    const server = this.now();
    return server === undefined ? undefined : server - this.clock.wallNow();
  }

  /** Uncertainty (± ms) of now(), undefined without a sample. */
  errorMs(): number | undefined {
    const iv = this.interval();
    return iv && (iv.hi - iv.lo) / 2;
  }

  /** mono ms of the newest accepted sample still in use. */
  lastSampleMono(): number | undefined {
    this.prune();
    return this.samples.at(-1)?.mono;
  }

  clear(): void {
    this.samples = [];
  }

  private prune(): void {
    const oldest = this.clock.monoNow() - this.maxSampleAgeMs;
    this.samples = this.samples.filter((s) => s.mono >= oldest);
  }

  /** Intersection of the retained samples' bounds, each widened by the drift since it was taken. */
  private interval(): { lo: number; hi: number } | undefined {
    this.prune();
    if (this.samples.length === 0) return undefined;
    const mono = this.clock.monoNow();
    let lo = -Infinity;
    let hi = Infinity;
    for (const s of this.samples) {
      const drift = Math.max(0, mono - s.mono) * MAX_DRIFT;
      lo = Math.max(lo, s.lo - drift);
      hi = Math.min(hi, s.hi + drift);
    }
    return { lo, hi };
  }
}
