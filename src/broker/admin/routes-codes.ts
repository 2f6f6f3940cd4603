/** The admin API's codes and pre-authorisations (DESIGN §3.8), over the operator's own functions, audited as the token's name. */
import { cancelCode, refuseUnknownVendor } from '../operator-codes.js';
import {
  createCode,
  DEFAULT_CODE_TTL_S,
  DEFAULT_CODE_USES,
  OperatorInputError,
  parsePreauthLine,
  auditPreauthorized,
  removePreauth,
} from '../operator.js';
import type { CodeKind, PreauthRow } from '../store/types.js';
import { type AdminRoute, ok, operatorOf } from './context.js';
import { AdminError, badRequest, notFound } from './errors.js';
import { BodyReader, identityParam, QueryReader } from './input.js';

/** The most lines one preauth request takes. */
export const PREAUTH_LINES_MAX = 10_000;
const KINDS: readonly CodeKind[] = ['plain', 'adopt', 'replace'];

/** 201 with the code, the only time it is shown; a vendor the cloud does not know is 409, nothing stored. */
const makeCode: AdminRoute = {
  method: 'POST',
  path: /^\/codes$/,
  role: 'operator',
  async handle(ctx, req) {
    const body = new BodyReader(req.body, ['vendorId', 'deviceId', 'anyDevice', 'uses', 'ttlS', 'kind']);
    const vendorId = body.identity('vendorId', 'vendorId');
    if (vendorId === undefined) throw badRequest('vendorId is required');
    const deviceId = body.identity('deviceId', 'deviceId');
    const anyDevice = body.boolean('anyDevice') ?? false;
    if ((deviceId === undefined) !== anyDevice) throw badRequest('give deviceId, or anyDevice: true, not both');
    const kind = body.string('kind') ?? 'plain';
    if (!(KINDS as readonly string[]).includes(kind)) throw badRequest(`kind must be one of ${KINDS.join(', ')}`);
    const request = {
      vendorId,
      binding: deviceId === undefined ? ('any-device' as const) : { deviceId },
      uses: body.integer('uses', 1, 1_000_000) ?? DEFAULT_CODE_USES,
      ttlS: body.integer('ttlS', 60, 366 * 24 * 3600) ?? DEFAULT_CODE_TTL_S,
      kind: kind as CodeKind,
    };
    try {
      await refuseUnknownVendor(ctx.vendors, vendorId);
    } catch (err) {
      if (err instanceof OperatorInputError) throw new AdminError('conflict', err.message);
      throw err;
    }
    try {
      return ok(await createCode(ctx.store, ctx.keys, request, ctx.clock.wallNow(), operatorOf(ctx, req)), 201);
    } catch (err) {
      if (err instanceof OperatorInputError) throw badRequest(err.message.replace(/--([a-z-]+)/g, (_m, flag: string) => camel(flag)));
      throw err;
    }
  },
};

