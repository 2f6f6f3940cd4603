/**
 * POST /v1/enroll (DESIGN §3.7): a device proves it holds a new key, a code or a pre-authorisation
 * admits it (admission.ts), the cloud registers it under the admitting vendor, and one transaction spends
 * the admission and binds the botId to the key. A refused or failed enrollment spends nothing.
 */
import { publicKeyFromWire } from '../../protocol/device-sig.js';
import { messageOf } from '../../protocol/errors.js';
import type { DeviceType } from '../../protocol/wire.js';
import { DEVICE_ACTOR } from '../audit/trail.js';
import { type Admission, type CarriedKey, carriedKeyRoute } from '../auth/authenticate.js';
import { optionalIdentity, optionalString, requiredIdentity, requiredString } from '../auth/form.js';
import { addressBucket } from '../auth/limits.js';
import { normaliseCode } from '../codes.js';
import type { BrokerContext, RouteAnswer } from '../context.js';
import { Refusal } from '../refusal.js';
import type { CodeKind, CodeRow } from '../store/types.js';
import { cloudRefusal } from '../tokens.js';
import { type Admitted, admitEnrollment, bindingOf, refuseAfterRegistering, refuseBeforeRegistering } from './admission.js';

const DEVICE_TYPES: readonly DeviceType[] = ['PHYSICAL_ROBOT', 'APP_ROBOT'];
const MINUTE_MS = 60_000;

interface EnrollFields {
  code: string | undefined;
  deviceId: string;
  publicKey: string;
  appId: string;
  type: DeviceType;
  name: string;
  botId: string | undefined;
  carried: CarriedKey;
}

function readFields(body: Record<string, unknown>, headerKeyId: string): EnrollFields {
  const deviceId = requiredIdentity(body, 'deviceId', 'deviceId');
  const type = body['type'] ?? 'PHYSICAL_ROBOT';
  if (!DEVICE_TYPES.includes(type as DeviceType)) throw new Refusal('bad-request', `type must be one of ${DEVICE_TYPES.join(', ')}`);
  const publicKey = requiredString(body, 'publicKey', 64);
  let carried: CarriedKey;
  try {
    carried = publicKeyFromWire(publicKey);
  } catch (err) {
    throw new Refusal('bad-request', messageOf(err));
  }
  if (carried.keyId !== headerKeyId) throw new Refusal('bad-request', "the header's keyId is not the keyId of publicKey");
  return {
    code: optionalString(body, 'code', 64),
    deviceId,
    publicKey,
    appId: optionalIdentity(body, 'appId', 'appId') ?? '',
    type: type as DeviceType,
    name: optionalIdentity(body, 'name', 'name') ?? deviceId,
    botId: optionalString(body, 'botId'),
    carried,
  };
}

export const enroll = carriedKeyRoute({
  name: 'enroll',
  carried: (fields: EnrollFields) => fields.carried,
  form: (body, auth) => readFields(body, auth.keyId),
  device: (fields: EnrollFields) => ({ deviceId: fields.deviceId }),
  async admit(ctx, req): Promise<Admission<Admitted>> {
    const { fields } = req;
    const code = fields.code === undefined || req.known ? undefined : await findCode(ctx, fields.code);
    const verdict = admitEnrollment({
      known: req.known,
      deviceId: fields.deviceId,
      botId: fields.botId,
      code,
      preauth: fields.code === undefined && !req.known ? await ctx.store.findPreauth(req.auth.keyId) : undefined,
      now: ctx.clock.wallNow(),
    });
    if ('refuse' in verdict) throw verdict.refuse;
    const perMinute = (kind: 'code' | 'addr', id: string, max: number) => ({ kind, id, windowMs: MINUTE_MS, max });
    if ('refuseCounted' in verdict)
      return { refused: verdict.refuseCounted, limit: perMinute('addr', addressBucket(req.source), ctx.limits.unknownCodePerMinute) };
    const admitted = verdict.admit;
    return { admitted, limit: admitted.by === 'code' ? perMinute('code', admitted.row.hmac, ctx.limits.enrollPerMinute) : undefined };
  },
  async serve(ctx, req) {
    const { admitted, fields } = req;
    const keyId = req.auth.keyId;
    if (admitted.by === 'again') {
      // The same key for the same device: a retry after a lost answer, answered again and spending nothing.
      const { botId, vendorId, deviceId } = admitted.key;
      if (deviceId !== fields.deviceId) throw new Refusal('device-exists', 'this key is enrolled for another device');
      ctx.audit.record(
        { action: 'enroll', actor: DEVICE_ACTOR, vendorId, deviceId, botId, keyId, source: req.source, outcome: 'again' },
        'enrollment repeated',
      );
      return { status: 200, body: { botId, vendorId, keyId } };
    }
    const { answer, replaced, kind } = await bind(ctx, admitted, fields, keyId);
    const { botId, vendorId } = answer.body;
    const device = { actor: DEVICE_ACTOR, vendorId, deviceId: fields.deviceId, botId, source: req.source };
    // One revocation per key the replace revoked (DESIGN §3.7), each naming the key that took its place.
    for (const old of replaced)
      ctx.audit.record({ ...device, action: 'revoke', keyId: old, outcome: 'replaced' }, 'key revoked by a replace enrollment', {
        newKeyId: keyId,
      });
    // A code's use spent by this enrollment: its own event, and the enrollment's row, name the code by its id.
    const codeId = admitted.by === 'code' ? admitted.row.id : null;
    if (codeId !== null) ctx.audit.record({ ...device, action: 'code', keyId, codeId, outcome: 'spent' }, 'enrollment code spent');
    ctx.audit.record({ ...device, action: 'enroll', keyId, codeId, outcome: 'enrolled' }, 'device enrolled', { kind, by: admitted.by });
    return answer;
  },
});

