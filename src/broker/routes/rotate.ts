/** POST /v1/rotate (DESIGN §3.7): the current key hands its device over to a new key that proves itself. */
import { publicKeyFromWire, verifyRotateProof } from '../../protocol/device-sig.js';
import { messageOf } from '../../protocol/errors.js';
import type { Route } from '../context.js';
import { Refusal } from '../refusal.js';
import { checkWindow, readSigned, requiredString, verifyThenSpendNonce } from '../signed.js';
import { activeKey } from './active-key.js';

export const rotate: Route = async (ctx, req) => {
  const input = readSigned(req.method, req.path, req.authorization, req.raw);
  const publicKey = requiredString(input.body, 'publicKey', 64);
  const proof = requiredString(input.body, 'proof', 128);
  let next: ReturnType<typeof publicKeyFromWire>;
  try {
    next = publicKeyFromWire(publicKey);
  } catch (err) {
    throw new Refusal('bad-request', messageOf(err));
  }
  checkWindow(input.auth, ctx.clock.wallNow());
  const { row, key } = await activeKey(ctx, input.auth.keyId);
  if (!verifyRotateProof(next.key, proof, row.keyId, input.auth.ts))
    throw new Refusal('bad-signature', "proof is not the new key's signature");
  await verifyThenSpendNonce(ctx.store, key, input);
  const outcome = await ctx.store.rotate(row.keyId, { keyId: next.keyId, publicKey }, ctx.clock.wallNow());
  ctx.audit.info(
    { audit: 'rotate', botId: row.botId, keyId: row.keyId, newKeyId: next.keyId, source: req.source, outcome },
    'key rotation',
  );
  if (outcome === 'revoked') throw new Refusal('revoked', 'this key was revoked, replaced or rotated away');
  if (outcome === 'key-exists') throw new Refusal('device-exists', 'the new key was enrolled before');
  return { status: 200, body: { keyId: next.keyId } };
};
