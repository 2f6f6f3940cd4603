import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isNetworkFailure } from '../../../src/cloud/network.js';
import { CloudError, codeError } from '../../../src/cloud/errors.js';
import { SecretFileError } from '../../../src/agent/config/secret.js';
import { CODE_TABLE, WS_FAILURE_FIXES, WsMessage } from '../../../src/protocol/codes.js';
import {
  BotlinkError,
  describeError,
  ERROR_CODES,
  fixOf,
  messageOf,
  toBotlinkError,
  WireError,
  withFix,
  type ErrorCode,
} from '../../../src/protocol/errors.js';

const SRC = join(import.meta.dirname, '../../../src');
/** Node's own codes, which botlink compares against but never raises. */
const NODE_CODES = new Set(['ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_HTTP_REQUEST_TIMEOUT']);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sources(path);
    return e.name.endsWith('.ts') ? [path] : [];
  });
}

describe('BotlinkError', () => {
  it('carries its code, retry class, fix and cause apart from the message', () => {
    const cause = new Error('EACCES');
    const err = new BotlinkError('ERR_STORE_ACCESS', 'cannot use the token store /x', 'needs-config', { cause, fix: 'chown it' });
    expect(err).toMatchObject({
      name: 'BotlinkError',
      code: 'ERR_STORE_ACCESS',
      retry: 'needs-config',
      fix: 'chown it',
      message: 'cannot use the token store /x',
    });
    expect(err.cause).toBe(cause);
    expect(new BotlinkError('ERR_INTERNAL', 'odd', 'fatal').fix).toBeUndefined();
  });

  it('names a subclass by its own name and keeps its fields', () => {
    const err = new SecretFileError('/s', 'secret key file /s is empty', { fix: 'write the SecretKey into it (one line)' });
    expect(err).toMatchObject({
      name: 'SecretFileError',
      code: 'ERR_SECRET_FILE',
      path: '/s',
      fix: 'write the SecretKey into it (one line)',
    });
    expect(new WireError('a.b', 'must be a string')).toMatchObject({
      code: 'ERR_WIRE_SHAPE',
      field: 'a.b',
      message: 'a.b: must be a string',
    });
  });

  it('accepts only codes of the closed list, and a getToken refusal by its service code', () => {
    const refusal: ErrorCode = 'ERR_CLOUD_4242';
    expect(new BotlinkError(refusal, 'x', 'retry-backoff').code).toBe('ERR_CLOUD_4242');
    // @ts-expect-error: a code outside ERROR_CODES does not compile (npx tsc --noEmit checks this line)
    expect(new BotlinkError('ERR_NOT_IN_THE_LIST', 'x', 'fatal').code).toBe('ERR_NOT_IN_THE_LIST');
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
  });

  it("lists every ERR_ code written in src (ERR_CLOUD_<n> is a refusal's)", () => {
    const known = new Set<string>(ERROR_CODES);
    const unlisted: string[] = [];
    for (const file of sources(SRC)) {
      for (const [, code] of readFileSync(file, 'utf8').matchAll(/['"`](ERR_[A-Z0-9_]+)['"`]/g)) {
        if (!known.has(code!) && !NODE_CODES.has(code!) && !/^ERR_CLOUD_\d+$/.test(code!)) unlisted.push(`${code} in ${file}`);
      }
    }
    expect(unlisted).toEqual([]);
  });
});

describe('one way to read an error', () => {
  it('no module writes out messageOf again, nor pastes ". Fix: …" into a message', () => {
    const found: string[] = [];
    for (const file of sources(SRC)) {
      if (file.endsWith(join('protocol', 'errors.ts'))) continue;
      // The console is browser code that may import nothing of src (console-alone): it reads the API's errors its own way.
      if (file.startsWith(join(SRC, 'console'))) continue;
      const text = readFileSync(file, 'utf8');
      if (/instanceof Error \? \w+\.message : String\(/.test(text)) found.push(`messageOf written out in ${file}`);
      if (/\. Fix: /.test(text)) found.push(`a fix pasted into a message in ${file}`);
    }
    expect(found).toEqual([]);
  });
});

describe("the printers' helpers", () => {
  it('messageOf takes the message of an Error and the string form of anything else', () => {
    expect(messageOf(new Error('boom'))).toBe('boom');
    expect(messageOf('plain')).toBe('plain');
    expect(messageOf(42)).toBe('42');
    expect(messageOf(undefined)).toBe('undefined');
  });

  it('fixOf reads the fix of a botlink error only', () => {
    expect(fixOf(new BotlinkError('ERR_CONFIG', 'x', 'needs-config', { fix: 'set it' }))).toBe('set it');
    expect(fixOf(Object.assign(new Error('x'), { fix: 'not ours' }))).toBeUndefined();
    expect(fixOf('x')).toBeUndefined();
  });

  it('describeError puts the fix after the message on one line, and nothing when there is none', () => {
    expect(describeError(new BotlinkError('ERR_CONFIG', 'baseUrl is required', 'needs-config', { fix: 'set baseUrl' }))).toBe(
      'baseUrl is required — fix: set baseUrl',
    );
    expect(describeError(new Error('boom'))).toBe('boom');
    expect(withFix('no token', undefined)).toBe('no token');
    expect(withFix('no token', '')).toBe('no token');
  });

  it('toBotlinkError passes ours through and wraps anything else under the code given', () => {
    const ours = new BotlinkError('ERR_DNS', 'x', 'retry-backoff');
    expect(toBotlinkError(ours, 'ERR_INTERNAL')).toBe(ours);
    const wrapped = toBotlinkError(new TypeError('bad'), 'ERR_INTERNAL');
    expect(wrapped).toMatchObject({ code: 'ERR_INTERNAL', retry: 'retry-backoff', message: 'bad', fix: undefined });
    expect(wrapped.cause).toBeInstanceOf(TypeError);
  });
});

describe('fixes are structured at the source', () => {
  it("a getToken refusal carries the code table's fix, not pasted into its message", () => {
    const err = codeError(1005, 'invalid signature');
    expect(err).toMatchObject({ code: 'ERR_CLOUD_1005', serviceCode: 1005, retry: 'needs-config', fix: CODE_TABLE[1005].fix });
    expect(err.message).toBe('getToken refused with code 1005: invalid signature');
    expect(codeError(4242, '')).toMatchObject({
      code: 'ERR_CLOUD_4242',
      message: 'getToken refused with code 4242',
      retry: 'retry-backoff',
    });
  });

  it('each WebSocket refusal has one fix', () => {
    for (const failure of Object.values(WsMessage)) expect(WS_FAILURE_FIXES[failure]).toMatch(/\w/);
  });
});

describe('isNetworkFailure: the one list of codes the CLI and the doctor read as "the service was not reached"', () => {
  it.each([
    ['ERR_NETWORK', true],
    ['ERR_DNS', true],
    ['ERR_TIMEOUT', true],
    ['ERR_DEADLINE', true],
    ['ERR_BAD_RESPONSE', true],
    ['ERR_RESPONSE_TOO_LARGE', true],
    ['ERR_HTTP_STATUS', true],
    ['ERR_HTTP_REDIRECT', true],
    ['ERR_CLOUD_1005', false],
    ['ERR_CLOCK_UNTRUSTED', false],
    ['ERR_STORE_ACCESS', false],
  ] as const)('%s → %s', (code, network) => {
    expect(isNetworkFailure(new CloudError(code, 'x', 'retry-backoff'))).toBe(network);
  });

  it('is false for anything not ours', () => {
    expect(isNetworkFailure(Object.assign(new Error('x'), { code: 'ERR_NETWORK' }))).toBe(false);
  });
});
