/** POST /v1/rotate (DESIGN §3.7): the current key hands its device over to a new key that proves itself. */
import { publicKeyFromWire, verifyRotateProof } from '../../protocol/device-sig.js';
import { messageOf } from '../../protocol/errors.js';
import { DEVICE_ACTOR } from '../audit/trail.js';
import { keyRoute } from '../auth/authenticate.js';
import { requiredString } from '../auth/form.js';
import { revokedKey } from '../auth/keys.js';
import { Refusal } from '../refusal.js';

const DAY_MS = 86_400_000;

export const rotate = keyRoute({
  name: 'rotate',
  form(body) {
    const publicKey = requiredString(body, 'publicKey', 64);
    const proof = requiredString(body, 'proof', 128);
    try {
      return { publicKey, proof, next: publicKeyFromWire(publicKey) };
    } catch (err) {
      throw new Refusal('bad-request', messageOf(err));
    }
  },
  // The new key proves itself over the current keyId and this request's ts before anything is written;
  // rotations count per botId and day, so no client rotates without end (each one a key row).
  async admit(ctx, req) {
    if (!verifyRotateProof(req.fields.next.key, req.fields.proof, req.auth.keyId, req.auth.ts))
      throw new Refusal('bad-signature', "proof is not the new key's signature");
    return { admitted: undefined, limit: { kind: 'rotate', id: req.botId, windowMs: DAY_MS, max: ctx.limits.rotatePerDay } };
  },
  async serve(ctx, req) {
    const { key, fields } = req;
    const newKeyId = fields.next.keyId;
    const outcome = await ctx.store.rotate(key.keyId, { keyId: newKeyId, publicKey: fields.publicKey }, ctx.clock.wallNow());
    // A rotation refused is audited as the refusal it is answered with.
    if (outcome === 'revoked') throw revokedKey();
    if (outcome === 'key-exists') throw new Refusal('device-exists', 'the new key was enrolled before');
    const { vendorId, deviceId, botId, keyId } = key;
    // The new keyId in the outcome too: the row that tells where a key came from has no other column for it.
    ctx.audit.record(
      { action: 'rotate', actor: DEVICE_ACTOR, vendorId, deviceId, botId, keyId, source: req.source, outcome: `rotated to ${newKeyId}` },
      'key rotation',
      { newKeyId },
    );
    return { status: 200, body: { keyId: newKeyId } };
  },
});
