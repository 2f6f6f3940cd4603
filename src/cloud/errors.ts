/** The cloud client's errors: each outcome of a call that is not a success, with the retry class that says what comes next. */

import { describeCode } from '../protocol/codes.js';
import { BotlinkError, messageOf, WireError, type BotlinkErrorOptions, type ErrorCode, type RetryClass } from '../protocol/errors.js';

/** Why a cloud call failed; `serviceCode` is the protocol's `code` when the service answered one. */
export class CloudError extends BotlinkError {
  readonly serviceCode: number | undefined;

  constructor(code: ErrorCode, message: string, retry: RetryClass, options?: BotlinkErrorOptions & { serviceCode?: number }) {
    super(code, message, retry, options);
    this.serviceCode = options?.serviceCode;
  }
}

export function closedError(route: string): CloudError {
  return new CloudError('ERR_NETWORK', `${route}: the cloud client is closed`, 'retry-backoff');
}

export function parseOr<T>(parse: (value: unknown) => T, value: unknown): T {
  try {
    return parse(value);
  } catch (err) {
    if (err instanceof WireError) {
      throw new CloudError('ERR_BAD_RESPONSE', `the service answered with an unexpected shape (${err.message})`, 'retry-backoff', {
        cause: err,
      });
    }
    throw err;
  }
}

/** Maps a getToken code to an error whose retry class says what the agent does next. */
export function codeError(code: number, msg: string): CloudError {
  const info = describeCode(code);
  const said = msg ? `: ${msg}` : '';
  return new CloudError(`ERR_CLOUD_${code}`, `getToken refused with code ${code}${said}`, info.retry, { serviceCode: code, fix: info.fix });
}

export function statusError(route: string, status: number): CloudError {
  if (status >= 300 && status < 400) {
    return new CloudError('ERR_HTTP_REDIRECT', `${route}: HTTP ${status} redirect, not followed`, 'needs-config', { fix: 'check baseUrl' });
  }
  if (status === 404 || status === 405) {
    return new CloudError('ERR_HTTP_STATUS', `${route}: HTTP ${status}: no token service there`, 'needs-config', {
      fix: 'check that baseUrl points at the token service',
    });
  }
  return new CloudError('ERR_HTTP_STATUS', `${route}: HTTP ${status} from the service`, 'retry-backoff');
}

export function networkError(route: string, err: unknown): CloudError {
  const code = (err as { code?: unknown }).code;
  const detail = typeof code === 'string' ? code : messageOf(err);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new CloudError('ERR_DNS', `${route}: cannot resolve the service host (${detail})`, 'retry-backoff', {
      cause: err,
      fix: 'check DNS and baseUrl',
    });
  }
  if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') {
    return new CloudError('ERR_RESPONSE_TOO_LARGE', `${route}: response larger than allowed`, 'retry-backoff', { cause: err });
  }
  if (typeof code === 'string' && code.includes('TIMEOUT')) {
    return new CloudError('ERR_TIMEOUT', `${route}: the service did not answer in time (${detail})`, 'retry-backoff', { cause: err });
  }
  return new CloudError('ERR_NETWORK', `${route}: cannot reach the service (${detail})`, 'retry-backoff', { cause: err });
}
