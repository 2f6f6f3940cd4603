import { BotlinkError, messageOf } from '../../protocol/errors.js';
import { retriesOnSchedule, TOKEN_BACKOFF } from './backoff.js';
import type { Cancel } from '../../clock.js';
import { StepLoop } from './step-loop.js';
import { PairSaver, SAVE_BACKOFF } from './pair-saver.js';
import { issuedAt, pairFacts, refreshExpiresAt } from './pairs.js';
import { underRenewLock, type RenewLockDeps } from './renew-lock.js';
import { FailureRun } from './failures.js';
import type { HeldToken, TokenManagerOptions, TokenSnapshot } from './manager-types.js';
import type { RenewContext, Renewed, TokenSource } from './source.js';
import { Waiters } from './waiters.js';
import { accessUsableFor, decideNextAction, DEFAULT_POLICY, renewalThresholdMs, type PolicySettings, type TokenFacts } from './policy.js';
import { type StoreIdentity, storeIdentity, type TokenPair } from '../store/token-store.js';
import { TrustedTime } from '../time/trusted-time.js';

/** How long a background server time sample waits (see #sampleSoon). */
export const BACKGROUND_SAMPLE_DELAY_MS = 1000;

/**
 * Holds the access token: loads it from the store, decides with the pure policy when to refresh or
 * sign, performs that (single-flight, under the stateDir's cross-process renew lock) and hands tokens
 * to callers of current(). A pair the server issued is kept and used even when the store cannot save
 * it (full or read-only disk); saving is retried until it succeeds.
 */
export class TokenManager {
  readonly #source: TokenSource;
  readonly #identity: TokenManagerOptions['identity'];
  readonly #failures: FailureRun;
  readonly #clock: TokenManagerOptions['clock'];
  readonly #log: TokenManagerOptions['log'];
  readonly #onChange: TokenManagerOptions['onChange'];
  readonly #random: TokenManagerOptions['random'];
  readonly #store: TokenManagerOptions['store'];
  readonly #policy: PolicySettings;
  readonly #storeIdentity: StoreIdentity;
  readonly #saver: PairSaver;
  readonly #time: TrustedTime;
  readonly #lockDeps: RenewLockDeps;
  #pair: TokenPair | undefined;
  #facts: Omit<TokenFacts, 'access' | 'refresh' | 'neededLeftMs'> = { accessRejected: false, refreshFailed: false, jitter: 0 };
  readonly #waiters = new Waiters();
  readonly #loop: StepLoop;
  #cancelSample: Cancel | undefined;
  #renewals = { signed: 0, refreshed: 0 };

