/**
 * When to use, refresh or re-sign the token: a pure function of the cached facts and the time, so
 * every row of the caller policy (DESIGN §1.6) is a table test with a fake clock.
 */

export interface TokenFacts {
  /** Server wall ms; lifetime = expireIn·1000 as issued. */
  access?: { expiresAt: number; lifetimeMs: number };
  refresh?: { expiresAt: number; lifetimeMs: number };
  /** The server said Unauthorized for this access token (TokenManager.invalidate()). */
  accessRejected: boolean;
  /** refreshToken with this refresh token was refused → sign next. */
  refreshFailed: boolean;
  /** In [-1, 1], drawn once per token pair, spreads the refresh point ±10 % of the margin. */
  jitter: number;
  /** A retryable failure scheduled the next attempt for this monotonic ms. */
  retryAtMono?: number;
  /** A caller waits for an access token with this much life left (capped at half the lifetime): renew ahead of the schedule. */
  neededLeftMs?: number;
}

export interface PolicyNow {
  mono: number;
  /** Best estimate of the server's wall clock: the trusted wall clock or a server-time sample; undefined when neither exists. */
  serverTime: number | undefined;
}

export interface PolicySettings {
  /** Refresh when this much access life remains (spec: ~30 min). */
  refreshMarginMs: number;
  /** Sign again when this much refresh life remains (spec: ~1 day). */
  resignMarginMs: number;
  /** Longest sleep while the token is good, so suspend or a missed timer is caught. */
  recheckMs: number;
  /** Sleep while time is unknown, before asking for a server time sample again. */
  clockRecheckMs: number;
}

export const DEFAULT_POLICY: PolicySettings = Object.freeze({
  refreshMarginMs: 30 * 60_000,
  resignMarginMs: 24 * 3_600_000,
  recheckMs: 60_000,
  clockRecheckMs: 5_000,
});

export type Decision =
  | { action: 'use'; wakeInMs: number }
  | { action: 'refresh' }
  | { action: 'sign' }
  | { action: 'wait-clock'; wakeInMs: number }
  | { action: 'backoff'; wakeInMs: number };

/** Shortest sleep after `use`, so a token near its refresh point never turns into a busy loop. */
const MIN_USE_WAKE_MS = 1_000;

/** The jitter spreads the refresh point by this fraction of the margin either way. */
const JITTER_SPREAD = 0.1;

/** A refresh margin of a quarter of the lifetime still leaves three quarters of each token in use. */
const REFRESH_LIFETIME_DIVISOR = 4;

/** A seventh of the 7-day refresh token is the spec's 1 day. */
const RESIGN_LIFETIME_DIVISOR = 7;

/** Half a lifetime is the most a caller may need: a token renewed for it always satisfies it. */
const NEEDED_LIFETIME_DIVISOR = 2;

function scaledMargin(configured: number, lifetimeMs: number | undefined, divisor: number): number {
  if (lifetimeMs === undefined || !Number.isFinite(lifetimeMs) || lifetimeMs < 0) return configured;
  return Math.min(configured, lifetimeMs / divisor);
}

/**
 * Effective margins for a token of a given lifetime: min(configured, lifetime/4) for refresh and
 * min(configured, lifetime/7) for re-sign, so 2 h/7 d tokens get 30 min/1 day and a demo token of
 * seconds still refreshes before it expires.
 */
export function effectiveMargins(facts: TokenFacts, settings: PolicySettings): { refreshMarginMs: number; resignMarginMs: number } {
  return {
    refreshMarginMs: scaledMargin(settings.refreshMarginMs, facts.access?.lifetimeMs, REFRESH_LIFETIME_DIVISOR),
    resignMarginMs: scaledMargin(settings.resignMarginMs, facts.refresh?.lifetimeMs, RESIGN_LIFETIME_DIVISOR),
  };
}

/** A caller cannot ask for more than half a token's lifetime, or a fresh token would never do. */
function cappedLeft(minLeftMs: number, lifetimeMs: number | undefined): number {
  return scaledMargin(minLeftMs, lifetimeMs, NEEDED_LIFETIME_DIVISOR);
}

/**
 * Whether the access token has more than `minLeftMs` (capped by cappedLeft) of life by server/trusted
 * time. True when time is unknown (the server judges), never for a rejected or missing token.
 */
