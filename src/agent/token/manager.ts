import type { Logger } from 'pino';
import { BotlinkError, toBotlinkError } from '../../protocol/errors.js';
import type { Identity } from '../../protocol/wire.js';
import { CloudError, type CloudClient } from '../cloud/client.js';
import { resetBackoff, retriesOnSchedule, retryAfter, TOKEN_BACKOFF, type BackoffSettings, type BackoffState } from './backoff.js';
import type { Clock } from '../time/clock.js';
import { acquireLock, type HeldLock } from '../store/lock.js';
import { PairSaver, SAVE_BACKOFF } from './pair-saver.js';
import { accessUsableFor, decideNextAction, DEFAULT_POLICY, type PolicySettings, type TokenFacts } from './policy.js';
import type { ServerTime } from '../time/servertime.js';
import { signedGetToken } from './signflow.js';
import { chooseSigningTime, FRESH_SAMPLE_MS, needsSample } from '../time/signingtime.js';
import type { StoreIdentity, TokenPair, TokenStore } from '../store/token-store.js';
import type { TimeSyncResult } from '../time/timesync.js';

export interface TokenManagerOptions {
  identity: Identity;
  baseUrl: string;
  accessKeyId: string;
  store: TokenStore;
  api: CloudClient;
  serverTime: ServerTime;
  clock: Clock;
  /** The local time-sync verdict; called at most once per `verdictTtlMs`. */
  checkTimeSync: () => Promise<TimeSyncResult>;
  log: Logger;
  policy?: PolicySettings;
  backoff?: BackoffSettings;
  /** Pace of saving again a pair the store refused (full or read-only disk). */
  saveBackoff?: BackoffSettings;
  random?: () => number;
  /** Called on every change worth showing in status.json. */
  onChange?: () => void;
}

export interface TokenSnapshot {
  accessExpiresAt: number | undefined;
  refreshExpiresAt: number | undefined;
  clock: { trusted: boolean; verdict: TimeSyncResult['verdict'] | 'pending'; source: string; offsetMs: number | undefined };
  lastError: { code: string; retry: string; message: string } | undefined;
  renewals: { signed: number; refreshed: number };
  /** Whether the pair held is on disk; lastError says why not. */
  store: { persisted: boolean; lastError: string | null };
}

interface Waiter {
  minLeftMs: number;
  failFast: boolean;
  resolve(token: string): void;
  reject(err: unknown): void;
}

/**
 * How long a time-sync verdict holds. Unsynced is re-checked each minute (NTP usually syncs soon after
 * boot); synced or no source at all rarely change, and each check spawns chronyc and timedatectl.
 */
const VERDICT_TTL_MS: Readonly<Record<TimeSyncResult['verdict'], number>> = { unsynced: 60_000, synced: 5 * 60_000, unknown: 10 * 60_000 };
/** Pace of server time samples while they fail (network down). */
const SAMPLE_RETRY_MS = 30_000;
const LOCK_POLL_MS = 250;

/**
 * Holds the access token: loads it from the store, decides with the pure policy when to refresh or
 * sign, performs that (single-flight, under the stateDir's cross-process renew lock) and hands tokens
 * to callers of current(). A pair the server issued is kept and used even when the store cannot save
 * it (full or read-only disk); saving is retried until it succeeds.
 */
export class TokenManager {
  readonly #o: TokenManagerOptions;
  readonly #policy: PolicySettings;
  readonly #storeIdentity: StoreIdentity;
  readonly #saver: PairSaver;
  #pair: TokenPair | undefined;
  #facts: Omit<TokenFacts, 'access' | 'refresh'> = { accessRejected: false, refreshFailed: false, jitter: 0 };
  #backoff: BackoffState = resetBackoff();
  #verdict: TimeSyncResult | undefined;
  #verdictAtMono = Number.NEGATIVE_INFINITY;
  #waiters: Waiter[] = [];
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #lastError: BotlinkError | undefined;
  #renewals = { signed: 0, refreshed: 0 };
  #sampling = false;
  #sampleTriedAtMono = Number.NEGATIVE_INFINITY;

