import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createTcpServer, type Server } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { doctorSummary } from '../../../src/cli/commands/doctor.js';
import { describe, expect, it } from 'vitest';
import { CloudClient } from '../../../src/cloud/client.js';
import { systemClock } from '../../../src/clock.js';
import { failWith } from '../../../src/doctor/check.js';
import { runDoctor } from '../../../src/doctor/doctor.js';
import { checkDns, checkTls, checkWsHandshake, endpointOf } from '../../../src/doctor/net.js';
import { Secret } from '../../../src/agent/config/secret.js';
import { WsMessage } from '../../../src/protocol/codes.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import type { ReferenceService } from '../../../src/service/server.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { useHarness } from '../../helpers/harness.js';
import { requireTool } from '../../../scripts/lib/tools.js';

const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };
const { cleanups, service, device, tempDir } = useHarness();

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as { port: number }).port;
}

async function botToken(svc: ReferenceService): Promise<string> {
  const api = new CloudClient({ baseUrl: svc.url, accessKeyId: 'AK', secretKey: new Secret('SK'), clock: systemClock });
  cleanups.push(() => api.close());
  return (await api.getToken({ kind: 'bot', id: 'bot-1' }, systemClock.wallNow())).accessToken;
}

const signal = (ms = 5000) => AbortSignal.timeout(ms);

describe('failWith', () => {
  it('prints the message as the detail and the fix the error carries, never one cut out of the message', () => {
    const err = new BotlinkError(
      'ERR_STORE_ACCESS',
      'cannot use the token store /x (EACCES: no). Fix: this is not cut out',
      'needs-config',
      { fix: 'chown it' },
    );
    expect(failWith(err, 'fallback')).toEqual({
      status: 'fail',
      detail: 'cannot use the token store /x (EACCES: no). Fix: this is not cut out',
      fix: 'chown it',
    });
  });

  it('falls back to the fix of the check for an error that carries none, or anything else thrown', () => {
    expect(failWith(new BotlinkError('ERR_INTERNAL', 'odd — really', 'fatal'), 'check the disk')).toEqual({
      status: 'fail',
      detail: 'odd — really',
      fix: 'check the disk',
    });
    expect(failWith(new Error('boom'), 'check the disk')).toEqual({ status: 'fail', detail: 'boom', fix: 'check the disk' });
  });
});

describe('endpointOf and checkDns', () => {
  it('takes the default port from the scheme and strips IPv6 brackets', () => {
    expect(endpointOf(new URL('https://api.example.com'))).toEqual({ host: 'api.example.com', port: 443 });
    expect(endpointOf(new URL('http://[::1]:8080/x'))).toEqual({ host: '::1', port: 8080 });
  });

  it('passes IP literals without a lookup, resolves names, and fails a name that cannot exist', async () => {
    expect(await checkDns(new URL('http://[::1]:1'))).toEqual({ status: 'ok', detail: '::1 (IP address)' });
    expect((await checkDns(new URL('http://localhost:1'))).status).toBe('ok');
    const missing = await checkDns(new URL('https://botlink-doctor.invalid'));
    expect(missing).toMatchObject({ status: 'fail', fix: expect.stringMatching(/baseUrl|resolv\.conf/) });
  });
});

