import { describe, expect, it } from 'vitest';
import { patchStatus, type LinkStatus, type StatePatch } from '../../../src/agent/link/status.js';

const SINCE = 1_000;
const NOW = 9_000;
const BASE: LinkStatus = Object.freeze({
  state: 'backoff',
  since: SINCE,
  reconnects: 3,
  reconnectsByCause: { closed: 3 },
  lastError: 'closed (1006)',
  fix: 'check the network',
});

describe('patchStatus: a change of the link status', () => {
  it.each<{ why: string; patch: StatePatch; want: Partial<LinkStatus> | undefined; fix?: 'gone' }>([
    { why: 'the same state and words: no change', patch: { state: 'backoff' }, want: undefined },
    { why: 'a new retryInMs alone: no change', patch: { state: 'backoff', retryInMs: 5 }, want: undefined },
    {
      why: 'another state: since moves, the rest is kept',
      patch: { state: 'connecting' },
      want: { state: 'connecting', since: NOW, lastError: 'closed (1006)', fix: 'check the network' },
    },
    {
      why: 'other words in the same state: since stays',
      patch: { state: 'backoff', lastError: 'no token: x' },
      want: { state: 'backoff', since: SINCE, lastError: 'no token: x', fix: 'check the network' },
    },
    {
      why: 'fix: undefined clears it',
      patch: { state: 'connected', lastError: null, fix: undefined },
      want: { state: 'connected', since: NOW, lastError: null },
      fix: 'gone',
    },
    {
      why: 'a lastError given as undefined is null',
      patch: { state: 'backoff', lastError: undefined, fix: 'check the network' },
      want: { state: 'backoff', since: SINCE, lastError: null },
    },
  ])('$why', ({ patch, want, fix }) => {
    const next = patchStatus(BASE, patch, NOW);
    if (want === undefined) return expect(next).toBeUndefined();
    expect(next).toMatchObject({ ...want, reconnects: 3, reconnectsByCause: { closed: 3 } });
    if (fix === 'gone') expect(next).not.toHaveProperty('fix');
    expect(BASE).toMatchObject({ state: 'backoff', since: SINCE, fix: 'check the network' });
  });
});
