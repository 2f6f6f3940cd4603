// A fleet for the admin API's benchmark (issue 34 item 6), written straight into a PostgreSQL store the product
// made (its own schema, migrations and triggers, which keep the summary's counts): bulk INSERT … SELECT over
// generate_series, not one enrollment per device over HTTP (each a cloud registration and a code's use): 100,000
// devices in about a minute on a loaded 2-core machine, most of it the count triggers. Chunks of CHUNK rows, each its own transaction: the count triggers update one row per
// state, and within one transaction PostgreSQL walks every earlier version of that row at each update.

/** Of every 50 devices: one revoked, one pre-authorised, one pending, one rejected, the rest active. */
const SHAPE = 50;
const VENDORS = 10;
const CHUNK = 1000;

export type FleetState = 'active' | 'revoked' | 'preauthorized' | 'pending' | 'rejected';

function stateOf(i: number): FleetState {
  const r = i % SHAPE;
  return r === 0 ? 'revoked' : r === 1 ? 'preauthorized' : r === 2 ? 'pending' : r === 3 ? 'rejected' : 'active';
}

/** What a fill of n devices holds, by state: the summary must count the same. */
export function fleetShape(n: number): Record<FleetState, number> {
  const counts: Record<FleetState, number> = { active: 0, revoked: 0, preauthorized: 0, pending: 0, rejected: 0 };
  for (let i = 1; i <= n; i++) counts[stateOf(i)]++;
  return counts;
}

/**
 * The statements that fill a fresh store with devices 1..n over VENDORS vendors: deviceIds SN-<7 digits>, keyIds
 * md5 hex, a refusal audited for one key in 100 (a line's last refusal is read from the audit).
 */
export function fleetFill(n: number): string[] {
  const now = Date.now();
  const key = "md5('key' || i)";
  const device = "'SN-' || (1000000 + i)";
  const vendor = `'V' || (i % ${VENDORS})`;
  const r = `(i % ${SHAPE})`;
  const out: string[] = [];
  for (let lo = 1; lo <= n; lo += CHUNK) {
    const s = `FROM generate_series(${lo}, ${Math.min(n, lo + CHUNK - 1)}) AS i`;
    out.push(
      'INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, reason, created_at, last_seen_at, revoked_at, agent_version) ' +
        `SELECT ${key}, 'pk', 'bot-' || i, ${device}, ${vendor}, 'active', NULL, ${now - 86_400_000}, ${now} - i, NULL, ` +
        `'1.' || (i % 7) || '.0' ${s} WHERE ${r} NOT IN (1, 2, 3)`,
      // Revoked as the store revokes, so the triggers count the device revoked and its version no more.
      `UPDATE keys SET state = 'revoked', reason = 'revoked', revoked_at = ${now} WHERE key_id IN (SELECT ${key} ${s} WHERE ${r} = 0)`,
      `INSERT INTO preauth (key_id, public_key, device_id, vendor_id, created_at) SELECT ${key}, 'pk', ${device}, ${vendor}, ${now} ${s} WHERE ${r} = 1`,
      'INSERT INTO pending (key_id, public_key, vendor_id, device_id, app_id, type, name, source, source_bucket, first_asked, last_asked) ' +
        `SELECT ${key}, 'pk', ${vendor}, ${device}, 'app', 'PHYSICAL_ROBOT', 'board ' || i, '10.0.' || (i % 250) || '.1', ` +
        `'10.0.' || (i % 250) || '.1', ${now}, ${now} ${s} WHERE ${r} = 2`,
      `INSERT INTO tombstones (key_id, public_key, state, at, vendor_id, device_id) SELECT ${key}, 'pk', 'rejected', ${now}, ${vendor}, ${device} ${s} WHERE ${r} = 3`,
    );
  }
  out.push(
    `INSERT INTO audit (at, action, actor, key_id, outcome) SELECT ${now}, 'refusal', 'broker', key_id, 'replayed' FROM keys WHERE last_seen_at % 100 = 7`,
    'VACUUM ANALYZE',
  );
  return out;
}
