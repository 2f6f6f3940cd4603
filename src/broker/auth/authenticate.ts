/**
 * The one authentication step of every signed route: DESIGN §3.7's checks as an ordered list of stages —
 * form → window → key → signature → admission → the route's rate limit, then the nonce — that a route cannot
 * skip or reorder. A route declares what each stage needs of it (keyRoute, carriedKeyRoute), and its own
 * work receives an Authenticated request, which only these stages make. Nothing is written before the
 * nonce stage, and the nonce only once every check before it held. A key that waits for an operator leaves
 * the list after its signature: 202 on a route that declares `pending`, else 403 `pending` (pending.ts).
 */
import type { KeyObject } from 'node:crypto';
import { BROKER_WINDOW_MS, NONCE_KEEP_MS } from '../../protocol/broker.js';
import type { DeviceAuthorization } from '../../protocol/device-sig.js';
import type { RefusedKey } from '../audit/trail.js';
import type { BrokerContext, RouteAnswer, SignedRequest } from '../context.js';
import type { RouteName } from '../metrics.js';
import { Refusal } from '../refusal.js';
import {
  isPending,
  isTombstone,
  type KeyRow,
  type PendingRow,
  type RequestSpend,
  type SpendOutcome,
  type TokenRow,
} from '../store/types.js';
import { readForm } from './form.js';
import {
  badSignature,
  refuseInactive,
  retiredKey,
  revokedKey,
  type SignedBytes,
  signatureMatches,
  storedKey,
  verifySignature,
} from './keys.js';
import { judge, type RateLimit, windowOf } from './limits.js';
import { againSpend, answerPending, type WhilePending } from './pending.js';

/** A request whose signature verified, before its admission and nonce; K is what the key stage found. */
export type Verified<F, K> = K & {
  readonly source: string;
  readonly auth: DeviceAuthorization;
  readonly fields: F;
};

/** An enrolled key, as the key stage found it: its botId (read, or cached with its public key), and its row when read. */
export interface EnrolledKey {
  readonly botId: string;
  /** Undefined when the signature was checked with a cached public key: the nonce stage reads the key then. */
  readonly known: KeyRow | undefined;
  /** The key's device as the cache holds it, when `known` is not read. */
  readonly device?: { readonly vendorId: string; readonly deviceId: string };
}

/** The key an enrollment carries, as the store knows it: undefined for a new key (a revoked, rejected or pending one was told apart). */
export interface CarriedKnown {
  readonly known: KeyRow | undefined;
  /** A pending key's device, for the audit. */
  readonly device?: { readonly vendorId: string; readonly deviceId: string };
}

/** What admits a request, and the limit it counts against; or its refusal, told once its nonce and count are taken. */
export type Admission<A> = { admitted: A; limit?: RateLimit | undefined } | { refused: Refusal; limit: RateLimit };

declare const authenticated: unique symbol;
declare const staged: unique symbol;

/** A request every stage passed, with what its nonce stage found (S): only the stages below make one. */
export type Authenticated<F, K, A, S = unknown> = Verified<F, K> & S & { readonly admitted: A; readonly [authenticated]: true };

/** An enrolled key's request: that key as the nonce stage found it (active), and its botId's cached token. */
export interface HeldKey {
  readonly key: KeyRow;
  readonly token: TokenRow | undefined;
}

/** A key a request carries in its body (enroll), proved by its signature; keyId already matched to the header's. */
export interface CarriedKey {
  key: KeyObject;
  keyId: string;
  /** The key as the body carries it (base64url). */
  publicKey: string;
  /** The device the request names: a key waiting for it is answered by the key stage's one step of the store (the route's pending check). */
  device: { vendorId: string | undefined; deviceId: string };
}

interface RouteStages<F, K, A, S> {
  readonly name: RouteName;
  /** form: the route's fields from the JSON body, else a Refusal 'bad-request'. */
  form(body: Record<string, unknown>, auth: DeviceAuthorization): F;
  /** What the fields say of the device, for the audit of a refusal when the store knows no row of the key yet (enroll). */
  device?(fields: F): { deviceId: string };
  /** The agent version the fields report (token): kept with the key's last seen, in the nonce stage's one step. */
  agentVersion?(fields: F): string | undefined;
  /** Whether a key that waits for an operator is answered 202 (enroll, check); without it, 403 `pending`. */
  pending?: WhilePending<F>;
  /** admission: after the signature, before the nonce. */
  admit(ctx: BrokerContext, req: Verified<F, K>): Promise<Admission<A>>;
  serve(ctx: BrokerContext, req: Authenticated<F, K, A, S>): Promise<RouteAnswer>;
}

/** A route as the front serves it: the stages, then the route's own work. Only keyRoute and carriedKeyRoute make one. */
export interface SignedRoute {
  readonly name: RouteName;
  handle(ctx: BrokerContext, req: SignedRequest): Promise<RouteAnswer>;
  readonly [staged]: true;
}

