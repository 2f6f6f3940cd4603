import { describe, expect, it } from 'vitest';
import { CloudClient, type CloudClientOptions } from '../../../src/cloud/client.js';
import { CloudError } from '../../../src/cloud/errors.js';
import { systemClock } from '../../../src/clock.js';
import { useHarness } from '../../helpers/harness.js';
import { startScriptedServer, trickleBody, type Script } from '../../helpers/scripted-server.js';

const NOW = 1_763_683_200_000;
/** A trickle this slow takes 1000 × 100 ms = 100 s to finish: far past any bound below. */
const TRICKLE = { everyMs: 100, totalBytes: 1000 };
const { cleanups } = useHarness();

type Method = 'getToken' | 'refreshToken' | 'registerDevice' | 'sampleServerTime';
const POSTS: Method[] = ['getToken', 'refreshToken', 'registerDevice'];

function call(client: CloudClient, method: Method): Promise<unknown> {
  switch (method) {
    case 'getToken':
      return client.getToken({ kind: 'bot', id: 'bot-1' }, NOW);
    case 'refreshToken':
      return client.refreshToken({ kind: 'bot', id: 'bot-1' }, 'rt');
    case 'registerDevice':
      return client.registerDevice('vtok', { vendorId: 'V1', appId: '', deviceId: 'SN', type: 'PHYSICAL_ROBOT', name: 'SN' });
    case 'sampleServerTime':
      return client.sampleServerTime();
  }
}

/** A client of a scripted server; `arrived` resolves when the first request has reached it. */
async function rig(script: Script, opts: Partial<CloudClientOptions> = {}) {
  let arrive!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const server = await startScriptedServer((req, res, body) => {
    arrive();
    script(req, res, body);
  });
  const client = new CloudClient({
    baseUrl: server.url,
    accessKeyId: 'AK',
    secretKey: { reveal: () => 'SK' },
    clock: systemClock,
    ...opts,
  });
  cleanups.push(
    () => server.close(),
    () => client.close(),
  );
  return { server, client, arrived };
}

/** The rejection of `promise` and how long it took to come, from now. */
async function rejection(promise: Promise<unknown>): Promise<{ err: CloudError; ms: number }> {
  const started = performance.now();
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CloudError);
  return { err: err as CloudError, ms: performance.now() - started };
}

describe('every cloud call has a total deadline', () => {
  it.each(POSTS)('%s gives up on a server trickling its body a byte at a time, long before the trickle ends', async (method) => {
    const sent = { bytes: 0 };
    // The per-phase timeouts stay long: only the total deadline can end this call.
    const { client } = await rig(trickleBody(TRICKLE.everyMs, TRICKLE.totalBytes, sent), { deadlineMs: 300, bodyTimeoutMs: 60_000 });
    const { err, ms } = await rejection(call(client, method));
    expect(err).toMatchObject({ code: 'ERR_TIMEOUT', retry: 'retry-backoff' });
    expect(err.message).toContain('the cloud did not answer within 0.3 s');
    expect(sent.bytes).toBeLessThan(TRICKLE.totalBytes);
    expect(ms).toBeLessThan(10_000);
  });

  it.each([...POSTS, 'sampleServerTime' as const])('%s gives up on a server that never sends headers', async (method) => {
    const { client } = await rig(() => undefined, { deadlineMs: 300, headersTimeoutMs: 60_000 });
    const { err, ms } = await rejection(call(client, method));
    expect(err).toMatchObject({ code: 'ERR_TIMEOUT', retry: 'retry-backoff' });
    expect(err.message).toContain('the cloud did not answer within 0.3 s');
    expect(ms).toBeLessThan(10_000);
  });

  it('gives up on a connection that never comes up', async () => {
    const { client } = hungConnect({ deadlineMs: 300 });
    const { err, ms } = await rejection(call(client, 'getToken'));
    expect(err).toMatchObject({ code: 'ERR_TIMEOUT', retry: 'retry-backoff' });
    expect(ms).toBeLessThan(10_000);
  });

  it('defaults to the longest per-phase timeout, so no phase outlasts it', async () => {
    // The body timeout is the longest and restarts with every byte: only the deadline it implies ends the call.
    const { client } = await rig(trickleBody(TRICKLE.everyMs, TRICKLE.totalBytes, { bytes: 0 }), {
      connectTimeoutMs: 500,
      headersTimeoutMs: 500,
      bodyTimeoutMs: 2000,
    });
    const { err } = await rejection(call(client, 'getToken'));
    expect(err).toMatchObject({ code: 'ERR_TIMEOUT', retry: 'retry-backoff' });
    expect(err.message).toContain('the cloud did not answer within 2 s');
  });

  it('a call that finishes within the deadline is not disturbed by it', async () => {
    const { client } = await rig(
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ accessToken: 'at', expireIn: 60, code: 0, msg: '' }));
      },
      { deadlineMs: 5000 },
    );
    await expect(client.refreshToken({ kind: 'bot', id: 'b' }, 'rt')).resolves.toEqual({ accessToken: 'at', expireIn: 60 });
  });
});

describe('CloudClient.close() ends what is in flight', () => {
  it.each([
    ['a trickling body', trickleBody(TRICKLE.everyMs, TRICKLE.totalBytes, { bytes: 0 })],
    ['headers that never come', (() => undefined) as Script],
  ])('rejects a call waiting on %s at once, and the close itself completes', async (_name, script) => {
    const { client, arrived } = await rig(script, { deadlineMs: 60_000, headersTimeoutMs: 60_000, bodyTimeoutMs: 60_000 });
    const inFlight = rejection(call(client, 'getToken'));
    await arrived;
    await client.close();
    const { err } = await inFlight;
    expect(err).toMatchObject({ code: 'ERR_NETWORK', retry: 'retry-backoff' });
    expect(err.message).toContain('/auth/getToken: the cloud client is closed');
  });

  it('rejects a call still waiting for its connection', async () => {
    const { client } = hungConnect({ deadlineMs: 60_000 });
    const inFlight = rejection(call(client, 'sampleServerTime'));
    await client.close();
    const { err } = await inFlight;
    expect(err).toMatchObject({ code: 'ERR_NETWORK', retry: 'retry-backoff' });
    expect(err.message).toContain('the cloud client is closed');
  });
});

/** A client whose host name never resolves: its calls wait for a connection undici has no way to abort. */
function hungConnect(opts: Partial<CloudClientOptions>) {
  const client = new CloudClient({
    baseUrl: 'http://cloud.invalid:8080',
    accessKeyId: 'AK',
    secretKey: { reveal: () => 'SK' },
    clock: systemClock,
    connectTimeoutMs: 60_000,
    lookup: () => undefined,
    ...opts,
  });
  cleanups.push(() => client.close());
  return { client };
}
