import { describe, expect, it } from 'vitest';
import { checkChain, fusedStatement } from '../../../src/broker/store/chain.js';
import { enrollTx, revokeTx, rotateTx } from '../../../src/broker/store/rules/enrollment.js';
import { askPendingTx } from '../../../src/broker/store/rules/pending.js';
import { SPEND_VERIFIED } from '../../../src/broker/store/rules/requests.js';
import { type Body, type Op, UniqueViolation } from '../../../src/broker/store/sql.js';
import {
  BOT_OF_KEY,
  INSERT_KEY,
  QUEUE_DISPLACEMENT,
  REVOKE_BOT,
  REVOKE_REPLACED,
  ROTATE_AWAY,
  SPEND_CODE_USE,
  TOKEN_EXPIRY,
} from '../../../src/broker/store/statements.js';
import type { EnrollCommit, PendingAsk } from '../../../src/broker/store/types.js';

// The store's rules are plain generators (sql.ts): here they run against scripted answers, with no
// database, so each decision can be read off its table; test/integration/broker/store.test.ts runs the
// same rules on SQLite and PostgreSQL.

/** What a rule yields, one line each, and its outcome, answering each op with `answer` (which may throw). */
function runScripted<T>(body: Body<T>, answer: (op: Op) => unknown): { ops: string[]; outcome: T } {
  const ops: string[] = [];
  let next = body.next();
  while (!next.done) {
    const op = next.value;
    ops.push(
      op.kind === 'lock'
        ? `lock ${op.names.join(', ')}`
        : op.kind === 'get' || op.kind === 'run' || op.kind === 'all'
          ? `${op.kind} ${op.sql.split(' ').slice(0, 3).join(' ')}`
          : op.kind,
    );
    let value: unknown;
    let failure: { error: unknown } | undefined;
    try {
      value = answer(op);
    } catch (error) {
      failure = { error };
    }
    next = failure === undefined ? body.next(value) : body.throw(failure.error);
  }
  return { ops, outcome: next.value };
}

const commit: EnrollCommit = {
  admission: { by: 'code', hmac: 'h' },
  key: { keyId: 'k1', publicKey: 'pk' },
  botId: 'bot-1',
  deviceId: 'SN-1',
  vendorId: 'V1',
  replace: false,
  now: 5,
};
const sqlOf = (op: Op): string | undefined => ('sql' in op ? op.sql : undefined);

describe('enrollTx: the binding transaction', () => {
  it('takes the device lock first, then the code, and binds with nothing in the way', () => {
    const { ops, outcome } = runScripted(enrollTx(commit), (op) =>
      sqlOf(op) === SPEND_CODE_USE ? { hmac: 'h' } : op.kind === 'run' ? 1 : undefined,
    );
    expect(outcome).toEqual({ outcome: 'ok', replaced: [] });
    expect(ops[0]).toBe('lock device:V1\nSN-1, keys:bot-1');
    expect(ops.at(-1)).toBe('run INSERT INTO keys');
  });

  it.each<[string, (op: Op) => unknown, string]>([
    ['the code was spent meanwhile', () => undefined, 'spent'],
    ['another replica bound the keyId first', (op) => answerOr(op, new UniqueViolation('keys_pkey')), 'key-exists'],
    ['another replica bound the botId first', (op) => answerOr(op, new UniqueViolation('keys_active_bot')), 'device-exists'],
  ])('%s → %s', (_, answer, expected) => {
    expect(runScripted(enrollTx(commit), answer).outcome).toEqual({ outcome: expected, replaced: [] });
  });

  it('an error other than a unique index is not an outcome: it propagates', () => {
    expect(() => runScripted(enrollTx(commit), (op) => answerOr(op, new Error('disk I/O error')))).toThrow('disk I/O error');
  });

  it('a replace revokes the old key, drops its tokens and the device’s pre-authorisation, entombs past 16 retired keys, then binds, and says which keys it revoked', () => {
    const { ops, outcome } = runScripted(enrollTx({ ...commit, replace: true }), (op) =>
      sqlOf(op) === SPEND_CODE_USE
        ? { hmac: 'h' }
        : sqlOf(op) === REVOKE_REPLACED
          ? [{ keyId: 'k-old' }]
          : op.kind === 'run'
            ? 1
            : undefined,
    );
    expect(outcome).toEqual({ outcome: 'ok', replaced: ['k-old'] });
    expect(ops.filter((o) => o.startsWith('run') || o.startsWith('all'))).toEqual([
      'all UPDATE keys SET',
      'run DELETE FROM tokens',
      'run DELETE FROM preauth',
      'run INSERT INTO tombstones',
      'run DELETE FROM keys',
      'run INSERT INTO keys',
    ]);
  });
});