describe('checkTls', () => {
  it('reports a self-signed certificate by its code with a CA fix', async () => {
    const dir = tempDir('botlink-tls-');
    execFileSync(
      requireTool('openssl'),
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const server = createTlsServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (s) => s.end());
    const port = await listen(server);
    const outcome = await checkTls(new URL(`https://localhost:${port}`), signal(), systemClock);
    expect(outcome).toMatchObject({ status: 'fail', detail: `localhost:${port}: DEPTH_ZERO_SELF_SIGNED_CERT` });
    expect(outcome.fix).toMatch(/NODE_EXTRA_CA_CERTS/);
  });

  it('gives up when the peer never answers the handshake', async () => {
    // Reads (so it sees the client go away, and close() in cleanup does not wait) but never answers.
    const port = await listen(createTcpServer((socket) => socket.resume()));
    const started = performance.now();
    const outcome = await checkTls(new URL(`https://127.0.0.1:${port}`), signal(300), systemClock);
    expect(outcome).toMatchObject({ status: 'fail', detail: expect.stringMatching(/timed out/) });
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('passes plain http (the config allows it only on loopback)', async () => {
    expect(await checkTls(new URL('http://127.0.0.1:1'), signal(), systemClock)).toEqual({
      status: 'ok',
      detail: 'plain http on loopback',
    });
  });
});

describe('checkWsHandshake', () => {
  it('opens with a valid token and closes with 1000', async () => {
    const svc = await service(SEED);
    const token = await botToken(svc);
    const outcome = await checkWsHandshake(svc.wsUrl, 'bot-1', token, signal(), systemClock);
    expect(outcome).toMatchObject({ status: 'ok', detail: expect.stringMatching(/accepted bot bot-1 .*closed with 1000/) });
    expect(svc.stats.ws.total).toBe(1);
  });

  it.each(['handshake', 'frame', 'close-reason'] as const)('recognises Unauthorized carried as a %s', async (form) => {
    const svc = await service(SEED);
    const token = await botToken(svc);
    svc.faults.refuseWebSockets(WsMessage.UNAUTHORIZED, form);
    const outcome = await checkWsHandshake(svc.wsUrl, 'bot-1', token, signal(), systemClock);
    expect(outcome).toMatchObject({ status: 'fail', detail: 'refused: Unauthorized', fix: expect.stringMatching(/account configuration/) });
  });

  it('names botlink provision when the service says the botId is not found or invalid', async () => {
    const svc = await service(SEED);
    // The service judges the token first, so only a valid token with no botId draws this answer.
    const outcome = await checkWsHandshake(svc.wsUrl, '', await botToken(svc), signal(), systemClock);
    expect(outcome).toMatchObject({
      status: 'fail',
      detail: `refused: ${WsMessage.BOT_INVALID}`,
      fix: expect.stringMatching(/botlink provision/),
    });
  });
});

describe('runDoctor', () => {
  it('keeps every check within its time limit when the service answers too slowly', async () => {
    const svc = await service(SEED);
    svc.faults.setLatencyMs(10_000);
    const d = device(svc, { botId: 'bot-1' }, 'SK');
    const started = performance.now();
    const report = await runDoctor({ configFile: d.configFile, env: cleanEnv(), timeoutMs: 300 });
    // Far below the 10 s a check that waited for the service would take alone, and far above the 0.7 s they take here.
    expect(performance.now() - started).toBeLessThan(8000);
    const status = Object.fromEntries(report.results.map((r) => [r.name, r.status]));
    expect(status).toMatchObject({ tcp: 'ok', 'server time': 'fail', getToken: 'fail', websocket: 'skip', database: 'ok' });
    expect(report.results.find((r) => r.name === 'server time')?.detail).toMatch(/did not answer (in time|within 0.3 s)/);
    expect(report).toMatchObject({ configUsable: true, timedOut: false });
  });
});

describe('the summary says why the exit status is what it is', () => {
  const r = (name: string, status: 'ok' | 'fail' | 'skip') => ({ name, status });
  it.each([
    [[r('a', 'ok'), r('b', 'ok')], true, 0, '2 checks, 0 failed: exit 0, every check passed'],
    [
      [r('a', 'ok'), r('clock', 'skip')],
      true,
      1,
      '2 checks, 0 failed, 1 skipped: exit 1, a check was skipped (clock), and a skipped check has not passed',
    ],
    [[r('tcp', 'fail'), r('tls', 'skip')], true, 1, '2 checks, 1 failed, 1 skipped: exit 1, a check failed (tcp)'],
    [[r('a', 'fail'), r('b', 'fail'), r('c', 'fail'), r('d', 'fail')], true, 1, '4 checks, 4 failed: exit 1, checks failed (a, b, c, …)'],
    [
      [r('config', 'fail'), r('b', 'skip')],
      false,
      78,
      '2 checks, 1 failed, 1 skipped: exit 78, the configuration or its secret file cannot be used (config)',
    ],
  ] as const)('%j (config usable: %s) → %i', (results, usable, code, line) => {
    expect(doctorSummary(results, usable)).toEqual({ code, line });
  });
});
