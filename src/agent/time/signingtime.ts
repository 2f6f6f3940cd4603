import { BotlinkError } from '../../protocol/errors.js';
import type { TimeReader } from '../../clock.js';
import type { ServerTime } from './servertime.js';
import type { TimeSyncResult } from './timesync.js';

export type SigningTime = { ok: true; ms: number; source: 'wall' | 'server' } | { ok: false; reason: string };

/** A synced verdict can be wrong; the service rejects timestamps 5 min off, so a server sample this far off wins. */
export const MAX_WALL_DISAGREEMENT_MS = 60_000;
/** A server sample younger than this may overrule a synced wall clock, and is worth reusing instead of fetching. */
export const FRESH_SAMPLE_MS = 5 * 60_000;

export const NO_TRUSTED_TIME = 'no trusted time: clock not synchronised and no server time sample yet';

/** Signing needs a time we trust and none can be had yet. */
export class ClockNotTrustedError extends BotlinkError {
  constructor(reason: string = NO_TRUSTED_TIME) {
    super('ERR_CLOCK_UNTRUSTED', reason, 'needs-clock', {
      fix:
        'check that NTP runs (timedatectl status, chronyc tracking) and that the token service ' +
        'is reachable over the network, so its Date header can supply the time',
    });
  }
}

function hasFreshSample(server: ServerTime, clock: TimeReader, maxAgeMs: number): boolean {
  const last = server.lastSampleMono();
  return last !== undefined && clock.monoNow() - last <= maxAgeMs;
}

/**
 * The timestamp to sign with (DESIGN §4): the wall clock when a source says it is synced and no fresh
 * server sample contradicts it; otherwise server time; never an unconfirmed wall clock.
 */
export function chooseSigningTime(verdict: TimeSyncResult, server: ServerTime, clock: TimeReader): SigningTime {
  const serverNow = server.now();
  if (verdict.verdict === 'synced') {
    const wall = Math.round(clock.wallNow());
    const contradicted =
      serverNow !== undefined && hasFreshSample(server, clock, FRESH_SAMPLE_MS) && Math.abs(serverNow - wall) > MAX_WALL_DISAGREEMENT_MS;
    return contradicted ? { ok: true, ms: serverNow, source: 'server' } : { ok: true, ms: wall, source: 'wall' };
  }
  if (serverNow !== undefined) return { ok: true, ms: serverNow, source: 'server' };
  return { ok: false, reason: NO_TRUSTED_TIME };
}

/** Whether to fetch a server time sample before signing: the clock is not synced and no recent sample exists. */
export function needsSample(verdict: TimeSyncResult, server: ServerTime, clock: TimeReader, maxAgeMs: number): boolean {
  return verdict.verdict !== 'synced' && !hasFreshSample(server, clock, maxAgeMs);
}