/** The code use answered, INSERT_KEY failing with `error`, anything else finding nothing. */
function answerOr(op: Op, error: Error): unknown {
  if (sqlOf(op) === SPEND_CODE_USE) return { hmac: 'h' };
  if (sqlOf(op) === INSERT_KEY) throw error;
  return undefined;
}

describe('rotateTx and revokeTx', () => {
  const device = { botId: 'b', deviceId: 'd', vendorId: 'v' };
  /** The old key's botId found, the rest as `then` answers. */
  const rotating = (then: (op: Op) => unknown) => (op: Op) => (sqlOf(op) === BOT_OF_KEY ? { botId: 'b' } : then(op));
  it.each<[string, (op: Op) => unknown, string]>([
    ['the old key is unknown', () => undefined, 'revoked'],
    ['the old key was no longer active', rotating(() => undefined), 'revoked'],
    ['the new key is known already', rotating((op) => (op.kind === 'get' ? { ...device, known: 1 } : 1)), 'key-exists'],
    [
      'a concurrent insert of the same new key',
      rotating((op) => {
        if (op.kind === 'run') throw new UniqueViolation('keys_pkey');
        return sqlOf(op) === ROTATE_AWAY ? device : undefined;
      }),
      'key-exists',
    ],
    ['the device handed over', rotating((op) => (sqlOf(op) === ROTATE_AWAY ? device : op.kind === 'run' ? 1 : undefined)), 'ok'],
  ])('rotate: %s → %s', (_, answer, expected) => {
    expect(runScripted(rotateTx('k-old', { keyId: 'k-new', publicKey: 'pk' }, 5), answer).outcome).toBe(expected);
  });

  it('rotate takes the botId’s keys lock before it rotates the old key away', () => {
    const { ops } = runScripted(
      rotateTx('k-old', { keyId: 'k-new', publicKey: 'pk' }, 5),
      rotating((op) => (sqlOf(op) === ROTATE_AWAY ? device : op.kind === 'run' ? 1 : undefined)),
    );
    expect(ops.slice(0, 3)).toEqual(['get SELECT bot_id AS', 'lock keys:b', 'get UPDATE keys SET']);
  });

  it('revoke takes the botId’s keys lock first, and says which keys it revoked', () => {
    const { ops, outcome } = runScripted(revokeTx('bot-1', 5), (op) => (sqlOf(op) === REVOKE_BOT ? [{ keyId: 'k1' }, { keyId: 'k2' }] : 0));
    expect(outcome).toEqual({ keyIds: ['k1', 'k2'], displaceAt: null });
    expect(ops[0]).toBe('lock keys:bot-1');
    expect(ops).not.toContain('run INSERT INTO displacements');
  });

  /** revoke --displace, the botId's cached token expiring at `expiresAt` (none: undefined), `revoked` keys revoked. */
  function displacing(expiresAt: number | undefined, revoked = [{ keyId: 'k1' }]) {
    const queued: unknown[][] = [];
    const run = runScripted(revokeTx('bot-1', 5, { displaceAfterExpiryMs: 60_000 }), (op) => {
      if (sqlOf(op) === REVOKE_BOT) return revoked;
      if (sqlOf(op) === TOKEN_EXPIRY) return expiresAt === undefined ? undefined : { expiresAt };
      if (sqlOf(op) === QUEUE_DISPLACEMENT && 'params' in op) queued.push([...op.params]);
      return 0;
    });
    return { ...run, queued };
  }

  it('revoke --displace reads the token’s expiry before it drops the token, and queues a displacement just after it', () => {
    const { ops, outcome, queued } = displacing(7_200_000);
    expect(outcome).toEqual({ keyIds: ['k1'], displaceAt: 7_260_000 });
    expect(queued).toEqual([['bot-1', 7_260_000, 0]]);
    expect(ops.indexOf('get SELECT access_expires_at AS')).toBeLessThan(ops.indexOf('run DELETE FROM tokens'));
  });

  it('revoke --displace queues nothing with no token cached, or no key revoked', () => {
    for (const { outcome, queued } of [displacing(undefined), displacing(7_200_000, [])]) {
      expect(outcome.displaceAt).toBeNull();
      expect(queued).toEqual([]);
    }
  });
});

