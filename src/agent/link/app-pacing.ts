/**
 * Reconnects an app causes (DESIGN §3.5), paced: the first in a window goes at once, the next ones wait
 * the link's backoff schedule, and never more than appReconnectsPerMinute happen in any minute, so no
 * app on the device can make the link hammer the cloud, whatever it does. Pure, as decideLink, which asks it.
 */

import { nextBackoff, type BackoffState } from '../token/backoff.js';
import type { LinkSettings } from './options.js';

/** App-caused reconnects are capped per this window (LinkSettings.appReconnectsPerMinute). */
export const APP_RECONNECT_WINDOW_MS = 60_000;

/** Why an app needs another socket: other parameters, or a session of its own on one another app conversed on. */
export type AppReconnectCause = 'app-params' | 'app-reattach';

/** What the pacing reads and writes of the link's memory. */
export interface AppPacingMemory {
  /** The link's backoff: a paced reconnect waits its schedule, as any other. */
  readonly backoff: BackoffState;
  /**
   * Monotonic times of the app-caused replacements made in the last APP_RECONNECT_WINDOW_MS, recorded
   * as each is made (appReconnectMade): a paced one that is still waiting is not among them.
   */
  readonly appReconnects: readonly number[];
}

type CapSettings = Pick<LinkSettings, 'appReconnectsPerMinute'>;

/**
 * How long an app-caused replacement waits (0: at once), the memory that moves the schedule on, and
 * why. The replacement is recorded when the shell makes it (appReconnectMade), not here: one called
 * off before it was due was never made.
 */
export function paceAppReconnect<M extends AppPacingMemory>(
  cause: AppReconnectCause,
  memory: M,
  now: number,
  settings: Pick<LinkSettings, 'backoff'> & CapSettings,
  random: number,
): { memory: M; delayMs: number; reason: string } {
  const recent = memory.appReconnects.filter((t) => now - t < APP_RECONNECT_WINDOW_MS).sort((a, b) => a - b);
  let delayMs = 0;
  let backoff = memory.backoff;
  if (recent.length > 0) {
    const next = nextBackoff(memory.backoff, settings.backoff, random);
    delayMs = next.delayMs;
    backoff = next.state;
  }
  const cap = appCap(settings);
  const oldestCounted = recent[recent.length - cap];
  if (oldestCounted !== undefined) delayMs = Math.max(delayMs, oldestCounted + APP_RECONNECT_WINDOW_MS - now);
  const what = cause === 'app-params' ? 'an app asked for other connection parameters' : 'an app needs a session of its own';
  return {
    memory: { ...memory, backoff, appReconnects: recent },
    delayMs,
    reason: delayMs === 0 ? what : `${what}: reconnects apps cause are paced (${recent.length} in the last minute, at most ${cap})`,
  };
}

/** The memory once an app-caused replacement was made at `now`: the last cap made are all the cap needs. */
export function appReconnectMade<M extends AppPacingMemory>(memory: M, now: number, settings: CapSettings): M {
  const made = [...memory.appReconnects.filter((t) => now - t < APP_RECONNECT_WINDOW_MS), now];
  return { ...memory, appReconnects: made.slice(-appCap(settings)) };
}

/** The memory as if a paced app reconnect, decided when the backoff was `backoffBefore`, had never been: it did not happen. */
export function withdrawAppReconnect<M extends AppPacingMemory>(memory: M, backoffBefore: BackoffState): M {
  return { ...memory, backoff: backoffBefore };
}

function appCap(settings: CapSettings): number {
  return Math.max(1, Math.floor(settings.appReconnectsPerMinute));
}