  constructor(opts: TokenManagerOptions) {
    this.#failures = new FailureRun(opts.backoff ?? TOKEN_BACKOFF, opts.random, opts.log);
    this.#clock = opts.clock;
    this.#log = opts.log;
    this.#onChange = opts.onChange;
    this.#random = opts.random;
    this.#store = opts.store;
    this.#policy = opts.policy ?? DEFAULT_POLICY;
    this.#storeIdentity = storeIdentity(opts, opts.identity);
    this.#saver = new PairSaver({
      store: opts.store,
      identity: this.#storeIdentity,
      clock: opts.clock,
      log: opts.log,
      backoff: opts.saveBackoff ?? SAVE_BACKOFF,
      random: opts.random,
      wake: () => this.#loop.kick(),
      onChange: () => this.#onChange?.(),
    });
    this.#time = new TrustedTime({
      clock: opts.clock,
      serverTime: opts.serverTime,
      checkTimeSync: opts.checkTimeSync,
      sampleServerTime: () => opts.source.sampleServerTime(),
      log: opts.log,
      onSampled: () => {
        this.#onChange?.();
        this.#loop.kick();
      },
    });
    this.#loop = new StepLoop(
      opts.clock,
      () => this.#step(),
      (err) => this.#fail(err),
    );
    this.#lockDeps = { store: opts.store, clock: opts.clock, log: opts.log, stopped: () => this.#loop.stopped };
    this.#source = opts.source;
    this.#identity = opts.identity;
    this.#syncWithStore();
    this.#facts.jitter = opts.random() * 2 - 1;
  }

  /** Starts the background loop that keeps the token fresh. */
  start(): void {
    this.#loop.start();
  }

  stop(): void {
    this.#loop.stop();
    this.#cancelSample?.();
    this.#saver.stop();
    const err = new BotlinkError('ERR_STOPPED', 'token manager stopped', 'fatal');
    this.#waiters.reject(err, true);
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
    const abortReason = (): unknown => this.#failures.last ?? opts.signal?.reason;
    const waiting = this.#waiters.add({ minLeftMs, failFast: opts.failFast ?? false, signal: opts.signal }, abortReason);
    this.#loop.kick();
    return waiting;
  }

  /** The access token held now if it has `minLeftMs` of life left (the loop renews long before that); never waits. */
  peek(minLeftMs = 0): HeldToken | undefined {
    const token = this.#usableToken(minLeftMs);
    return token !== undefined && this.#pair ? { token, expiresAt: this.#pair.accessExpiresAt } : undefined;
  }

  /** The server refused this access token (Unauthorized): renew before handing out another. */
  invalidate(token?: string): void {
    if (token !== undefined && token !== this.#pair?.accessToken) return;
    this.#facts.accessRejected = true;
    this.#loop.kick();
  }

  snapshot(): TokenSnapshot {
    const lastError = this.#failures.last;
    return {
      accessExpiresAt: this.#pair?.accessExpiresAt,
      refreshExpiresAt: refreshExpiresAt(this.#pair),
      clock: this.#time.status(),
      lastError: lastError && { code: lastError.code, retry: lastError.retry, message: lastError.message, fix: lastError.fix },
      renewals: { ...this.#renewals },
      failures: this.#failures.byCode,
      store: this.#saver.status(),
    };
  }

  // ---- the loop's step ----

  async #step(): Promise<void> {
    if (this.#saver.due) await this.#saveUnderLock();
    await this.#time.verdict();
    if (this.#pair && this.#time.stale) this.#sampleSoon();
    const now = { mono: this.#clock.monoNow(), serverTime: this.#time.now() };
    const decision = decideNextAction({ ...this.#currentFacts(), neededLeftMs: this.#waiters.neededLeftMs() }, now, this.#policy);
    switch (decision.action) {
      case 'use':
        this.#waiters.settle((minLeftMs) => this.#usableToken(minLeftMs));
        this.#loop.wakeIn(decision.wakeInMs);
        return;
      case 'backoff':
        this.#loop.wakeIn(decision.wakeInMs);
        return;
      case 'wait-clock':
        await this.#time.sample();
        this.#loop.again();
        return;
      case 'refresh':
      case 'sign':
        await this.#renew(decision.action);
        this.#loop.again();
        return;
    }
  }

  async #renew(action: 'refresh' | 'sign'): Promise<void> {
    const before = this.#pair;
    await underRenewLock(this.#lockDeps, async () => {
      this.#syncWithStore();
      // Another process renewed while we waited for the lock: decide again with its pair.
      if (this.#pair?.accessToken !== before?.accessToken) return;
      if (action === 'refresh') await this.#refresh();
      else await this.#sign();
    });
  }

  /** Saves the held pair under the renew lock, unless another process saved a newer one meanwhile. */
  async #saveUnderLock(): Promise<void> {
    await underRenewLock(this.#lockDeps, () => {
      this.#syncWithStore();
      if (this.#pair && this.#saver.unsaved) this.#saver.save(this.#pair);
    });
  }

  async #refresh(): Promise<void> {
    if (!this.#pair) return;
    const renewed = await this.#source.refresh(this.#renewContext(), this.#pair);
    if (renewed === 'refused') {
      this.#facts.refreshFailed = true;
      return;
    }
    this.#renewals.refreshed++;
    this.#succeeded('refreshed', renewed);
  }

  async #sign(): Promise<void> {
    const renewed = await this.#source.obtain(this.#renewContext());
    this.#facts.refreshFailed = false;
    this.#facts.jitter = this.#random() * 2 - 1;
    this.#renewals.signed++;
    this.#succeeded(this.#source.obtained, renewed);
  }

  /** The new pair is used from now on, saved or not; only a trusted server time may become the clock floor. */
  #succeeded(what: string, { pair, serverNow }: Renewed): void {
    this.#pair = pair;
    this.#facts.accessRejected = false;
    delete this.#facts.retryAtMono;
    this.#failures.succeeded();
    this.#log.info({ accessExpiresAt: pair.accessExpiresAt, refreshExpiresAt: refreshExpiresAt(this.#pair) }, `token ${what}`);
    this.#saver.save(pair, serverNow === undefined ? undefined : Math.round(serverNow));
    this.#onChange?.();
  }

  #fail(err: unknown): void {
    const { error, waitMs } = this.#failures.failed(err, 'ERR_INTERNAL');
    if (!retriesOnSchedule(error.retry)) this.#waiters.reject(error);
    this.#facts.retryAtMono = this.#clock.monoNow() + waitMs;
    this.#loop.retryIn(waitMs);
    this.#onChange?.();
  }

  // ---- helpers ----

  /**
   * A sample to judge the pair held by, BACKGROUND_SAMPLE_DELAY_MS later: at boot, loading undici and
   * compiling its parser at once held up the WebSocket handshake the cached token had let go ahead
   * (7 ms of a 118 ms loopback boot), and the pair is used unjudged meanwhile either way.
   */
  #sampleSoon(): void {
    if (this.#cancelSample || this.#loop.stopped) return;
    this.#cancelSample = this.#clock.setTimer(BACKGROUND_SAMPLE_DELAY_MS, () => {
      this.#cancelSample = undefined;
      this.#time.sampleIfStale();
    });
  }

  #usableToken(minLeftMs: number): string | undefined {
    if (!this.#pair || this.#facts.accessRejected) return undefined;
    // Before the first verdict (a boot, whose tool runs cost ms): a token usable by the local clock is
    // usable whatever the verdict — synced judges by that clock, the others leave judging to the server.
    const serverTime = this.#time.checked ? this.#time.now() : this.#clock.wallNow();
    const now = { mono: this.#clock.monoNow(), serverTime };
    return accessUsableFor(this.#currentFacts(), now, minLeftMs) ? this.#pair.accessToken : undefined;
  }

  /** What a renewal needs: the identity, trusted time, and the life the new token must have. */
  #renewContext(): RenewContext {
    const facts = { ...this.#currentFacts(), neededLeftMs: this.#waiters.neededLeftMs() };
    return { identity: this.#identity, time: this.#time, log: this.#log, minValidityMs: renewalThresholdMs(facts, this.#policy) };
  }

  #currentFacts(): TokenFacts {
    return { ...this.#facts, ...pairFacts(this.#pair) };
  }

  /** Takes the store's pair, unless the one held is newer and not saved yet (or the store cannot be read). */
  #syncWithStore(): void {
    let stored: TokenPair | undefined;
    try {
      stored = this.#store.loadPair(this.#storeIdentity);
    } catch (err) {
      this.#log.warn({ err: messageOf(err) }, 'cannot read the token store: going on with the token held');
      return;
    }
    if (this.#saver.unsaved && this.#pair && !(stored && issuedAt(stored) > issuedAt(this.#pair))) return;
    if (stored?.accessToken !== this.#pair?.accessToken) this.#facts.accessRejected = false;
    this.#pair = stored;
    this.#saver.settled();
  }
}
