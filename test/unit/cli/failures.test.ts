import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { SLOW_RETRY_MS } from '../../../src/agent/token/backoff.js';
import { FailureRun } from '../../../src/agent/token/failures.js';

function run() {
  const lines: { level: number; msg: string; code: string; retryInMs: number }[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  // random 0.99: full jitter draws just under each cap of 1 s, 2 s, 4 s …
  return { failures: new FailureRun({ baseMs: 1000, capMs: 4000 }, () => 0.99, log), lines };
}

const transient = new BotlinkError('ERR_CLOUD_1006', 'system error', 'retry-backoff');
const needsConfig = new BotlinkError('ERR_CLOUD_1005', 'invalid signature', 'needs-config', { fix: 'check the secret' });

describe('FailureRun', () => {
  it('transient failures wait on the schedule, capped; a success starts it afresh', () => {
    const { failures } = run();
    const waits = [1, 2, 3, 4].map(() => Math.round(failures.failed(transient, 'ERR_INTERNAL').waitMs));
    expect(waits).toEqual([990, 1980, 3960, 3960]);
    failures.succeeded();
    expect(Math.round(failures.failed(transient, 'ERR_INTERNAL').waitMs)).toBe(990);
  });

  it('a failure a person must fix waits SLOW_RETRY_MS and is logged at error with its fix', () => {
    const { failures, lines } = run();
    expect(failures.failed(needsConfig, 'ERR_INTERNAL', 'provisioning failed')).toEqual({ error: needsConfig, waitMs: SLOW_RETRY_MS });
    expect(lines).toMatchObject([
      { level: 50, msg: 'provisioning failed: invalid signature', code: 'ERR_CLOUD_1005', fix: 'check the secret' },
    ]);
  });

  it('a transient failure is logged at warn, with the wait', () => {
    const { failures, lines } = run();
    failures.failed(transient, 'ERR_INTERNAL');
    expect(lines).toMatchObject([{ level: 40, msg: 'system error', retryInMs: 990 }]);
  });

  it('anything thrown that is not ours takes the given code and waits on the schedule', () => {
    const { failures } = run();
    const { error } = failures.failed(new Error('boom'), 'ERR_PROVISION');
    expect(error).toMatchObject({ code: 'ERR_PROVISION', retry: 'retry-backoff', message: 'boom' });
  });

  it('keeps the last failure until a success, and counts every failure by code', () => {
    const { failures } = run();
    failures.failed(transient, 'ERR_INTERNAL');
    failures.failed(needsConfig, 'ERR_INTERNAL');
    expect(failures.last).toBe(needsConfig);
    failures.succeeded();
    expect(failures.last).toBeUndefined();
    failures.failed(transient, 'ERR_INTERNAL');
    expect(failures.byCode).toEqual({ ERR_CLOUD_1006: 2, ERR_CLOUD_1005: 1 });
  });
});

describe('FailureRun: a failure that carries a Retry-After', () => {
  it('waits the longer of the schedule and the asked time stretched by a second draw; logs that wait', () => {
    const lines: { retryInMs: number }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const draws = [0.5, 0.2];
    const failures = new FailureRun({ baseMs: 1000, capMs: 4000 }, () => draws.shift() ?? 0, log);
    const limited = Object.assign(new BotlinkError('ERR_BROKER_RATE_LIMITED', 'slow down', 'retry-backoff'), { retryAfterMs: 30_000 });
    // The schedule draws 0.5 (500 ms); the Retry-After draws 0.2: 30 s × (1 + 0.5 × 0.2).
    expect(failures.failed(limited, 'ERR_INTERNAL').waitMs).toBe(33_000);
    expect(lines).toMatchObject([{ retryInMs: 33_000 }]);
    expect(draws).toEqual([]);
  });

  it('takes no second draw for a failure without one, so the schedule of signing mode is unchanged', () => {
    const draws = [0.5, 0.2];
    const failures = new FailureRun({ baseMs: 1000, capMs: 4000 }, () => draws.shift() ?? 0, pino({ level: 'silent' }));
    expect(failures.failed(transient, 'ERR_INTERNAL').waitMs).toBe(500);
    expect(draws).toEqual([0.2]);
  });
});
