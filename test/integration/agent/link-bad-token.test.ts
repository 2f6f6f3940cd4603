import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LinkSupervisor, type TokenSource } from '../../../src/agent/link/supervisor.js';
import { AgentKit } from '../../helpers/agent-kit.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { json, startScriptedServer } from '../../helpers/scripted-server.js';

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
    let failed: () => void;
    const failure = new Promise<void>((resolve) => (failed = resolve));
    const kit: AgentKit = new AgentKit({
      url: server.url,
      manager: { backoff: { baseMs: 20, capMs: 100 }, onChange: () => kit.tokens.snapshot().lastError && failed() },
    });
    try {
      kit.tokens.start();
      await failure;
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
    // On a manual clock the retry waits for the test instead of racing it (full jitter can make it 0 ms).
    const clock = new ManualClock();
    const link = new LinkSupervisor({
      wsUrl: 'ws://127.0.0.1:9/soulmate/voiceChat/v1',
      botId: 'bot-1',
      tokens,
      clock,
      log: kit.log,
      random: () => 0.5,
    });
    const backoff = once(link, 'backoff');
    link.start();
    try {
      const [{ reason }] = (await backoff) as [{ reason: string }];
      expect(reason).toContain('cannot open the WebSocket');
      expect(link.status.state).toBe('backoff');
      expect(invalidated).toEqual([bad]);
      expect(clock.pending()).toEqual([250]);
      const again = once(link, 'backoff');
      await clock.advance(250);
      await again;
      expect(invalidated).toEqual([bad, bad]);
      expect(unexpected.map(String)).toEqual([]);
    } finally {
      await link.stop();
      await kit.close();
    }
  });
});
