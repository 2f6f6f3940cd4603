import { describe, expect, it } from 'vitest';
import { WireError } from '../../../src/protocol/errors.js';
import { Code, CODE_TABLE, describeCode, WsMessage } from '../../../src/protocol/codes.js';
import {
  identityOf,
  parseGetTokenRequest,
  parseGetTokenResponse,
  parseRefreshTokenRequest,
  parseRefreshTokenResponse,
  parseRegisterDeviceRequest,
  parseRegisterDeviceResponse,
  parseWsFailure,
  wsFailureBody,
} from '../../../src/protocol/wire.js';

const getTokenReq = {
  accessKeyId: 'AK',
  accessTimestamp: '1763683200000',
  accessNonce: '0123456789abcdef0123456789abcdef',
  accessVersion: 'V2',
  accessSign: 'a9ed098c2c04c1008a7a51e3f088db8f',
  botId: 'bot-1',
};

function fieldOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WireError);
    return (err as WireError).field;
  }
  throw new Error('expected a WireError');
}

describe('parseGetTokenRequest', () => {
  it('accepts a complete request and ignores unknown fields', () => {
    expect(parseGetTokenRequest({ ...getTokenReq, extra: { deep: 1 } })).toEqual(getTokenReq);
  });

  it.each([null, 1, 'x', [], true])('rejects the non-object %j', (body) => {
    expect(fieldOf(() => parseGetTokenRequest(body))).toBe('');
  });

  it.each(['accessKeyId', 'accessTimestamp', 'accessNonce', 'accessVersion', 'accessSign'])(
    'rejects a missing, empty or non-string %s',
    (key) => {
      for (const bad of [undefined, '', null, 1, {}, [], false]) {
        expect(fieldOf(() => parseGetTokenRequest({ ...getTokenReq, [key]: bad }))).toBe(key);
      }
    },
  );

  it('needs botId or vendorId', () => {
    const { botId: _drop, ...noId } = getTokenReq;
    expect(fieldOf(() => parseGetTokenRequest(noId))).toBe('botId');
    expect(fieldOf(() => parseGetTokenRequest({ ...noId, botId: '', vendorId: '' }))).toBe('botId');
    expect(fieldOf(() => parseGetTokenRequest({ ...noId, vendorId: 7 }))).toBe('vendorId');
    expect(parseGetTokenRequest({ ...noId, vendorId: 'V1' }).vendorId).toBe('V1');
  });

  it('lets botId win over vendorId', () => {
    expect(identityOf(parseGetTokenRequest({ ...getTokenReq, vendorId: 'V1' }))).toEqual({ kind: 'bot', id: 'bot-1' });
    expect(identityOf({ vendorId: 'V1' })).toEqual({ kind: 'vendor', id: 'V1' });
  });
});

describe('parseRefreshTokenRequest', () => {
  it('accepts and rejects', () => {
    expect(parseRefreshTokenRequest({ accessKeyId: 'AK', refreshToken: 'r', vendorId: 'V' })).toEqual({
      accessKeyId: 'AK',
      refreshToken: 'r',
      vendorId: 'V',
    });
    expect(fieldOf(() => parseRefreshTokenRequest({ accessKeyId: 'AK', botId: 'b' }))).toBe('refreshToken');
    expect(fieldOf(() => parseRefreshTokenRequest({ refreshToken: 'r', botId: 'b' }))).toBe('accessKeyId');
    expect(fieldOf(() => parseRefreshTokenRequest({ accessKeyId: 'AK', refreshToken: 'r' }))).toBe('botId');
  });
});

