/**
 * POST /v1/enroll (DESIGN §3.7): a device proves it holds a new key, a code or a pre-authorisation
 * admits it, the cloud registers it under the admitting vendor, and one transaction spends the
 * admission and binds the botId to the key. A refused or failed enrollment spends nothing.
 */
import type { KeyObject } from 'node:crypto';
import { publicKeyFromWire } from '../../protocol/device-sig.js';
import { messageOf } from '../../protocol/errors.js';
import type { DeviceType } from '../../protocol/wire.js';
import { normaliseCode } from '../codes.js';
import type { BrokerContext, Route, RouteAnswer } from '../context.js';
import { Refusal } from '../refusal.js';
import { checkWindow, optionalString, readSigned, requiredString, verifyThenSpendNonce, type SignedInput } from '../signed.js';
import type { Admission, CodeRow, PreauthRow } from '../store/types.js';
import { addressBucket, limitOrRefuse } from '../limits.js';
import { cloudRefusal } from '../tokens.js';

const DEVICE_TYPES: readonly DeviceType[] = ['PHYSICAL_ROBOT', 'APP_ROBOT'];

interface EnrollBody {
  code: string | undefined;
  deviceId: string;
  publicKey: string;
  appId: string;
  type: DeviceType;
  name: string;
  botId: string | undefined;
}

function readBody(body: Record<string, unknown>): EnrollBody {
  const deviceId = requiredString(body, 'deviceId');
  const type = body['type'] ?? 'PHYSICAL_ROBOT';
  if (!DEVICE_TYPES.includes(type as DeviceType)) throw new Refusal('bad-request', `type must be one of ${DEVICE_TYPES.join(', ')}`);
  return {
    code: optionalString(body, 'code', 64),
    deviceId,
    publicKey: requiredString(body, 'publicKey', 64),
    appId: optionalString(body, 'appId') ?? '',
    type: type as DeviceType,
    name: optionalString(body, 'name') ?? deviceId,
    botId: optionalString(body, 'botId'),
  };
}

/** What admits this key: a code's row, or the key's pre-authorisation. */
type Admitted = { by: 'code'; row: CodeRow } | { by: 'preauth'; row: PreauthRow };

export const enroll: Route = async (ctx, req) => {
  const input = readSigned(req.method, req.path, req.authorization, req.raw);
  const body = readBody(input.body);
  let key: KeyObject;
  let keyId: string;
  try {
    ({ key, keyId } = publicKeyFromWire(body.publicKey));
  } catch (err) {
    throw new Refusal('bad-request', messageOf(err));
  }
  if (keyId !== input.auth.keyId) throw new Refusal('bad-request', "the header's keyId is not the keyId of publicKey");
  const now = ctx.clock.wallNow();
  checkWindow(input.auth, now);

  const known = await ctx.store.findKey(keyId);
  if (known?.state === 'revoked') throw new Refusal('revoked', 'this key was revoked, replaced or rotated away');
  if (known) {
    // The same key for the same device: a retry after a lost answer, answered again and spending nothing.
    await verifyThenSpendNonce(ctx.store, key, input);
    if (known.deviceId !== body.deviceId) throw new Refusal('device-exists', 'this key is enrolled for another device');
    ctx.audit.info({ audit: 'enroll', botId: known.botId, keyId, source: req.source, outcome: 'again' }, 'enrollment repeated');
    return { status: 200, body: { botId: known.botId, vendorId: known.vendorId, keyId } };
  }

  const admitted = await admit(ctx, input, key, body, req.source);
  await verifyThenSpendNonce(ctx.store, key, input);
  if (admitted.by === 'code') await limitOrRefuse(ctx, `code:${admitted.row.hmac}`, 60_000, ctx.limits.enrollPerMinute);
  const answer = await bind(ctx, admitted, body, keyId);
  ctx.audit.info(
    { audit: 'enroll', botId: (answer.body as { botId: string }).botId, keyId, source: req.source, outcome: 'enrolled' },
    'device enrolled',
  );
  return answer;
};