describe('gated chains', () => {
  it('PostgreSQL runs one as a single statement: each step a CTE, each marker a scalar read of the step it names', () => {
    const sql = fusedStatement(SPEND_VERIFIED);
    expect(sql).toMatch(/^WITH k AS \(/);
    expect(sql).toContain('n AS (INSERT INTO nonces');
    expect(sql).toContain('WHERE (SELECT ok FROM k) = 1');
    expect(sql).toContain('(SELECT count FROM h) <= CAST($7 AS BIGINT)');
    expect(sql).toMatch(
      /\(SELECT ok FROM n\) AS "n\.ok", \(SELECT count FROM h\) AS "h\.count"\) AS out LEFT JOIN \(SELECT .* FROM keys LEFT JOIN tokens/s,
    );
    expect(sql).not.toMatch(/\{[a-z_]+\.[a-z_]+\}/);
  });

  it('a step may read only the steps before it, and an output must name a step', () => {
    const step = (name: string, sql: string) => ({ name, sql });
    expect(() =>
      checkChain({ name: 'c', read: undefined, steps: [step('a', 'SELECT {b.x}'), step('b', 'SELECT 1 AS x')], outputs: [] }),
    ).toThrow('chain c: a reads b before it runs');
    expect(() => checkChain({ name: 'c', read: undefined, steps: [step('a', 'SELECT 1 AS x')], outputs: ['z.x'] })).toThrow(
      'chain c: no step for output z.x',
    );
  });
});

describe('askPendingTx: a first ask’s transaction', () => {
  const ask: PendingAsk = {
    row: {
      keyId: 'k1',
      publicKey: 'pk',
      vendorId: 'V1',
      deviceId: 'SN-1',
      appId: '',
      type: 'PHYSICAL_ROBOT',
      name: 'SN-1',
      source: '192.0.2.1',
      firstAsked: 5,
      lastAsked: 5,
    },
    sourceBucket: '192.0.2.1',
    perSource: 50,
    perVendor: 10_000,
    window: { bucket: 'ask:k1/60000', start: 0 },
  };
  const read = { 'c.asked': 0, 'c.known': 0, 'c.held': 0, 'c.source': 49, 'c.vendor': 9_999 };
  const answering = (out: Record<string, unknown>) => (op: Op) => (op.kind === 'chain' ? { read: undefined, out } : undefined);

  it('takes the device’s lock, then the source’s, in one step, then judges and writes in one statement', () => {
    const { ops, outcome } = runScripted(askPendingTx(ask), answering({ ...read, 'r.ok': 1 }));
    expect(ops).toEqual(['lock device:V1\nSN-1, pending-source:192.0.2.1', 'chain']);
    expect(outcome).toBe('created');
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['the key waits already', { 'c.asked': 1, 'c.known': 1 }, 'asked'],
    ['the keyId is known in another state', { 'c.known': 1, 'c.held': 1 }, 'key-exists'],
    ['the device is held', { 'c.held': 1, 'c.source': 50 }, 'device-exists'],
    ['the source is full', { 'c.source': '50', 'c.vendor': 10_000 }, 'source-full'],
    ['the vendor is full (PostgreSQL’s BIGINT as text)', { 'c.vendor': '10000' }, 'vendor-full'],
  ])('%s → %s, in the order §3.7 tells them', (_, over, expected) => {
    expect(runScripted(askPendingTx(ask), answering({ ...read, ...over, 'r.ok': null })).outcome).toBe(expected);
  });

  it('a concurrent first ask of the same key that inserted first → asked', () => {
    const raced = (op: Op) => {
      if (op.kind === 'chain') throw new UniqueViolation('pending_pkey');
      return undefined;
    };
    expect(runScripted(askPendingTx(ask), raced).outcome).toBe('asked');
  });

  it('every rule held yet no row made is a fault, not an outcome', () => {
    expect(() => runScripted(askPendingTx(ask), answering({ ...read, 'r.ok': null }))).toThrow('made no row');
  });
});