/** A flag's name as the API's field (`--device-id` → deviceId), so a message names what the caller sent. */
function camel(flag: string): string {
  return flag === 'any-device' ? 'anyDevice' : flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

const listCodes: AdminRoute = {
  method: 'GET',
  path: /^\/codes$/,
  role: 'viewer',
  async handle(ctx, req) {
    const query = new QueryReader(req.query, ['vendorId', 'cursor', 'limit']);
    const filters = { vendorId: query.identity('vendorId', 'vendorId') };
    const { rows, next } = await ctx.cursors.page(
      'codes',
      filters,
      query.page(),
      (key, limit) =>
        ctx.store.admin.pageCodes(
          { ...filters, now: ctx.clock.wallNow() },
          key === null ? null : { expiresAt: Number(key[0]), id: String(key[1]) },
          limit,
        ),
      (last) => [last.expiresAt, last.id],
    );
    return ok({ codes: rows, next });
  },
};

const deleteCode: AdminRoute = {
  method: 'DELETE',
  path: /^\/codes\/(?<id>[^/]+)$/,
  role: 'operator',
  async handle(ctx, req) {
    try {
      await cancelCode(ctx.store, req.params['id'] ?? '', operatorOf(ctx, req));
    } catch (err) {
      if (err instanceof OperatorInputError) throw notFound(err.message);
      throw err;
    }
    return ok({});
  },
};

const listPreauth: AdminRoute = {
  method: 'GET',
  path: /^\/preauth$/,
  role: 'viewer',
  async handle(ctx, req) {
    const query = new QueryReader(req.query, ['vendorId', 'cursor', 'limit']);
    const filters = { vendorId: query.identity('vendorId', 'vendorId') };
    const { rows, next } = await ctx.cursors.page(
      'preauth',
      filters,
      query.page(),
      (key, limit) =>
        ctx.store.admin.pagePreauth(filters, key === null ? null : { vendorId: String(key[0]), deviceId: String(key[1]) }, limit),
      (last) => [last.vendorId, last.deviceId],
    );
    return ok({ preauth: rows, next });
  },
};

/**
 * Lines `deviceId,publicKey`: the good ones added, each bad one (malformed, twice in the request, or a device or key
 * the store holds already) told by its line number; the store's conflicts are found one at a time and set aside.
 */
const addPreauth: AdminRoute = {
  method: 'POST',
  path: /^\/preauth$/,
  role: 'operator',
  async handle(ctx, req) {
    const body = new BodyReader(req.body, ['vendorId', 'lines']);
    const vendorId = body.identity('vendorId', 'vendorId');
    if (vendorId === undefined) throw badRequest('vendorId is required');
    const lines = (req.body as { lines?: unknown }).lines;
    if (!Array.isArray(lines) || !lines.every((l) => typeof l === 'string')) throw badRequest('lines must be an array of strings');
    if (lines.length > PREAUTH_LINES_MAX) throw new AdminError('too-large', `at most ${PREAUTH_LINES_MAX} lines a request`);
    const now = ctx.clock.wallNow();
    const rejected: { line: number; msg: string }[] = [];
    const rows = new Map<string, { row: PreauthRow; line: number }>();
    lines.forEach((text: string, i) => {
      try {
        const row = parsePreauthLine(text, vendorId, now);
        if (row === undefined) return;
        if (rows.has(row.deviceId)) throw new OperatorInputError(`deviceId ${row.deviceId} appears twice`);
        rows.set(row.deviceId, { row, line: i + 1 });
      } catch (err) {
        if (!(err instanceof OperatorInputError)) throw err;
        rejected.push({ line: i + 1, msg: err.message });
      }
    });
    const by = operatorOf(ctx, req);
    while (rows.size > 0) {
      const result = await ctx.store.addPreauth([...rows.values()].map((r) => r.row));
      if (!('conflict' in result)) break;
      const line = rows.get(result.conflict)?.line ?? 0;
      rows.delete(result.conflict);
      rejected.push({ line, msg: `deviceId ${result.conflict}, or its key, is enrolled or pre-authorised already` });
    }
    await auditPreauthorized(
      [...rows.values()].map((r) => r.row),
      by,
    );
    rejected.sort((a, b) => a.line - b.line);
    return ok({ added: rows.size, rejected });
  },
};

const deletePreauth: AdminRoute = {
  method: 'DELETE',
  path: /^\/preauth\/(?<vendorId>[^/]+)\/(?<deviceId>[^/]+)$/,
  role: 'operator',
  async handle(ctx, req) {
    const vendorId = identityParam(req.params['vendorId'], 'vendorId', 'vendorId');
    const deviceId = identityParam(req.params['deviceId'], 'deviceId', 'deviceId');
    try {
      await removePreauth(ctx.store, vendorId, deviceId, operatorOf(ctx, req));
    } catch (err) {
      if (err instanceof OperatorInputError) throw notFound(err.message);
      throw err;
    }
    return ok({});
  },
};

export const CODE_ROUTES: readonly AdminRoute[] = [makeCode, listCodes, deleteCode, listPreauth, addPreauth, deletePreauth];
