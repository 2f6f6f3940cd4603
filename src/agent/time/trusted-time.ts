import type { Logger } from 'pino';
import { messageOf } from '../../protocol/errors.js';
import type { TimeReader } from '../../clock.js';
import type { ServerTime } from './servertime.js';
import { chooseSigningTime, FRESH_SAMPLE_MS, needsSample, type SigningTime } from './signingtime.js';
import type { TimeSyncResult } from './timesync.js';

export interface TrustedTimeOptions {
  clock: TimeReader;
  serverTime: ServerTime;
  /** The local time-sync verdict; called at most once per its TTL, `first` for the first (see checkTimeSync's toolsAtOnce). */
  checkTimeSync: (first: boolean) => Promise<TimeSyncResult>;
  /** Fetches one server time sample (the cloud client's HEAD); rejects when none could be had. */
  sampleServerTime: () => Promise<void>;
  log: Logger;
  /** A background sample arrived: expiries that could not be judged may be judged now. */
  onSampled?: () => void;
}

/** What status.json says about the clock. */
export interface ClockStatus {
  trusted: boolean;
  verdict: TimeSyncResult['verdict'] | 'pending';
  source: string;
  offsetMs: number | undefined;
}

/**
 * How long a time-sync verdict holds. Unsynced is re-checked each minute (NTP usually syncs soon after
 * boot); synced or no source at all rarely change, and each check spawns chronyc (and timedatectl
 * where chrony does not answer).
 */
export const VERDICT_TTL_MS: Readonly<Record<TimeSyncResult['verdict'], number>> = {
  unsynced: 60_000,
  synced: 5 * 60_000,
  unknown: 10 * 60_000,
};
/** Pace of background server time samples while they fail (network down). */
export const SAMPLE_RETRY_MS = 30_000;

const PENDING: TimeSyncResult = { verdict: 'unknown', source: 'none', detail: 'not checked yet' };

/**
 * The time the agent may judge tokens and sign by (DESIGN §4): the local time-sync verdict, cached
 * for its TTL, combined with server time sampled from Date headers, fetched in the background when
 * the local clock cannot be trusted. Reads time only from its TimeReader; sets no timer.
 */
export class TrustedTime {
  readonly #clock: TimeReader;
  readonly #checkTimeSync: TrustedTimeOptions['checkTimeSync'];
  /** Server time: the samples had so far, and how to fetch one more. */
  readonly #server: { time: ServerTime; sample: () => Promise<void> };
  readonly #log: Logger;
  readonly #onSampled: TrustedTimeOptions['onSampled'];
  #verdict: TimeSyncResult | undefined;
  #verdictAtMono = Number.NEGATIVE_INFINITY;
  #sampling = false;
  #sampleTriedAtMono = Number.NEGATIVE_INFINITY;

  constructor(opts: TrustedTimeOptions) {
    this.#clock = opts.clock;
    this.#checkTimeSync = opts.checkTimeSync;
    this.#server = { time: opts.serverTime, sample: opts.sampleServerTime };
    this.#log = opts.log;
    this.#onSampled = opts.onSampled;
  }

  /** Whether a verdict was had yet: before the first, time can only be judged by the local clock. */
  get checked(): boolean {
    return this.#verdict !== undefined;
  }

  /** The local verdict, asked again once the last one's TTL ran out. */
  async verdict(): Promise<TimeSyncResult> {
    const mono = this.#clock.monoNow();
    if (!this.#verdict || mono - this.#verdictAtMono >= VERDICT_TTL_MS[this.#verdict.verdict]) {
      this.#verdict = await this.#checkTimeSync(this.#verdict === undefined);
      this.#verdictAtMono = mono;
    }
    return this.#verdict;
  }

  /** The server's wall clock now by the last verdict and the samples; undefined when no time can be trusted. */
  now(): number | undefined {
    const chosen = this.#choose();
    return chosen.ok ? chosen.ms : undefined;
  }

  /** Server time from the samples alone, whatever the local verdict (what a refused timestamp is retried with). */
  sampledNow(): number | undefined {
    return this.#server.time.now();
  }

  /** The timestamp to sign with; server time is sampled first when the clock is not synced and no fresh sample exists. */
  async forSigning(): Promise<SigningTime> {
    const verdict = await this.verdict();
    if (needsSample(verdict, this.#server.time, this.#clock, FRESH_SAMPLE_MS)) await this.#server.sample();
    return this.#choose();
  }

  /** One server time sample, waited for (nothing else can be done without it). */
  sample(): Promise<void> {
    return this.#server.sample();
  }

  /** Whether sampleIfStale() would fetch a sample now. */
  get stale(): boolean {
    if (!needsSample(this.#verdict ?? PENDING, this.#server.time, this.#clock, FRESH_SAMPLE_MS)) return false;
    return !this.#sampling && this.#clock.monoNow() - this.#sampleTriedAtMono >= SAMPLE_RETRY_MS;
  }

  /**
   * Without a trusted clock a cached token cannot be judged: fetch server time beside the caller's
   * work, at most once per SAMPLE_RETRY_MS while samples fail.
   */
  sampleIfStale(): void {
    if (!this.stale) return;
    this.#sampling = true;
    this.#sampleTriedAtMono = this.#clock.monoNow();
    this.#server.sample().then(
      () => {
        this.#sampling = false;
        this.#onSampled?.();
      },
      (err: unknown) => {
        this.#sampling = false;
        this.#log.debug({ err: messageOf(err) }, 'server time sample failed');
      },
    );
  }

  status(): ClockStatus {
    const v = this.#verdict;
    // The source is whatever signing would use now: the synced local source, or the server.
    const chosen = this.#choose();
    return {
      trusted: chosen.ok,
      verdict: v ? v.verdict : 'pending',
      source: chosen.ok && chosen.source === 'server' ? 'server' : (v?.source ?? 'none'),
      offsetMs: this.#server.time.offsetMs(),
    };
  }

  #choose(): SigningTime {
    return chooseSigningTime(this.#verdict ?? PENDING, this.#server.time, this.#clock);
  }
}
