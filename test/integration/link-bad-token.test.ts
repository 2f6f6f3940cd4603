import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/agent/time/clock.js';
import { LinkSupervisor, type TokenSource } from '../../src/agent/link/supervisor.js';
import { AgentKit } from '../helpers/agent-kit.js';
import { json, startScriptedServer } from '../helpers/scripted-server.js';
import { waitFor } from '../helpers/wait-for.js';

// Found by the agent fuzz: a token that cannot be an HTTP header value used to crash the link.
const unexpected: unknown[] = [];
const onUnexpected = (err: unknown): void => void unexpected.push(err);
beforeAll(() => process.on('unhandledRejection', onUnexpected));
afterAll(() => process.off('unhandledRejection', onUnexpected));

const BAD_TOKENS = ['abc\ndef', 'abc\u0000def', 'tök€n'];

describe('tokens that cannot be a header value', () => {
  it.each(BAD_TOKENS)('the client refuses %j from the service as a bad response', async (accessToken) => {
    const server = await startScriptedServer((_req, res) =>
      json(res, { accessToken, expireIn: 7200, refreshToken: 'r', refreshExpireIn: 604800, code: 0, msg: '' }),
    );
    const kit = new AgentKit({ url: server.url, manager: { backoff: { baseMs: 20, capMs: 100 } } });
    try {
      kit.tokens.start();
      await waitFor(() => kit.tokens.snapshot().lastError !== undefined, 10_000, 'a token error');
      expect(kit.tokens.snapshot().lastError?.code).toBe('ERR_BAD_RESPONSE');
      expect(kit.store.peekPair()).toBeUndefined();
      expect(unexpected.map(String)).toEqual([]);
    } finally {
      await kit.close();
      await server.close();
    }
  });

  it.each(BAD_TOKENS)('the link backs off instead of crashing when handed %j', async (bad) => {
    const invalidated: (string | undefined)[] = [];
    const tokens: TokenSource = { current: async () => bad, invalidate: (t) => void invalidated.push(t) };
    const kit = new AgentKit({ url: 'http://127.0.0.1:9' });
    const link = new LinkSupervisor({ wsUrl: 'ws://127.0.0.1:9/soulmate/voiceChat/v1', botId: 'bot-1', tokens, clock: systemClock, log: kit.log, random: () => 0 });
    // random 0 makes every backoff delay 0 ms, the worst case for this check: the link retries before
    // the test looks again (full jitter did that on CI). So record what it had done at each backoff.
    const backoffs: { reason: string; state: string; invalidated: (string | undefined)[] }[] = [];
    link.on('backoff', (b: { reason: string }) =>
      backoffs.push({ reason: b.reason, state: link.status.state, invalidated: [...invalidated] }),
    );
    link.start();
    try {
      await waitFor(() => backoffs.length > 0, 10_000, 'a backoff');
      expect(backoffs[0]?.reason).toContain('cannot open the WebSocket');
      expect(backoffs[0]?.state).toBe('backoff');
      expect(backoffs[0]?.invalidated).toEqual([bad]);
      expect(unexpected.map(String)).toEqual([]);
    } finally {
      await link.stop();
      await kit.close();
    }
  });
});
