/**
 * The operator's commands through the admin API (DESIGN §3.1 `--admin URL`, §3.8's routes): what the store path
 * reads and does, asked of the API and given back in the store path's shapes, so one printer serves both.
 */
import type { Displacement } from '../../broker/displace.js';
import type { CodeRequest, IssuedCode } from '../../broker/operator.js';
import { OperatorInputError } from '../../broker/operator.js';
import type { PendingListed, RejectWhich } from '../../broker/pending-operator.js';
import type { CodeListing, DeviceFilter, DeviceListing, PreauthRow, RemovedPreauth } from '../../broker/store/types.js';
import { type AdminClient, segment } from '../admin-client.js';
import { Failure } from '../frame/exit.js';

/** The most lines one preauth request carries (§3.8), and the most bytes, under the API's 1 MiB body. */
const PREAUTH_BATCH_LINES = 10_000;
const PREAUTH_BATCH_BYTES = 900 * 1024;
const KEY_ID = /^[0-9a-f]{32}$/;
/** A literal prefix the API takes as `q`. */
const Q_MAX = 64;

/** Only the fields the store path prints: an answer with more prints the same. */
export async function remoteCode(api: AdminClient, req: CodeRequest): Promise<IssuedCode> {
  const bound = req.binding === 'any-device' ? { anyDevice: true } : { deviceId: req.binding.deviceId };
  const made = await api.post<IssuedCode>('/codes', { vendorId: req.vendorId, ...bound, uses: req.uses, ttlS: req.ttlS, kind: req.kind });
  return { id: made.id, code: made.code, expiresAt: made.expiresAt, uses: made.uses };
}

export async function remoteCodes(api: AdminClient, vendorId: string | undefined): Promise<CodeListing[]> {
  const items = await api.all<CodeListing>('/codes', 'codes', { vendorId });
  return items.map(({ id, vendorId, deviceId, kind, usesLeft, expiresAt }) => ({ id, vendorId, deviceId, kind, usesLeft, expiresAt }));
}

/** The code as it was (from the list, before it goes), then gone; one the list does not show (spent, expired) told by its id alone. */
export async function remoteCancel(api: AdminClient, id: string): Promise<CodeListing | { id: string; kind?: undefined }> {
  const listed = (await remoteCodes(api, undefined)).find((c) => c.id === id);
  await api.delete(`/codes/${segment(id)}`);
  return listed ?? { id };
}

/** The API's item of a key line (§3.8): one per key, where the store lists one per botId. */
interface KeyItem {
  botId: string | null;
  deviceId: string;
  vendorId: string;
  keyId: string;
  state: DeviceListing['state'];
  lastSeen: number | null;
  agentVersion: string | null;
}

/**
 * `broker devices` as the store lists it: one line per botId (its active key, else its newest; last seen the
 * latest of its keys), and one per key without a botId (pre-authorised, pending, rejected: the API lists every
 * state, §3.8), in the store's order. A key without a botId shows no last-seen time, as on the store.
 */
export async function remoteDevices(api: AdminClient, filter: DeviceFilter): Promise<DeviceListing[]> {
  const { state, vendorId } = filter;
  // A botId's line is active while any of its keys is: those two states are told from all its keys together.
  const keyState = state === 'active' || state === 'revoked' ? undefined : state;
  const items = await api.all<KeyItem>('/devices', 'devices', { vendorId, state: keyState });
  const lines: DeviceListing[] = [];
  const bots = new Map<string, KeyItem[]>();
  for (const item of items) {
    if (item.botId === null) lines.push({ ...listing(item, null), agentVersion: null });
    else {
      const keys = bots.get(item.botId);
      if (keys) keys.push(item);
      else bots.set(item.botId, [item]);
    }
  }
  for (const [botId, keys] of bots) {
    const lastSeen = keys.reduce<number | null>(
      (max, k) => (k.lastSeen !== null && (max === null || k.lastSeen > max) ? k.lastSeen : max),
      null,
    );
    // The newest of several retired keys is the API's device item (its keys ordered active first, then newest).
    const pick =
      keys.find((k) => k.state === 'active') ??
      (keys.length === 1 ? keys[0] : await api.get<KeyItem>(`/devices/${segment(botId)}`)) ??
      (keys[0] as KeyItem);
    lines.push(listing(pick, lastSeen));
  }
  const kept = state === undefined ? lines : lines.filter((l) => l.state === state);
  return kept.sort((a, b) => compare([a.vendorId, a.deviceId, a.state, a.keyId], [b.vendorId, b.deviceId, b.state, b.keyId]));
}

function listing(k: KeyItem, lastSeenAt: number | null): DeviceListing {
  const { botId, deviceId, vendorId, keyId, agentVersion } = k;
  return { botId, deviceId, vendorId, keyId, state: k.state, lastSeenAt, agentVersion };
}

