/** POST /v1/token (DESIGN §3.7): the access token of the key's own botId — never a refresh token. */
import { DEVICE_ACTOR } from '../audit/trail.js';
import { keyRoute } from '../auth/authenticate.js';
import { IDENTITY_FIELDS, isIdentity } from '../../protocol/broker.js';
import { Refusal } from '../refusal.js';
import { DEFAULT_MIN_VALIDITY_S } from '../tokens.js';

const HOUR_MS = 3_600_000;
/** A device asking for more than a day of validity asks for what no token has. */
const MAX_MIN_VALIDITY_S = 86_400;

export const token = keyRoute({
  name: 'token',
  form(body) {
    const min = body['minValidityS'] ?? DEFAULT_MIN_VALIDITY_S;
    if (typeof min !== 'number' || !Number.isInteger(min) || min < 0 || min > MAX_MIN_VALIDITY_S) {
      throw new Refusal('bad-request', `minValidityS must be a whole number of seconds from 0 to ${MAX_MIN_VALIDITY_S}`);
    }
    return { minValidityS: min, agentVersion: reportedVersion(body['agent']) };
  },
  agentVersion: (fields) => fields.agentVersion,
  // Counted per botId, across all its keys: a rotation does not start a fresh hour.
  async admit(ctx, req) {
    return { admitted: undefined, limit: { kind: 'bot', id: req.botId, windowMs: HOUR_MS, max: ctx.limits.deviceTokensPerHour } };
  },
  async serve(ctx, req) {
    const { botId, keyId, vendorId, deviceId } = req.key;
    // The token as the nonce stage read it with the key: not read again when it serves.
    const issued = await ctx.issuer.issue(req.key, req.fields.minValidityS, { token: req.token });
    ctx.metrics.issued(issued.source);
    ctx.audit.recordFolded(
      { action: 'token', actor: DEVICE_ACTOR, vendorId, deviceId, botId, keyId, source: req.source, outcome: issued.source },
      'token issued',
    );
    return {
      status: 200,
      body: { botId, accessToken: issued.accessToken, expireIn: issued.expireIn, expiresAt: issued.expiresAt },
    };
  },
});

/** `agent: {version}` (DESIGN §3.7), absent or of the identity fields' form: the version the key last reported. */
function reportedVersion(agent: unknown): string | undefined {
  if (agent === undefined) return undefined;
  if (typeof agent !== 'object' || agent === null || Array.isArray(agent))
    throw new Refusal('bad-request', 'agent must be an object {version}');
  const version = (agent as Record<string, unknown>)['version'];
  if (!isIdentity('version', version)) throw new Refusal('bad-request', `agent.version must be ${IDENTITY_FIELDS.version.says}`);
  return version;
}
