import { once } from 'node:events';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PendingRelay } from '../../../src/agent/local/pending-relay.js';
import { LOCAL_LIMITS, LocalApi } from '../../../src/agent/local/server.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { waitFor } from '../../helpers/wait-for.js';

/** The cap on local connections and the HTTP lifetime (issue 20, DESIGN §3.5). */

const { cleanups, service, device, daemon, tempDir } = useHarness();

/** A connection that sends nothing, and what became of it: refused ones close without a byte. */
async function idle(sock: string): Promise<{ s: Socket; closed: Promise<string> }> {
  const s = connect(sock);
  cleanups.push(() => s.destroy());
  let got = '';
  s.on('data', (b: Buffer) => (got += b.toString()));
  s.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => s.once('close', () => resolve(got)));
  await once(s, 'connect');
  return { s, closed };
}

function status(sock: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ socketPath: sock, path: '/v1/status', agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', reject)
      .end();
  });
}

describe('local connections', () => {
  it('refuses connections past localConnectionsMax at once, and takes new ones when a slot frees', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc, { botId: 'bot-1', localConnectionsMax: 4, logLevel: 'info' });
    daemon(d);
    await d.waitForLink('connected');
    await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
    const sock = join(d.runtimeDir, 'botlink.sock');
    const held = [await idle(sock), await idle(sock), await idle(sock), await idle(sock)];
    const refused = await Promise.all(Array.from({ length: 20 }, () => idle(sock)));
    // Closed by the daemon with not a byte said, long before any idle timeout.
    expect(await Promise.all(refused.map((r) => r.closed))).toEqual(Array.from({ length: 20 }, () => ''));
    held[0]!.s.destroy();
    await held[0]!.closed;
    // The daemon sees the hang-up on its own time: until then a request meets the cap and is refused, once each.
    let code = 0;
    for (let i = 0; i < 1000 && code !== 200; i++) code = await status(sock).catch(() => 0);
    expect(code).toBe(200);
    await waitFor(() => d.log().includes('connections refused at the cap of 4'), 15_000, 'the refusals told once');
    expect(d.log().match(/connections refused at the cap/g)).toHaveLength(1);
  });

  it('closes a busy keep-alive connection on its first answer past the HTTP lifetime', async () => {
    const clock = new ManualClock();
    const path = join(tempDir('local-cap-'), 'api.sock');
    const api = new LocalApi({
      path,
      gid: null,
      clock,
      maxConnections: 64,
      relay: new PendingRelay(),
      log: pino({ level: 'silent' }),
      status: () => ({ ok: true }),
      tokens: () => undefined,
    });
    await api.start();
    cleanups.push(() => api.stop());
    const s = connect(path);
    cleanups.push(() => s.destroy());
    await once(s, 'connect');
    let got = '';
    s.on('data', (b: Buffer) => (got += b.toString()));
    const closed = once(s, 'close');
    const ask = async (): Promise<string> => {
      const before = got.length;
      s.write('GET /v1/status HTTP/1.1\r\nHost: localhost\r\n\r\n');
      await waitFor(() => got.slice(before).includes('{"ok":true}'), 15_000, 'an answer');
      return got.slice(before);
    };
    expect(await ask()).toMatch(/Connection: keep-alive/i);
    await clock.advance(LOCAL_LIMITS.httpLifetimeMs - 1);
    expect(await ask()).toMatch(/Connection: keep-alive/i);
    await clock.advance(1);
    expect(await ask()).toMatch(/Connection: close/i);
    await closed;
    expect(api.connections.open).toBe(0);
  });
});