/** The code or pre-authorisation that admits this key for this device, else 403 bad-code. */
async function admit(ctx: BrokerContext, input: SignedInput, key: KeyObject, body: EnrollBody, source: string): Promise<Admitted> {
  if (body.code === undefined) {
    const row = await ctx.store.findPreauth(input.auth.keyId);
    if (!row || row.deviceId !== body.deviceId)
      throw new Refusal('bad-code', 'no code, and this key is not pre-authorised for this device');
    return { by: 'preauth', row };
  }
  const normalised = normaliseCode(body.code);
  const row = normalised === undefined ? undefined : await ctx.store.findCode(ctx.keys.codeHmac(normalised));
  if (!row) {
    // Guessing codes counts against the guesser's address — once its signature shows a real key was used.
    await verifyThenSpendNonce(ctx.store, key, input);
    await limitOrRefuse(ctx, `addr:${addressBucket(source)}`, 60_000, ctx.limits.unknownCodePerMinute);
    throw new Refusal('bad-code', 'no such enrollment code');
  }
  if (row.usesLeft < 1) throw new Refusal('bad-code', 'this code is spent');
  if (row.expiresAt <= ctx.clock.wallNow()) throw new Refusal('bad-code', 'this code has expired');
  if (row.deviceId !== null && row.deviceId !== body.deviceId) throw new Refusal('bad-code', 'this code is bound to another device');
  if ((row.kind === 'adopt') !== (body.botId !== undefined)) {
    throw new Refusal(
      'bad-code',
      row.kind === 'adopt' ? 'an adopt code needs the botId the device keeps' : 'only an adopt code takes a botId',
    );
  }
  return { by: 'code', row };
}

async function bind(ctx: BrokerContext, admitted: Admitted, body: EnrollBody, keyId: string): Promise<RouteAnswer> {
  const vendorId = admitted.row.vendorId;
  const kind = admitted.by === 'code' ? admitted.row.kind : 'plain';
  const known = await ctx.store.findDeviceByDeviceId(vendorId, body.deviceId);
  if (kind === 'plain' && admitted.by === 'code' && known)
    throw new Refusal('device-exists', 'this deviceId is enrolled already; a replace code moves it to a new key');
  if (kind === 'adopt' && known?.keyId) throw new Refusal('device-exists', 'this device is enrolled with a key already');
  if (kind === 'replace' && !known) throw new Refusal('bad-code', 'a replace code is for a device the broker knows');

  const botId = await register(ctx, vendorId, body);
  if (kind === 'adopt' && botId !== body.botId) throw new Refusal('device-exists', 'the cloud has another botId for this deviceId');
  if (kind === 'replace' && botId !== known?.botId) throw new Refusal('device-exists', 'the cloud has another botId for this deviceId');
  const holder = await ctx.store.findDeviceByBotId(botId);
  if (kind !== 'replace' && holder?.keyId) throw new Refusal('device-exists', 'this botId is bound to another key');
  if (kind === 'plain' && admitted.by === 'code' && (await ctx.store.isPreauthorized(vendorId, body.deviceId))) {
    throw new Refusal('device-exists', 'this device is pre-authorised for another key');
  }
  const admission: Admission =
    admitted.by === 'code' ? { by: 'code', hmac: admitted.row.hmac } : { by: 'preauth', keyId: admitted.row.keyId };
  const outcome = await ctx.store.enroll({
    admission,
    key: { keyId, publicKey: body.publicKey },
    botId,
    deviceId: body.deviceId,
    vendorId,
    replace: kind === 'replace',
    now: ctx.clock.wallNow(),
  });
  if (outcome === 'spent') throw new Refusal('bad-code', 'this code was spent meanwhile');
  if (outcome === 'key-exists') throw new Refusal('revoked', 'this key was enrolled before');
  if (outcome === 'device-exists') throw new Refusal('device-exists', 'the device or its botId is bound to another key');
  ctx.metrics.enrolled(kind);
  return { status: 200, body: { botId, vendorId, keyId } };
}

/** Registers the device with the cloud under the vendor (DESIGN §1.5): the same deviceId gives the same botId. */
async function register(ctx: BrokerContext, vendorId: string, body: EnrollBody): Promise<string> {
  const request = { vendorId, appId: body.appId, deviceId: body.deviceId, type: body.type, name: body.name };
  try {
    const token = await ctx.vendors.get(vendorId);
    return await ctx.gate.run(() => ctx.cloud.registerDevice(token, request));
  } catch (err) {
    ctx.vendors.forget(vendorId);
    throw cloudRefusal(err);
  }
}