/** A route signed by an enrolled key, which the header's keyId names (token, rotate). */
export function keyRoute<F, A>(route: RouteStages<F, EnrolledKey, A, HeldKey>): SignedRoute {
  return stages(route, (ctx, bytes) => enrolledKey(ctx, bytes));
}

/** A route signed by the key its body carries (enroll): `carried` reads it from the route's fields. */
export function carriedKeyRoute<F, A>(route: RouteStages<F, CarriedKnown, A, unknown> & { carried(fields: F): CarriedKey }): SignedRoute {
  return stages(route, (ctx, bytes, fields) => carriedKey(ctx, bytes, route.carried(fields)));
}

/**
 * The key stage's outcome: what it found, the refusal of a key no longer active (revoked, rejected) or the row
 * of one that waits for an operator — each told only once its signature verified —, and how the nonce stage spends for it.
 */
interface Signer<K, S> {
  found: K;
  retired?: Refusal | undefined;
  pending?: PendingRow | undefined;
  /** A pending key's ask, spent in the key stage's step (findCarriedKey). */
  asked?: SpendOutcome | undefined;
  spend(ctx: BrokerContext, r: RequestSpend, now: number): Promise<{ spent: SpendOutcome; held: S }>;
}

/** What every key stage finds: the key's row when it was read; else its botId and device when the cache held them. */
interface Found {
  readonly known: KeyRow | undefined;
  readonly botId?: string;
  readonly device?: { readonly vendorId: string; readonly deviceId: string };
}

/** §3.7's order, the one list every signed route runs. */
function stages<F, K extends Found, A, S>(
  route: RouteStages<F, K, A, S>,
  keyStage: (ctx: BrokerContext, bytes: SignedBytes, fields: F) => Promise<Signer<K, S>>,
): SignedRoute {
  const served = {
    name: route.name,
    async handle(ctx: BrokerContext, http: SignedRequest): Promise<RouteAnswer> {
      let signer: Signer<K, S>;
      let verified: Verified<F, K>;
      try {
        // form
        const { auth, body } = readForm(http.authorization, http.raw);
        const fields = route.form(body, auth);
        const bytes: SignedBytes = { method: http.method, path: http.path, auth, raw: http.raw };
        // window
        checkWindow(auth, ctx.clock.wallNow());
        // A source past its unsigned refusals this minute reaches the store only with a key this replica knows.
        if (!ctx.keyCache.has(auth.keyId)) ctx.unsigned.refuseIfOver(http.source, ctx.clock.wallNow());
        // key, then signature
        signer = await keyStage(ctx, bytes, fields);
        verified = { ...signer.found, source: http.source, auth, fields };
      } catch (err) {
        // Refused before its signature verified: counted in memory for its source, nothing written.
        if (err instanceof Refusal) ctx.unsigned.count(http.source, ctx.clock.wallNow());
        throw err;
      }
      // Its key signed it: a refusal from here on is audited against that key (server.ts).
      http.signer = { keyId: verified.auth.keyId, ...deviceOf(route, verified) };
      if (signer.retired) throw signer.retired;
      if (signer.pending) return answerPending(ctx, route.pending, verified, signer.pending, signer.asked);
      const { auth } = verified;
      // admission
      const admission = await route.admit(ctx, verified);
      // nonce, with the limit's count in the same step of the store
      const now = ctx.clock.wallNow();
      const spend: RequestSpend = { keyId: auth.keyId, nonce: auth.nonce, keepUntil: auth.tsMs + NONCE_KEEP_MS };
      if (admission.limit) spend.window = windowOf(admission.limit, now);
      // A refused admission counts against its limit and writes no nonce: a refusal leaves nothing that decides a later request.
      if ('refused' in admission) spend.countOnly = true;
      spend.agentVersion = route.agentVersion?.(verified.fields);
      const { spent, held } = await signer.spend(ctx, spend, now);
      // The limit first: a request past it took no nonce, so it is no replay either.
      if (admission.limit && spent.count !== undefined) judge(ctx.metrics, admission.limit, spent.count, now);
      if ('refused' in admission) throw admission.refused;
      if (spent.replayed) throw new Refusal('replayed', 'this nonce was used before');
      return route.serve(ctx, { ...verified, ...held, admitted: admission.admitted } as Authenticated<F, K, A, S>);
    },
  };
  return served as SignedRoute;
}

/** The device a request's key belongs to, as far as the key stage (or the route's fields) tell it. */
function deviceOf<F, K extends Found, A, S>(route: RouteStages<F, K, A, S>, req: Verified<F, K>): Omit<RefusedKey, 'keyId'> {
  if (req.known) return { vendorId: req.known.vendorId, deviceId: req.known.deviceId, botId: req.known.botId };
  return { ...route.device?.(req.fields), ...req.device, ...(req.botId ? { botId: req.botId } : {}) };
}