describe('parseRegisterDeviceRequest', () => {
  const req = { vendorId: 'V1', appId: 'app', deviceId: 'SN1', type: 'PHYSICAL_ROBOT', name: 'kitchen' };
  it('accepts a full request and fills appId and name', () => {
    expect(parseRegisterDeviceRequest(req)).toEqual(req);
    expect(parseRegisterDeviceRequest({ vendorId: 'V1', deviceId: 'SN1', type: 'APP_ROBOT' })).toEqual({
      vendorId: 'V1',
      appId: '',
      deviceId: 'SN1',
      type: 'APP_ROBOT',
      name: 'SN1',
    });
  });
  it.each([
    [{ ...req, type: 'TOASTER' }, 'type'],
    [{ ...req, type: 3 }, 'type'],
    [{ ...req, deviceId: '' }, 'deviceId'],
    [{ ...req, vendorId: undefined }, 'vendorId'],
    [{ ...req, name: 5 }, 'name'],
    [{ ...req, appId: [] }, 'appId'],
    [{ ...req, deviceId: 'x'.repeat(129) }, 'deviceId'],
  ])('rejects %j at %s', (body, field) => {
    expect(fieldOf(() => parseRegisterDeviceRequest(body))).toBe(field);
  });
});

describe('parseGetTokenResponse', () => {
  const ok = { accessToken: 'a', expireIn: 7200, refreshToken: 'r', refreshExpireIn: 604800, code: 0, msg: '' };
  it('reads a success', () => {
    expect(parseGetTokenResponse(ok)).toEqual({ ok: true, accessToken: 'a', expireIn: 7200, refreshToken: 'r', refreshExpireIn: 604800 });
  });
  it('reads a code failure without needing token fields', () => {
    expect(parseGetTokenResponse({ code: 1005, msg: 'invalid signature' })).toEqual({ ok: false, code: 1005, msg: 'invalid signature' });
    expect(parseGetTokenResponse({ code: 1003 })).toEqual({ ok: false, code: 1003, msg: '' });
  });
  it.each([
    [{ ...ok, code: '0' }, 'code'],
    [{ ...ok, code: undefined }, 'code'],
    [{ ...ok, expireIn: '7200' }, 'expireIn'],
    [{ ...ok, expireIn: 0 }, 'expireIn'],
    [{ ...ok, expireIn: 1.5 }, 'expireIn'],
    [{ ...ok, refreshExpireIn: null }, 'refreshExpireIn'],
    [{ ...ok, accessToken: '' }, 'accessToken'],
    [{ ...ok, refreshToken: 42 }, 'refreshToken'],
    [[], ''],
    ['{}', ''],
  ])('rejects %j at %s', (body, field) => {
    expect(fieldOf(() => parseGetTokenResponse(body))).toBe(field);
  });
});

describe('parseRefreshTokenResponse', () => {
  it('reads success and failure, rejects bad shapes', () => {
    expect(parseRefreshTokenResponse({ accessToken: 'a', expireIn: 60, code: 0, msg: '' })).toEqual({
      ok: true,
      accessToken: 'a',
      expireIn: 60,
    });
    expect(parseRefreshTokenResponse({ code: 1101, msg: 'x' })).toEqual({ ok: false, code: 1101, msg: 'x' });
    expect(fieldOf(() => parseRefreshTokenResponse({ code: 0, expireIn: 60 }))).toBe('accessToken');
  });
});

describe('parseRegisterDeviceResponse', () => {
  it('reads success and failure, rejects bad shapes', () => {
    expect(parseRegisterDeviceResponse({ state: 'SUCCESS', code: '0000', data: 'bot-9' })).toEqual({ ok: true, botId: 'bot-9' });
    expect(parseRegisterDeviceResponse({ state: 'FAILURE', code: 'E1', msg: 'no' })).toEqual({ ok: false, code: 'E1', msg: 'no' });
    expect(fieldOf(() => parseRegisterDeviceResponse({ state: 'SUCCESS', data: 3 }))).toBe('data');
    expect(fieldOf(() => parseRegisterDeviceResponse({ state: 'MAYBE' }))).toBe('state');
  });
});

describe('WebSocket failures', () => {
  it.each(Object.values(WsMessage))('recognises %s as JSON body, frame and close reason', (msg) => {
    expect(parseWsFailure(wsFailureBody(msg))).toBe(msg);
    expect(parseWsFailure(JSON.stringify({ code: 400, msg }))).toBe(msg);
    expect(parseWsFailure(msg)).toBe(msg);
  });
  it.each(['', 'hello', '{"code":400,"msg":"other"}', '{"code":200,"msg":"Unauthorized"}', '{bad json', 'null', '[1]'])(
    'does not mistake %j for a failure',
    (payload) => {
      expect(parseWsFailure(payload)).toBeUndefined();
    },
  );
});

