import type { Logger } from 'pino';
import type { GetTokenSuccess, Identity } from '../../protocol/wire.js';
import { CloudError, type CloudClient } from '../cloud/client.js';
import type { Clock } from '../time/clock.js';
import type { ServerTime } from '../time/servertime.js';
import { chooseSigningTime, ClockNotTrustedError, FRESH_SAMPLE_MS, needsSample } from '../time/signingtime.js';
import type { TimeSyncResult } from '../time/timesync.js';

export interface SignFlowDeps {
  api: CloudClient;
  serverTime: ServerTime;
  clock: Clock;
  log: Logger;
}

/**
 * getToken signed with a timestamp the server will accept: the trusted wall clock, or server time
 * sampled first when the clock is not trusted (DESIGN §4); a 1003 answer carries the server's Date,
 * so it is retried once, at once, on server time. Never signs with an untrusted, unconfirmed clock.
 */
export async function signedGetToken(deps: SignFlowDeps, identity: Identity, verdict: TimeSyncResult): Promise<GetTokenSuccess> {
  const { api, serverTime, clock, log } = deps;
  if (needsSample(verdict, serverTime, clock, FRESH_SAMPLE_MS)) await api.sampleServerTime();
  const chosen = chooseSigningTime(verdict, serverTime, clock);
  if (!chosen.ok) throw new ClockNotTrustedError(chosen.reason);
  try {
    return await api.getToken(identity, chosen.ms);
  } catch (err) {
    const corrected = serverTime.now();
    if (!(err instanceof CloudError && err.serviceCode === 1003) || corrected === undefined) throw err;
    log.warn({ offsetMs: serverTime.offsetMs(), source: chosen.source }, 'timestamp refused (1003); retrying with server time');
    return api.getToken(identity, corrected);
  }
}
