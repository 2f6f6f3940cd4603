import { BotlinkError, type ErrorCode } from '../protocol/errors.js';

/** Codes of a call that got no proper answer from the token service: the way to it is what to check. */
const NETWORK_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'ERR_NETWORK',
  'ERR_DNS',
  'ERR_TIMEOUT',
  'ERR_DEADLINE',
  'ERR_BAD_RESPONSE',
  'ERR_RESPONSE_TOO_LARGE',
  'ERR_HTTP_STATUS',
  'ERR_HTTP_REDIRECT',
]);

/** Whether `err` says the service was not reached, or answered as no token service would. */
export function isNetworkFailure(err: unknown): boolean {
  return err instanceof BotlinkError && NETWORK_CODES.has(err.code);
}

/** What to check when the way to the service fails and nothing more precise is known. */
export const NETWORK_FIX = 'check the network path to the service (cable/Wi-Fi, default route, firewall, proxy)';