describe("the guide's displacement event (DESIGN §1.4)", () => {
  const event = (envelope: Record<string, unknown>) => JSON.stringify(envelope);
  const displaced = { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} };
  it.each([
    ["the guide's example, code 200", event({ code: 200, msg: 'success', contentType: 'EVENT', content: displaced })],
    ['code 400', event({ code: 400, msg: 'REPEAT_CLIENT_SESSION', contentType: 'EVENT', content: displaced })],
    ['any other code', event({ code: 4001, msg: 'kicked', contentType: 'EVENT', content: displaced })],
    ['no code or msg at all', event({ contentType: 'EVENT', content: { eventType: 'REPEAT_CLIENT_SESSION' } })],
    ['no contentType', event({ code: 200, content: displaced })],
    ['the full down envelope', event({ code: 200, msg: '', requestId: 'r', mid: 'm', contentType: 'EVENT', content: displaced, t: 1 })],
    ['surrounding whitespace', ` ${event({ code: 200, contentType: 'EVENT', content: displaced })}\n`],
  ])('recognises %s as REPEAT_CLIENT_SESSION in every carrier', (_name, payload) => {
    expect(parseWsFailure(payload)).toBe(WsMessage.REPEAT_SESSION);
    // A text frame only takes JSON forms; the event is one.
    expect(parseWsFailure(payload, { bare: false })).toBe(WsMessage.REPEAT_SESSION);
  });
  it("fits a close reason (123 bytes) in the guide's shape", () => {
    const reason = event({ code: 200, msg: 'success', contentType: 'EVENT', content: displaced });
    expect(Buffer.byteLength(reason)).toBeLessThanOrEqual(123);
  });
  it.each([
    ['another event', event({ code: 200, contentType: 'EVENT', content: { eventType: 'CFG_BOT_EVENT', eventData: {} } })],
    ['the marker in a chat reply', event({ code: 200, contentType: 'AGENT', content: displaced })],
    [
      'the marker as eventData',
      event({ code: 200, contentType: 'EVENT', content: { eventType: 'COMPLETE', eventData: { eventType: 'REPEAT_CLIENT_SESSION' } } }),
    ],
    ['the marker as text content', event({ code: 200, contentType: 'EVENT', content: 'REPEAT_CLIENT_SESSION' })],
    ['content null', event({ code: 200, contentType: 'EVENT', content: null })],
    ['content an array', event({ code: 200, contentType: 'EVENT', content: ['REPEAT_CLIENT_SESSION'] })],
    ['a lower-case eventType', event({ code: 200, contentType: 'EVENT', content: { eventType: 'repeat_client_session' } })],
    ['a truncated envelope', event({ code: 200, contentType: 'EVENT', content: displaced }).slice(0, -2)],
  ])('does not mistake %s for a displacement', (_name, payload) => {
    expect(parseWsFailure(payload)).toBeUndefined();
  });
});

describe('code table', () => {
  it('covers 0 and 1001–1006 with a retry class and a fix', () => {
    expect(Object.keys(CODE_TABLE).map(Number).sort()).toEqual([0, 1001, 1002, 1003, 1004, 1005, 1006]);
    expect(describeCode(Code.WRONG_TIMESTAMP).retry).toBe('needs-clock');
    expect(describeCode(Code.UNKNOWN_IDENTITY).retry).toBe('needs-provisioning');
    expect(describeCode(Code.INVALID_SIGNATURE).retry).toBe('needs-config');
    expect(describeCode(Code.SYSTEM_ERROR).retry).toBe('retry-backoff');
    expect(describeCode(Code.ILLEGAL_PARAMETERS).retry).toBe('fatal');
    expect(describeCode(Code.WRONG_VERSION).retry).toBe('fatal');
    expect(describeCode(4242).retry).toBe('retry-backoff');
  });
});