function compare(a: readonly (string | number)[], b: readonly (string | number)[]): number {
  for (const [i, x] of a.entries()) {
    const y = b[i] as string | number;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

/** The revoke's answer: §3.8's `{revoked}`, which this broker extends with the displacement's outcome and next time. */
export interface RemoteRevoke {
  revoked: number;
  displaceAt: number | null;
  displacement?: Displacement;
}

export async function remoteRevoke(api: AdminClient, botId: string, displace: boolean): Promise<RemoteRevoke> {
  // The API displaces unless told not to; the command only with --displace.
  const a = await api.post<Partial<RemoteRevoke>>(`/devices/${segment(botId)}/revoke`, { displace });
  const told = a.displacement;
  // The reason is the broker's text: printed through printable() like every other field it sends.
  const displacement: Displacement | undefined =
    told === undefined
      ? undefined
      : told.outcome === 'displaced'
        ? { outcome: 'displaced' }
        : { outcome: 'failed', reason: String(told.reason ?? 'not told') };
  return {
    revoked: Number(a.revoked ?? 0),
    displaceAt: typeof a.displaceAt === 'number' ? a.displaceAt : null,
    ...(displacement ? { displacement } : {}),
  };
}

/** The count windows cleared: §3.8 answers {}, this broker adds `cleared` (undefined from a broker that does not). */
export async function remoteResetLimits(api: AdminClient, botId: string): Promise<number | undefined> {
  const a = await api.post<{ cleared?: unknown }>(`/devices/${segment(botId)}/reset-limits`, {});
  return typeof a.cleared === 'number' ? a.cleared : undefined;
}

/**
 * Pre-authorises the parsed rows in requests of at most 10,000 lines: how many were added. A line the broker
 * refuses (its device or key known already) is told after the rest were added: 65, naming each.
 */
export async function remotePreauth(api: AdminClient, vendorId: string, rows: readonly PreauthRow[]): Promise<number> {
  let added = 0;
  const refused: string[] = [];
  for (const batch of batches(rows)) {
    const answer = await api.post<{ added: number; rejected: { line: number; msg: string }[] }>('/preauth', {
      vendorId,
      lines: batch.map((r) => `${r.deviceId},${r.publicKey}`),
    });
    added += answer.added;
    for (const r of answer.rejected) refused.push(`${batch[r.line - 1]?.deviceId ?? `line ${r.line}`}: ${r.msg}`);
  }
  if (refused.length > 0)
    throw new OperatorInputError(
      `${added} device(s) pre-authorised for vendor ${vendorId}, ${refused.length} refused: ${refused.slice(0, 5).join('; ')}${refused.length > 5 ? '; …' : ''}`,
    );
  return added;
}

function* batches(rows: readonly PreauthRow[]): Generator<PreauthRow[]> {
  let batch: PreauthRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    const size = row.deviceId.length * 4 + row.publicKey.length + 8;
    if (batch.length === PREAUTH_BATCH_LINES || bytes + size > PREAUTH_BATCH_BYTES) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(row);
    bytes += size;
  }
  if (batch.length > 0) yield batch;
}

/** The pre-authorised key (looked up by its serial, for the line the store path prints), then its removal. */
export async function remoteRemovePreauth(api: AdminClient, vendorId: string, deviceId: string): Promise<RemovedPreauth | undefined> {
  let keyId: string | undefined;
  if (deviceId.length <= Q_MAX) {
    const found = await api
      .all<KeyItem>('/devices', 'devices', { vendorId, state: 'preauthorized', q: deviceId })
      .catch((err: unknown) => (err instanceof Failure && err.kind === 'data' ? [] : Promise.reject(err)));
    keyId = found.find((k) => k.deviceId === deviceId)?.keyId;
  }
  await api.delete(`/preauth/${segment(vendorId)}/${segment(deviceId)}`);
  return keyId === undefined ? undefined : { keyId, vendorId, deviceId };
}

/** The pending keys, in the store's order (vendor, device, first ask, keyId). */
export async function remotePending(
  api: AdminClient,
  filter: { vendorId?: string; source?: string; q?: string },
): Promise<PendingListed[]> {
  const items = await api.all<PendingListed & { name: string | null }>('/pending', 'pending', filter);
  return items
    .map(({ keyId, deviceId, vendorId, name, source, firstAsked, lastAsked, duplicates }) => ({
      keyId,
      deviceId,
      vendorId,
      name: name ?? '',
      source,
      firstAsked,
      lastAsked,
      duplicates,
    }))
    .sort((a, b) => compare([a.vendorId, a.deviceId, a.firstAsked, a.keyId], [b.vendorId, b.deviceId, b.firstAsked, b.keyId]));
}

/** Accepts the key: its botId, and how many other keys waited for the device (the accept rejects them). */
export async function remoteAccept(api: AdminClient, keyId: string, deviceId: string): Promise<{ botId: string; rejected: number }> {
  if (!KEY_ID.test(keyId)) throw new OperatorInputError('a keyId is 32 lower-case hex characters, as the device shows it whole');
  const waiting = deviceId.length <= Q_MAX ? (await remotePending(api, { q: deviceId })).find((p) => p.keyId === keyId) : undefined;
  const { botId } = await api.post<{ botId: string }>(`/pending/${keyId}/accept`, { deviceId });
  if (typeof botId !== 'string') throw new Failure('the admin API accepted the key but named no botId', { kind: 'unavailable' });
  return { botId, rejected: waiting?.duplicates ?? 0 };
}

/** Rejects one key, or a filter's keys in one transaction: how many. */
export async function remoteReject(api: AdminClient, which: RejectWhich): Promise<number> {
  if ('keyId' in which) {
    await api.post(`/pending/${segment(which.keyId)}/reject`, {});
    return 1;
  }
  return (await api.post<{ rejected: number }>('/pending/reject', which)).rejected;
}
