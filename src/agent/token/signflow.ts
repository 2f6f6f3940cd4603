import type { Logger } from 'pino';
import type { GetTokenSuccess, Identity } from '../../protocol/wire.js';
import type { CloudClient } from '../../cloud/client.js';
import { CloudError } from '../../cloud/errors.js';
import { ClockNotTrustedError } from '../time/signingtime.js';
import type { TrustedTime } from '../time/trusted-time.js';

export interface SignFlowDeps {
  api: CloudClient;
  time: TrustedTime;
  log: Logger;
}

/**
 * getToken signed with a timestamp the server will accept: the trusted wall clock, or server time
 * sampled first when the clock is not trusted (DESIGN §4); a 1003 answer carries the server's Date,
 * so it is retried once, at once, on server time. Never signs with an untrusted, unconfirmed clock.
 */
export async function signedGetToken(deps: SignFlowDeps, identity: Identity): Promise<GetTokenSuccess> {
  const { api, time, log } = deps;
  const chosen = await time.forSigning();
  if (!chosen.ok) throw new ClockNotTrustedError(chosen.reason);
  try {
    return await api.getToken(identity, chosen.ms);
  } catch (err) {
    const corrected = time.sampledNow();
    if (!(err instanceof CloudError && err.serviceCode === 1003) || corrected === undefined) throw err;
    log.warn({ offsetMs: time.status().offsetMs, source: chosen.source }, 'timestamp refused (1003); retrying with server time');
    return api.getToken(identity, corrected);
  }
}