/** The code's row: 'unknown' when nothing of that shape is stored. */
async function findCode(ctx: BrokerContext, typed: string): Promise<CodeRow | 'unknown'> {
  const normalised = normaliseCode(typed);
  return (normalised === undefined ? undefined : await ctx.store.findCode(ctx.keys.codeHmac(normalised))) ?? 'unknown';
}

async function bind(
  ctx: BrokerContext,
  admitted: Exclude<Admitted, { by: 'again' }>,
  fields: EnrollFields,
  keyId: string,
): Promise<{ answer: RouteAnswer & { body: { botId: string; vendorId: string; keyId: string } }; replaced: string[]; kind: CodeKind }> {
  const { vendorId } = admitted.row;
  const binding = bindingOf(admitted);
  const known = await ctx.store.findDeviceByDeviceId(vendorId, fields.deviceId);
  const before = refuseBeforeRegistering(binding, known);
  if (before) throw before;
  const botId = await register(ctx, vendorId, fields);
  const after = refuseAfterRegistering(binding, {
    botId,
    wanted: fields.botId,
    known,
    holder: await ctx.store.findDeviceByBotId(botId),
    preauthorized: await ctx.store.isPreauthorized(vendorId, fields.deviceId),
  });
  if (after) throw after;
  const { outcome, replaced } = await ctx.store.enroll({
    admission: admitted.by === 'code' ? { by: 'code', hmac: admitted.row.hmac } : { by: 'preauth', keyId: admitted.row.keyId },
    key: { keyId, publicKey: fields.publicKey },
    botId,
    deviceId: fields.deviceId,
    vendorId,
    replace: binding.kind === 'replace',
    now: ctx.clock.wallNow(),
  });
  if (outcome === 'spent') throw new Refusal('bad-code', 'this code was spent meanwhile');
  if (outcome === 'key-exists') throw new Refusal('revoked', 'this key was enrolled before');
  if (outcome === 'device-exists') throw new Refusal('device-exists', 'the device or its botId is bound to another key');
  ctx.metrics.enrolled(binding.kind);
  return { answer: { status: 200, body: { botId, vendorId, keyId } }, replaced, kind: binding.kind };
}

/** Registers the device with the cloud under the vendor (DESIGN §1.5): the same deviceId gives the same botId. */
async function register(ctx: BrokerContext, vendorId: string, fields: EnrollFields): Promise<string> {
  const request = { vendorId, appId: fields.appId, deviceId: fields.deviceId, type: fields.type, name: fields.name };
  try {
    const token = await ctx.vendors.get(vendorId);
    return await ctx.gate.run(() => ctx.cloud.registerDevice(token, request));
  } catch (err) {
    ctx.vendors.forget(vendorId);
    throw cloudRefusal(err);
  }
}
