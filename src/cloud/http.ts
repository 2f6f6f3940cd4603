import type { Dispatcher, Pool } from 'undici';
import { withBaselineParser } from './parser-tier.js';

/** undici's keep-alive pool with its `request` bound: all the cloud client uses of undici. */
export interface HttpPool {
  request(opts: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
  /** Ends every socket and request in flight at once; a graceful close would wait on a trickling server. */
  destroy(): Promise<void>;
}

interface UndiciParts {
  Pool: typeof import('undici/lib/dispatcher/pool.js');
  request: typeof import('undici/lib/api/api-request.js');
}

let loading: Promise<UndiciParts> | undefined;

/**
 * undici's index loads fetch, WebSocket, caches, mocks and proxies: about 1 MB of code, 20 MiB of RSS
 * and 60–100 ms of start-up (measured on a 2-core x86 VM). The agent needs only a Pool and the
 * `request` API, and neither while a synced clock and a valid cached token call for no request.
 * So both come from the two undici modules that define them, at the first request (the bundle
 * evaluates a dynamic import's module only then). test/unit/cloud/http.test.ts checks they are what
 * undici's index exports, so an upgrade that moves them fails there and not on a device.
 */
export function undiciParts(): Promise<UndiciParts> {
  loading ??= Promise.all([import('undici/lib/dispatcher/pool.js'), import('undici/lib/api/api-request.js')]).then(([pool, request]) => ({
    Pool: pool.default,
    request: request.default,
  }));
  return loading;
}

/** A Pool for `origin` whose `request` works without undici's index having been loaded. */
/**
 * Where undici's WebAssembly parser runs: 'baseline' keeps it in V8's baseline tier (parser-tier.ts: a
 * device parses a few answers an hour); 'optimizing' leaves V8 free to recompile it (a busy server, or
 * an operator who turns the measure off with the agent's httpParserTier).
 */
export type ParserTier = 'baseline' | 'optimizing';
export const PARSER_TIERS: readonly ParserTier[] = ['baseline', 'optimizing'];

export async function createPool(origin: string, options: Pool.Options, tier: ParserTier = 'baseline'): Promise<HttpPool> {
  const { Pool: PoolClass, request } = await undiciParts();
  const pool = new PoolClass(origin, options);
  return {
    request: tier === 'baseline' ? (opts) => withBaselineParser(() => request.call(pool, opts)) : (opts) => request.call(pool, opts),
    destroy: async () => {
      if (!pool.destroyed) await pool.destroy();
    },
  };
}