function checkWindow(auth: DeviceAuthorization, now: number): void {
  if (Math.abs(auth.tsMs - now) > BROKER_WINDOW_MS) {
    throw new Refusal('clock-skew', `ts is ${Math.round((auth.tsMs - now) / 1000)} s from the broker's time`, {
      extra: { serverTime: now },
    });
  }
}

/**
 * An enrolled key. A device that asked lately has its public key in the cache: the signature is checked
 * with it first, and whether the key is still active is read in the nonce stage, which writes only then.
 * Any other, or a signature that fails with a cached key, takes §3.7's order: the key read, its signature
 * checked, and only then its state told (revoked) — nothing about a key goes to a request it did not sign.
 */
async function enrolledKey(ctx: BrokerContext, req: SignedBytes): Promise<Signer<EnrolledKey, HeldKey>> {
  const keyId = req.auth.keyId;
  const cached = ctx.keyCache.get(keyId);
  if (cached !== undefined && signatureMatches(cached.key, req)) {
    return { found: { botId: cached.botId, known: undefined, device: cached.device }, spend: held(cached.publicKey) };
  }
  const row = await ctx.store.findKey(keyId);
  if (row === undefined) throw new Refusal('unknown-key', 'no device is enrolled with this key');
  // Failed with this very key already: a second verification would only double a forger's cost to us.
  if (cached?.publicKey === row.publicKey) throw badSignature();
  const key = storedKey(row.publicKey);
  verifySignature(key, req);
  const spend = held(row.publicKey);
  // A tombstone is a key retired long ago (or rejected): verified like any, then refused.
  if (isTombstone(row)) return { found: { botId: '', known: undefined }, retired: retiredKey(row.state), spend };
  // A key that waits for an operator has no botId yet: only a route that answers it while pending serves it.
  if (isPending(row)) return { found: { botId: '', known: undefined, device: deviceOfPending(row) }, pending: row, spend };
  if (row.state !== 'active') return { found: { botId: row.botId, known: row }, retired: revokedKey(), spend };
  ctx.keyCache.set(keyId, { key, publicKey: row.publicKey, botId: row.botId, device: { vendorId: row.vendorId, deviceId: row.deviceId } });
  return { found: { botId: row.botId, known: row }, spend };
}

/**
 * The key an enrollment carries: its signature proves the sender holds it, with no read (the key is the body's),
 * and only then is a revoked one told so. Its one step of the store reads the key and, for a key that waits for the
 * very device the request names (what the route's pending check asks), spends its later ask in the same statement.
 */
async function carriedKey(ctx: BrokerContext, req: SignedBytes, carried: CarriedKey): Promise<Signer<CarriedKnown, unknown>> {
  verifySignature(carried.key, req);
  const { publicKey, device } = carried;
  const { known, asked } = await ctx.store.findCarriedKey({
    ...againSpend(req.auth, ctx.clock.wallNow(), ctx.limits.pendingRetryAfterS),
    publicKey,
    ...device,
  });
  if (known === undefined) return { found: { known }, spend: spendCarried };
  if (isTombstone(known)) return { found: { known: undefined }, retired: retiredKey(known.state), spend: spendCarried };
  if (isPending(known)) return { found: { known: undefined, device: deviceOfPending(known) }, pending: known, asked, spend: spendCarried };
  return { found: { known }, retired: known.state === 'revoked' ? revokedKey() : undefined, spend: spendCarried };
}

function deviceOfPending(row: PendingRow): { vendorId: string; deviceId: string } {
  return { vendorId: row.vendorId, deviceId: row.deviceId };
}

const spendCarried: Signer<CarriedKnown, unknown>['spend'] = async (c, r) => ({ spent: await c.store.spend(r), held: {} });

/**
 * An enrolled key's nonce and count, written only while the key is still active with the public key that
 * verified (BrokerStore.spendVerified), which also reads the key and its token for the route.
 */
function held(publicKey: string): Signer<EnrolledKey, HeldKey>['spend'] {
  return async (ctx, r, now) => {
    const found = await ctx.store.spendVerified({ ...r, publicKey, now });
    // Verified with a key this replica held, now gone from the keys table: entombed, so revoked long ago.
    if (found.key === undefined) {
      ctx.keyCache.delete(r.keyId);
      throw revokedKey();
    }
    refuseInactive(found.key);
    if (found.spent === undefined) {
      // Active, yet not the key verified: no store holds two keys under one keyId, so only a cache gone wrong.
      ctx.keyCache.delete(r.keyId);
      throw revokedKey();
    }
    return { spent: found.spent, held: { key: found.key, token: found.token } };
  };
}