export function accessUsableFor(facts: TokenFacts, now: PolicyNow, minLeftMs: number): boolean {
  if (!facts.access || facts.accessRejected) return false;
  const serverTime = knownTime(now);
  if (serverTime === undefined) return true;
  return facts.access.expiresAt - serverTime > cappedLeft(minLeftMs, facts.access.lifetimeMs);
}

/** A NaN or infinite estimate is no estimate: treat it like an unknown time. */
function knownTime(now: PolicyNow): number | undefined {
  return now.serverTime !== undefined && Number.isFinite(now.serverTime) ? now.serverTime : undefined;
}

function clampJitter(jitter: number): number {
  return Number.isFinite(jitter) ? Math.max(-1, Math.min(1, jitter)) : 0;
}

/**
 * The life a renewed access token must have (what broker mode sends as minValidityS, DESIGN §3.7): this
 * pair's refresh point, jitter included, so the broker never answers with the token being replaced; a
 * waiting caller's need when larger; and for a token the cloud refused, its whole lifetime (the broker
 * caps what it is asked at half the lifetime), so a cached token past its middle is not handed out again.
 */
export function renewalThresholdMs(facts: TokenFacts, settings: PolicySettings = DEFAULT_POLICY): number {
  const refused = facts.accessRejected && facts.access ? facts.access.lifetimeMs : 0;
  return Math.max(refreshAtLeftMs(facts, effectiveMargins(facts, settings)), facts.neededLeftMs ?? 0, refused);
}

/** The access life left at which the token is renewed: the refresh margin, spread by the pair's jitter. */
function refreshAtLeftMs(facts: TokenFacts, margins: { refreshMarginMs: number }): number {
  return margins.refreshMarginMs * (1 + JITTER_SPREAD * clampJitter(facts.jitter));
}

function useFor(untilMs: number[], settings: PolicySettings): Decision {
  // Rounded up: waking a hair before the point would mean one more `use` and a whole extra second.
  const wake = Math.ceil(Math.min(settings.recheckMs, ...untilMs));
  return { action: 'use', wakeInMs: Math.max(MIN_USE_WAKE_MS, wake) };
}

export function decideNextAction(facts: TokenFacts, now: PolicyNow, settings: PolicySettings = DEFAULT_POLICY): Decision {
  const retryAt = facts.retryAtMono;
  // A non-finite retry time is ignored rather than obeyed: it would park the manager forever.
  if (retryAt !== undefined && Number.isFinite(retryAt) && retryAt > now.mono) {
    return { action: 'backoff', wakeInMs: retryAt - now.mono };
  }

  const serverTime = knownTime(now);
  const { access, refresh } = facts;
  if (serverTime === undefined) {
    if (access && !facts.accessRejected) return { action: 'use', wakeInMs: settings.clockRecheckMs };
    // refreshToken carries no timestamp, so it is worth trying before waiting for a clock to sign with.
    if (refresh && !facts.refreshFailed) return { action: 'refresh' };
    return { action: 'wait-clock', wakeInMs: settings.clockRecheckMs };
  }

  if (!access && !refresh) return { action: 'sign' };

  const margins = effectiveMargins(facts, settings);
  const refreshLeft = refresh ? refresh.expiresAt - serverTime : undefined;
  // Written as !(x > y) so a NaN expiry counts as run out, never as good.
  const refreshRunningOut = refreshLeft !== undefined && !(refreshLeft > margins.resignMarginMs);

  // A token too short for a waiting caller is renewed now, as if the server had rejected it.
  if (access && accessUsableFor(facts, now, facts.neededLeftMs ?? 0)) {
    const untilRefreshPoint = access.expiresAt - serverTime - refreshAtLeftMs(facts, margins);
    if (untilRefreshPoint > 0) {
      if (refreshRunningOut) return { action: 'sign' };
      const untilResignPoint = refreshLeft === undefined ? Infinity : refreshLeft - margins.resignMarginMs;
      return useFor([untilRefreshPoint, untilResignPoint], settings);
    }
  }

  if (refresh && !facts.refreshFailed && !refreshRunningOut) return { action: 'refresh' };
  return { action: 'sign' };
}