  constructor(opts: TokenManagerOptions) {
    this.#o = opts;
    this.#policy = opts.policy ?? DEFAULT_POLICY;
    this.#storeIdentity = { baseUrl: opts.baseUrl, accessKeyId: opts.accessKeyId, kind: opts.identity.kind, id: opts.identity.id };
    this.#saver = new PairSaver({
      store: opts.store,
      identity: this.#storeIdentity,
      clock: opts.clock,
      log: opts.log,
      backoff: opts.saveBackoff ?? SAVE_BACKOFF,
      random: () => this.#random(),
      wake: () => this.#kick(),
      onChange: () => this.#o.onChange?.(),
    });
    this.#syncWithStore();
    this.#facts.jitter = this.#random() * 2 - 1;
  }

  /** Starts the background loop that keeps the token fresh. */
  start(): void {
    this.#stopped = false;
    this.#kick();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#saver.stop();
    const err = new BotlinkError('ERR_STOPPED', 'token manager stopped', 'fatal');
    for (const w of this.#waiters.splice(0)) w.reject(err);
  }

  /**
   * Resolves to an access token with at least `minLeftMs` of life (judged by trusted or server time).
   * Concurrent callers share one renewal. With `failFast`, a failure that retrying will not fix soon
   * rejects instead of waiting.
   */
  current(opts: { minLeftMs?: number; failFast?: boolean; signal?: AbortSignal } = {}): Promise<string> {
    const minLeftMs = opts.minLeftMs ?? 0;
    const ready = this.#usableToken(minLeftMs);
    if (ready !== undefined) return Promise.resolve(ready);
    return new Promise<string>((resolve, reject) => {
      const waiter: Waiter = { minLeftMs, failFast: opts.failFast ?? false, resolve, reject };
      this.#waiters.push(waiter);
      opts.signal?.addEventListener(
        'abort',
        () => {
          this.#waiters = this.#waiters.filter((w) => w !== waiter);
          reject(this.#lastError ?? opts.signal?.reason);
        },
        { once: true },
      );
      this.#kick();
    });
  }

  /** The server refused this access token (Unauthorized): renew before handing out another. */
  invalidate(token?: string): void {
    if (token !== undefined && token !== this.#pair?.accessToken) return;
    this.#facts.accessRejected = true;
    this.#kick();
  }

  snapshot(): TokenSnapshot {
    const v = this.#verdict;
    // The source is whatever signing would use now: the synced local source, or the server.
    const chosen = chooseSigningTime(v ?? PENDING, this.#o.serverTime, this.#o.clock);
    return {
      accessExpiresAt: this.#pair?.accessExpiresAt,
      refreshExpiresAt: this.#pair?.refreshExpiresAt,
      clock: {
        trusted: chosen.ok,
        verdict: v ? v.verdict : 'pending',
        source: chosen.ok && chosen.source === 'server' ? 'server' : (v?.source ?? 'none'),
        offsetMs: this.#o.serverTime.offsetMs(),
      },
      lastError: this.#lastError && { code: this.#lastError.code, retry: this.#lastError.retry, message: this.#lastError.message },
      renewals: { ...this.#renewals },
      store: this.#saver.status(),
    };
  }

  // ---- the loop ----

  #kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#step();
      } catch (err) {
        this.#fail(err);
      }
    } while (this.#again && !this.#stopped);
  }

  async #step(): Promise<void> {
    if (this.#saver.due) await this.#saveUnderLock();
    const verdict = await this.#timeVerdict();
    if (this.#pair && needsSample(verdict, this.#o.serverTime, this.#o.clock, FRESH_SAMPLE_MS)) this.#sampleInBackground();
    const now = { mono: this.#o.clock.monoNow(), serverTime: this.#serverNow(verdict) };
    const facts = this.#currentFacts();
    let decision = decideNextAction(facts, now, this.#policy);
    if (decision.action === 'use' && this.#waiters.some((w) => !accessUsableFor(facts, now, this.#cappedLeft(w.minLeftMs)))) {
      // A caller needs more life than the token has left: renew ahead of the policy's schedule.
      decision = decideNextAction({ ...facts, accessRejected: true }, now, this.#policy);
    }
    switch (decision.action) {
      case 'use':
        this.#settleWaiters();
        this.#schedule(decision.wakeInMs);
        return;
      case 'backoff':
        this.#schedule(decision.wakeInMs);
        return;
      case 'wait-clock':
        await this.#o.api.sampleServerTime();
        this.#again = true;
        return;
      case 'refresh':
      case 'sign':
        await this.#underRenewLock(decision.action);
        this.#again = true;
        return;
    }
  }

  async #underRenewLock(action: 'refresh' | 'sign'): Promise<void> {
    const before = this.#pair;
    const lock = await this.#renewLock();
    try {
      if (this.#stopped) return;
      this.#syncWithStore();
      // Another process renewed while we waited for the lock: decide again with its pair.
      if (this.#pair?.accessToken !== before?.accessToken) return;
      if (action === 'refresh') await this.#refresh();
      else await this.#sign();
    } finally {
      await lock?.release();
    }
  }

  /** Saves the held pair under the renew lock, unless another process saved a newer one meanwhile. */
  async #saveUnderLock(): Promise<void> {
    const lock = await this.#renewLock();
    try {
      if (this.#stopped) return;
      this.#syncWithStore();
      if (this.#pair && this.#saver.unsaved) this.#saver.save(this.#pair);
    } finally {
      await lock?.release();
    }
  }

  /**
   * The stateDir's renew lock, waited for while another botlink process renews. Undefined when its
   * name cannot be used (squatted by a process that cannot prove it knows the key): renewing matters more.
   */
  async #renewLock(): Promise<HeldLock | undefined> {
    for (;;) {
      const claim = await acquireLock(this.#o.store.requireLockKey(), 'renew');
      if (claim.ok) return claim.lock;
      if (claim.probe.state === 'unusable') {
        this.#o.log.error({ code: 'ERR_LOCK_UNUSABLE' }, `renew lock unavailable (${claim.probe.detail}): renewing without it`);
        return undefined;
      }
      if (this.#stopped) return undefined;
      await delay(LOCK_POLL_MS);
    }
  }

  async #refresh(): Promise<void> {
    const pair = this.#pair;
    if (!pair) return;
    try {
      const res = await this.#o.api.refreshToken(this.#o.identity, pair.refreshToken);
      // Refresh works without trusted time; then the expiry is only a best guess on the local clock.
      const trusted = this.#serverNow(await this.#timeVerdict());
      const base = trusted ?? this.#o.clock.wallNow();
      const accessExpiresAt = base + res.expireIn * 1000;
      this.#pair = { ...pair, accessToken: res.accessToken, accessExpiresAt, accessIssuedAt: base };
      this.#renewals.refreshed++;
      this.#succeeded('refreshed', trusted);
    } catch (err) {
      if (err instanceof CloudError && err.code === 'ERR_REFRESH_REFUSED') {
        this.#o.log.warn({ code: err.serviceCode }, 'refresh token refused; signing again');
        this.#facts.refreshFailed = true;
        return;
      }
      throw err;
    }
  }

  async #sign(): Promise<void> {
    const res = await signedGetToken(this.#o, this.#o.identity, await this.#timeVerdict());
    const trusted = this.#serverNow(await this.#timeVerdict());
    const base = trusted ?? this.#o.clock.wallNow();
    const pair: TokenPair = {
      accessToken: res.accessToken,
      accessExpiresAt: base + res.expireIn * 1000,
      refreshToken: res.refreshToken,
      refreshExpiresAt: base + res.refreshExpireIn * 1000,
      issuedAt: base,
      accessIssuedAt: base,
    };
    this.#pair = pair;
    this.#facts.refreshFailed = false;
    this.#facts.jitter = this.#random() * 2 - 1;
    this.#renewals.signed++;
    this.#succeeded('signed', trusted);
  }

  /**
   * After #pair took the new token (it is used from now on, saved or not). `serverNow` is undefined
   * when no trusted time was known: an untrusted clock must never become the floor.
   */
  #succeeded(what: string, serverNow: number | undefined): void {
    this.#facts.accessRejected = false;
    this.#facts.retryAtMono = undefined;
    this.#backoff = resetBackoff();
    this.#lastError = undefined;
    this.#o.log.info({ accessExpiresAt: this.#pair?.accessExpiresAt, refreshExpiresAt: this.#pair?.refreshExpiresAt }, `token ${what}`);
    if (this.#pair) this.#saver.save(this.#pair, serverNow === undefined ? undefined : Math.round(serverNow));
    this.#o.onChange?.();
  }

  #fail(err: unknown): void {
    const error = toBotlinkError(err, 'ERR_INTERNAL');
    const next = retryAfter(error.retry, this.#backoff, this.#o.backoff ?? TOKEN_BACKOFF, this.#random());
    this.#backoff = next.state;
    const waitMs = next.delayMs;
    if (!retriesOnSchedule(error.retry)) {
      for (const w of this.#waiters.filter((x) => x.failFast)) w.reject(error);
      this.#waiters = this.#waiters.filter((x) => !x.failFast);
    }
    const level = error.retry === 'retry-backoff' ? 'warn' : 'error';
    this.#o.log[level]({ code: error.code, retry: error.retry, retryInMs: Math.round(waitMs) }, error.message);
    this.#lastError = error;
    this.#facts.retryAtMono = this.#o.clock.monoNow() + waitMs;
    this.#again = false;
    this.#schedule(waitMs);
    this.#o.onChange?.();
  }

  // ---- helpers ----

  /** Without a trusted clock a cached token cannot be judged: fetch server time beside the decision, then decide again. */
  #sampleInBackground(): void {
    const mono = this.#o.clock.monoNow();
    if (this.#sampling || mono - this.#sampleTriedAtMono < SAMPLE_RETRY_MS) return;
    this.#sampling = true;
    this.#sampleTriedAtMono = mono;
    this.#o.api.sampleServerTime().then(
      () => {
        this.#sampling = false;
        this.#o.onChange?.();
        this.#kick();
      },
      (err: unknown) => {
        this.#sampling = false;
        this.#o.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'server time sample failed');
      },
    );
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer);
    if (this.#stopped) return;
    this.#timer = setTimeout(() => this.#kick(), Math.max(0, ms));
    this.#timer.unref();
  }

  #settleWaiters(): void {
    const keep: Waiter[] = [];
    for (const w of this.#waiters) {
      const token = this.#usableToken(w.minLeftMs);
      if (token !== undefined) w.resolve(token);
      else keep.push(w);
    }
    this.#waiters = keep;
  }

  #usableToken(minLeftMs: number): string | undefined {
    if (!this.#pair || this.#facts.accessRejected || this.#verdict === undefined) return undefined;
    const now = { mono: this.#o.clock.monoNow(), serverTime: this.#serverNow(this.#verdict) };
    return accessUsableFor(this.#currentFacts(), now, this.#cappedLeft(minLeftMs)) ? this.#pair.accessToken : undefined;
  }

  /** A caller cannot ask for more than half a token's lifetime, or a fresh token would never do. */
  #cappedLeft(minLeftMs: number): number {
    const lifetime = this.#currentFacts().access?.lifetimeMs;
    return lifetime === undefined ? minLeftMs : Math.min(minLeftMs, lifetime / 2);
  }

  #currentFacts(): TokenFacts {
    const p = this.#pair;
    if (!p) return { ...this.#facts };
    const refreshLifetimeMs = p.refreshExpiresAt - p.issuedAt;
    return {
      ...this.#facts,
      access: { expiresAt: p.accessExpiresAt, lifetimeMs: p.accessExpiresAt - (p.accessIssuedAt ?? p.issuedAt) },
      refresh: { expiresAt: p.refreshExpiresAt, lifetimeMs: refreshLifetimeMs },
    };
  }

  #serverNow(verdict: TimeSyncResult): number | undefined {
    const chosen = chooseSigningTime(verdict, this.#o.serverTime, this.#o.clock);
    return chosen.ok ? chosen.ms : undefined;
  }

  async #timeVerdict(): Promise<TimeSyncResult> {
    const mono = this.#o.clock.monoNow();
    if (!this.#verdict || mono - this.#verdictAtMono >= VERDICT_TTL_MS[this.#verdict.verdict]) {
      this.#verdict = await this.#o.checkTimeSync();
      this.#verdictAtMono = mono;
    }
    return this.#verdict;
  }

  /** Takes the store's pair, unless the one held is newer and not saved yet (or the store cannot be read). */
  #syncWithStore(): void {
    let stored: TokenPair | undefined;
    try {
      stored = this.#o.store.loadPair(this.#storeIdentity);
    } catch (err) {
      this.#o.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'cannot read the token store: going on with the token held');
      return;
    }
    if (this.#saver.unsaved && this.#pair && !(stored && issuedAt(stored) > issuedAt(this.#pair))) return;
    if (stored?.accessToken !== this.#pair?.accessToken) this.#facts.accessRejected = false;
    this.#pair = stored;
    this.#saver.settled();
  }

  #random(): number {
    return (this.#o.random ?? Math.random)();
  }
}

/** When the pair's current access token was issued: of two pairs, the later one is kept. */
function issuedAt(pair: TokenPair): number {
  return pair.accessIssuedAt ?? pair.issuedAt;
}

const PENDING: TimeSyncResult = { verdict: 'unknown', source: 'none', detail: 'not checked yet' };

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
