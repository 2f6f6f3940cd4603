/**
 * POST /v1/enroll (DESIGN §3.7): a device proves it holds a new key, a code or a pre-authorisation
 * admits it (admission.ts), the cloud registers it under the admitting vendor, and one transaction spends
 * the admission and binds the botId to the key. A refused or failed enrollment spends nothing. With no
 * code and no pre-authorisation, a vendor's pendingEnrollment lets the key wait for an operator (ask.ts).
 */
import type { KeyObject } from 'node:crypto';
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
import { mayWait } from '../pending-policy.js';
import { cloudRegistrar } from '../registrar.js';
import { type Admitted, admitEnrollment, bindingOf, refuseAfterRegistering, refuseBeforeRegistering } from './admission.js';
import { admitAsk, serveAsk } from './ask.js';

const DEVICE_TYPES: readonly DeviceType[] = ['PHYSICAL_ROBOT', 'APP_ROBOT'];
const MINUTE_MS = 60_000;

interface EnrollFields {
  code: string | undefined;
  /** Named by a code-less enrollment: the vendor it asks to wait under. */
  vendorId: string | undefined;
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
  let parsed: { key: KeyObject; keyId: string };
  try {
    parsed = publicKeyFromWire(publicKey);
  } catch (err) {
    throw new Refusal('bad-request', messageOf(err));
  }
  if (parsed.keyId !== headerKeyId) throw new Refusal('bad-request', "the header's keyId is not the keyId of publicKey");
  const vendorId = optionalIdentity(body, 'vendorId', 'vendorId');
  // A waiting key is answered for the device of its first ask only (sameDevice): the key stage's step holds it to that.
  const carried: CarriedKey = { ...parsed, publicKey, device: { vendorId, deviceId } };
  return {
    code: optionalString(body, 'code', 64),
    vendorId,
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
  // A key that waits asks again for the device of its first ask, and no other.
  pending: { check: (fields: EnrollFields, row) => (sameDevice(fields, row) ? undefined : otherDevice('waits for')) },
  async admit(ctx, req): Promise<Admission<Admitted>> {
    const { fields } = req;
    const code = fields.code === undefined || req.known ? undefined : await findCode(ctx, fields.code);
    const { vendorId, deviceId } = fields;
    const verdict = admitEnrollment({
      known: req.known,
      deviceId,
      botId: fields.botId,
      code,
      preauth: fields.code === undefined && !req.known ? await ctx.store.findPreauth(req.auth.keyId) : undefined,
      vendorId,
      mayWait: vendorId !== undefined && mayWait(ctx.pending, vendorId, deviceId),
      now: ctx.clock.wallNow(),
    });
    if ('refuse' in verdict) throw verdict.refuse;
    const perMinute = (kind: 'code' | 'addr', id: string, max: number) => ({ kind, id, windowMs: MINUTE_MS, max });
    if ('refuseCounted' in verdict)
      return { refused: verdict.refuseCounted, limit: perMinute('addr', addressBucket(req.source), ctx.limits.unknownCodePerMinute) };
    const admitted = verdict.admit;
    if (admitted.by === 'ask') return { admitted, limit: await admitAsk(ctx, admitted.vendorId, deviceId, req.source) };
    return { admitted, limit: admitted.by === 'code' ? perMinute('code', admitted.row.hmac, ctx.limits.enrollPerMinute) : undefined };
  },
  async serve(ctx, req) {
    const { admitted, fields } = req;
    const keyId = req.auth.keyId;
    if (admitted.by === 'ask') return serveAsk(ctx, admitted.vendorId, fields, keyId, req.source);
    if (admitted.by === 'again') {
      // The same key for the same device: a retry after a lost answer (or an accept), answered again and spending nothing.
      const { botId, vendorId, deviceId } = admitted.key;
      if (!sameDevice(fields, admitted.key)) throw otherDevice('is enrolled for');
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

/** Whether an enrollment names the device a key belongs to (the vendorId only when it names one). */
function sameDevice(fields: EnrollFields, of: { vendorId: string; deviceId: string }): boolean {
  return fields.deviceId === of.deviceId && (fields.vendorId === undefined || fields.vendorId === of.vendorId);
}

function otherDevice(says: string): Refusal {
  return new Refusal('device-exists', `this key ${says} another device`);
}

/** The code's row: 'unknown' when nothing of that shape is stored. */
async function findCode(ctx: BrokerContext, typed: string): Promise<CodeRow | 'unknown'> {
  const normalised = normaliseCode(typed);
  return (normalised === undefined ? undefined : await ctx.store.findCode(ctx.keys.codeHmac(normalised))) ?? 'unknown';
}

async function bind(
  ctx: BrokerContext,
  admitted: Exclude<Admitted, { by: 'again' } | { by: 'ask' }>,
  fields: EnrollFields,
  keyId: string,
): Promise<{ answer: RouteAnswer & { body: { botId: string; vendorId: string; keyId: string } }; replaced: string[]; kind: CodeKind }> {
  const { vendorId } = admitted.row;
  const binding = bindingOf(admitted);
  const known = await ctx.store.findDeviceByDeviceId(vendorId, fields.deviceId);
  const before = refuseBeforeRegistering(binding, known);
  if (before) throw before;
  const { appId, deviceId, type, name } = fields;
  const botId = await cloudRegistrar(ctx)({ vendorId, appId, deviceId, type, name });
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
    name,
    replace: binding.kind === 'replace',
    now: ctx.clock.wallNow(),
  });
  if (outcome === 'spent') throw new Refusal('bad-code', 'this code was spent meanwhile');
  if (outcome === 'key-exists') throw new Refusal('revoked', 'this key was enrolled before');
  if (outcome === 'device-exists') throw new Refusal('device-exists', 'the device or its botId is bound to another key');
  ctx.metrics.enrolled(binding.kind);
  return { answer: { status: 200, body: { botId, vendorId, keyId } }, replaced, kind: binding.kind };
}
