import type { KeyRow, KeyWithToken, SpendOutcome, TokenRow, VerifiedSpend } from './types.js';

/**
 * The columns each row type is read with, aliased to its field names: one list for both databases,
 * whose tables share names and columns (DESIGN §3.7's store, sqlite-schema.ts and postgres-schema.ts).
 */
export const CODE_COLUMNS =
  'hmac, vendor_id AS "vendorId", kind, device_id AS "deviceId", uses_left AS "usesLeft", expires_at AS "expiresAt", created_at AS "createdAt"';

export const KEY_COLUMNS =
  'key_id AS "keyId", public_key AS "publicKey", bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", state, reason, ' +
  'created_at AS "createdAt", last_seen_at AS "lastSeenAt", revoked_at AS "revokedAt"';

export const PREAUTH_COLUMNS =
  'key_id AS "keyId", public_key AS "publicKey", device_id AS "deviceId", vendor_id AS "vendorId", created_at AS "createdAt"';

export const TOKEN_COLUMNS =
  'bot_id AS "botId", access_sealed AS "accessSealed", access_expires_at AS "accessExpiresAt", access_lifetime_s AS "accessLifetimeS", ' +
  'refresh_sealed AS "refreshSealed", refresh_expires_at AS "refreshExpiresAt", updated_at AS "updatedAt"';

/**
 * A key with its botId's cached token (LEFT JOIN USING bot_id, so bot_id is one column); `?` / `$1` is the
 * keyId; `more` adds columns.
 */
export function keyWithTokenQuery(param: string, more = ''): string {
  return (
    `SELECT ${KEY_COLUMNS}${more}, access_sealed AS "accessSealed", access_expires_at AS "accessExpiresAt", ` +
    'access_lifetime_s AS "accessLifetimeS", refresh_sealed AS "refreshSealed", refresh_expires_at AS "refreshExpiresAt", ' +
    `updated_at AS "tokenUpdatedAt" FROM keys LEFT JOIN tokens USING (bot_id) WHERE key_id = ${param}`
  );
}

/** A keyWithTokenQuery row as the key and, when there is one, its token. */
export function splitKeyWithToken(row: Record<string, unknown> | undefined): KeyWithToken | undefined {
  if (row === undefined) return undefined;
  const { accessSealed, accessExpiresAt, accessLifetimeS, refreshSealed, refreshExpiresAt, tokenUpdatedAt, ...key } = row;
  const token =
    accessSealed === null || accessSealed === undefined
      ? undefined
      : ({
          botId: key['botId'],
          accessSealed,
          accessExpiresAt,
          accessLifetimeS,
          refreshSealed,
          refreshExpiresAt,
          updatedAt: tokenUpdatedAt,
        } as TokenRow);
  return { key: key as unknown as KeyRow, token };
}

/**
 * BrokerStore.spendVerified's answer from the key and token it read: `spend` (what the step wrote) only
 * when the key may spend, active with the public key the signature was verified with.
 */
export function verifiedSpend(found: KeyWithToken | undefined, publicKey: string, spend: () => SpendOutcome): VerifiedSpend {
  if (found === undefined) return { key: undefined };
  if (found.key.state !== 'active' || found.key.publicKey !== publicKey) return { ...found, spent: undefined };
  return { ...found, spent: spend() };
}

/** A device's row: its active key, else its latest; keyId only while active. `?` / `$1` filter on `where`. */
export function deviceQuery(where: string): string {
  return (
    `SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", CASE WHEN state = 'active' THEN key_id END AS "keyId" ` +
    `FROM keys WHERE ${where} ORDER BY state = 'active' DESC, created_at DESC, key_id DESC LIMIT 1`
  );
}

/**
 * `broker devices`: one line per device (botId), its active key else its latest, last seen by any of its
 * keys; then one per pre-authorised key.
 */
export const LIST_DEVICES = `
  SELECT "botId", "deviceId", "vendorId", "keyId", state, "lastSeenAt" FROM (
    SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", state,
      MAX(last_seen_at) OVER (PARTITION BY bot_id) AS "lastSeenAt",
      ROW_NUMBER() OVER (PARTITION BY bot_id ORDER BY state = 'active' DESC, created_at DESC, key_id DESC) AS pick
    FROM keys
  ) AS devices WHERE pick = 1
  UNION ALL
  SELECT NULL, device_id, vendor_id, key_id, 'preauthorized', NULL FROM preauth
  ORDER BY 3, 2, 5`;
