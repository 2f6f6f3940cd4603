/**
 * The admin API's pending queue (DESIGN §3.8, code-less enrollment §3.7), as thin handlers over a PendingBook: the
 * queue itself — its table, accept (the enrollment), reject — is the store's and enrollment's, wired in by the broker.
 */
import { type AdminRoute, ok, operatorOf } from './context.js';
import { badRequest, notFound } from './errors.js';
import { BodyReader, QueryReader } from './input.js';
import type { PendingBook } from './pending-book.js';

const KEY_ID = '(?<keyId>[0-9a-f]{32})';

function bookOf(book: PendingBook | undefined): PendingBook {
  if (!book) throw notFound('code-less enrollment is not part of this broker');
  return book;
}

const listPending: AdminRoute = {
  method: 'GET',
  path: /^\/pending$/,
  role: 'viewer',
  async handle(ctx, req) {
    const query = new QueryReader(req.query, ['vendorId', 'q', 'source', 'cursor', 'limit']);
    const filters = { vendorId: query.identity('vendorId', 'vendorId'), q: query.prefix('q'), source: query.prefix('source') };
    const book = bookOf(ctx.pending);
    const { rows, next } = await ctx.cursors.page(
      'pending',
      filters,
      query.page(),
      (key, limit) =>
        book.listPending(
          filters,
          key === null ? null : { vendorId: String(key[0]), deviceId: String(key[1]), keyId: String(key[2]) },
          limit,
        ),
      (last) => [last.vendorId, last.deviceId, last.keyId],
    );
    return ok({ pending: rows, next });
  },
};

const accept: AdminRoute = {
  method: 'POST',
  path: new RegExp(`^/pending/${KEY_ID}/accept$`),
  role: 'operator',
  async handle(ctx, req) {
    const deviceId = new BodyReader(req.body, ['deviceId']).identity('deviceId', 'deviceId');
    if (deviceId === undefined) throw badRequest('deviceId (the device the operator expects) is required');
    const { botId } = await bookOf(ctx.pending).accept(req.params['keyId'] ?? '', deviceId, operatorOf(ctx, req));
    return ok({ state: 'active', botId });
  },
};

const reject: AdminRoute = {
  method: 'POST',
  path: new RegExp(`^/pending/${KEY_ID}/reject$`),
  role: 'operator',
  async handle(ctx, req) {
    new BodyReader(req.body, []);
    const keyId = req.params['keyId'] ?? '';
    if (!(await bookOf(ctx.pending).reject(keyId, operatorOf(ctx, req)))) throw notFound(`no pending key ${keyId}`);
    return ok({ state: 'rejected' });
  },
};

const rejectMany: AdminRoute = {
  method: 'POST',
  path: /^\/pending\/reject$/,
  role: 'operator',
  async handle(ctx, req) {
    const body = new BodyReader(req.body, ['vendorId', 'source', 'firstAskedBefore']);
    const filter = {
      vendorId: body.identity('vendorId', 'vendorId'),
      source: body.string('source'),
      firstAskedBefore: body.integer('firstAskedBefore', 0, Number.MAX_SAFE_INTEGER),
    };
    return ok({ rejected: await bookOf(ctx.pending).rejectMany(filter, operatorOf(ctx, req)) });
  },
};

export const PENDING_ROUTES: readonly AdminRoute[] = [listPending, rejectMany, accept, reject];
