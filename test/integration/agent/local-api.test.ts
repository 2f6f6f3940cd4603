import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { StatusDoc } from '../../../src/agent/daemon/status.js';
import { Exit } from '../../../src/cli/frame/exit.js';
import { nodeForOtherUsers } from '../../helpers/bundle.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import { waitFor } from '../../helpers/wait-for.js';
import type { DeviceDir } from '../../helpers/daemon-proc.js';

const { cleanups, service, device, daemon, tempDir } = useHarness();

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP/1.1 request over the Unix socket. */
function call(socketPath: string, path: string, opts: { method?: string; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers = opts.body === undefined ? {} : { 'Content-Length': Buffer.byteLength(opts.body) };
    const req = request({ socketPath, path, method: opts.method ?? 'GET', headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** A folder every uid may traverse (mkdtemp makes 0700 ones), for the socket. */
function openDir(): string {
  const dir = tempDir('botlink-sock-');
  chmodSync(dir, 0o755);
  return dir;
}

async function listening(d: DeviceDir): Promise<void> {
  await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
}

/** A daemon connected to a fresh service, its local API listening; `before` is its first connected status. */
async function connectedDaemon() {
  const svc = await service(DAEMON_SEED);
  const d = device(svc);
  const proc = daemon(d);
  const before = await d.waitForLink('connected');
  await listening(d);
  return { svc, d, proc, before, sock: join(d.runtimeDir, 'botlink.sock') };
}

/** The raw bytes a peer sends, then half-closes; resolves with what came back once the server closed. */
function raw(socketPath: string, bytes: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(socketPath);
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => resolve(got));
    s.end(bytes);
  });
}

describe('the local API on its Unix socket (DESIGN §3.5)', () => {
  it('serves the status object and the access token, never a refresh token, with mode 0660 and localGroup', async () => {
    const svc = await service(DAEMON_SEED);
    const sock = join(openDir(), 'api.sock');
    const d = device(svc, { botId: 'bot-1', localSocket: sock, localGroup: 4243 });
    const proc = daemon(d);
    await d.waitForLink('connected');
    await listening(d);

    const st = statSync(sock);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o660);
    expect(st.gid).toBe(4243);

    const status = await call(sock, '/v1/status');
    expect(status.status).toBe(200);
    expect(status.headers['content-type']).toBe('application/json');
    const doc = JSON.parse(status.body) as StatusDoc;
    expect(doc).toMatchObject({ pid: proc.child.pid, identity: { kind: 'bot', id: 'bot-1' }, link: { state: 'connected' } });
    expect(doc.relay).toEqual({ attached: false, framesUp: 0, framesDown: expect.any(Number), dropped: expect.any(Number), observers: 0 });

    const token = await call(sock, '/v1/token');
    expect(token.status).toBe(200);
    const body = JSON.parse(token.body) as { accessToken: string; expiresAt: number };
    expect(Object.keys(body).sort()).toEqual(['accessToken', 'expiresAt']);
    expect(body.accessToken.length).toBeGreaterThan(8);
    expect(body.expiresAt).toBe(doc.token.accessExpiresAt);
    expect(status.body).not.toContain(body.accessToken);
    // status.json carries the same counters, as of its last state change.
    expect(d.status()?.relay).toMatchObject({ attached: false, framesUp: 0 });
  });

  it('answers unknown paths 404, other methods 405, a body 413, and other upgrade paths 404', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await listening(d);
    const sock = join(d.runtimeDir, 'botlink.sock');
    const missing = await call(sock, '/v1/nothing');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body)).toEqual({ code: 404, msg: expect.stringContaining('/v1/status') });
    const post = await call(sock, '/v1/token', { method: 'POST' });
    expect([post.status, post.headers.allow]).toEqual([405, 'GET']);
    expect((await call(sock, '/v1/status', { method: 'GET', body: 'x' })).status).toBe(413);
    const upgrade = await raw(sock, 'GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    expect(upgrade).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
  });

  it('says why there is no token (503) while the cloud hangs or refuses, without waiting for it', async () => {
    // A cloud that accepts and never answers: the daemon's call waits its full httpTimeoutMs.
    const hang: Server = createServer(() => undefined);
    await new Promise<void>((resolve) => hang.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => hang.close(resolve)));
    const port = (hang.address() as AddressInfo).port;
    hang.on('connection', (s) => cleanups.push(() => s.destroy()));
    const d = device(`http://127.0.0.1:${port}`, { botId: 'bot-1', httpTimeoutMs: 600_000 });
    daemon(d);
    await listening(d);
    const sock = join(d.runtimeDir, 'botlink.sock');
    const token = await call(sock, '/v1/token');
    expect(token.status).toBe(503);
    expect(JSON.parse(token.body)).toEqual({ code: 503, msg: expect.stringMatching(/^no token now: botlink is getting one right now/) });
    expect((await call(sock, '/v1/status')).status).toBe(200);

    // A cloud that refuses connections: once the manager has failed, the reason is its error.
    hang.close();
    const refused = device(`http://127.0.0.1:${port}`);
    daemon(refused);
    await listening(refused);
    await waitFor(() => Boolean(refused.status()?.token.lastError), 10_000, 'a token error in status.json');
    const why = await call(join(refused.runtimeDir, 'botlink.sock'), '/v1/token');
    expect(why.status).toBe(503);
    expect(JSON.parse(why.body).msg).toContain(`no token now: ${refused.status()!.token.lastError}`);
  });

  it('replaces the dead socket a crash left, refuses a live one, and removes its own at stop', async () => {
    const svc = await service(DAEMON_SEED);
    const sock = join(openDir(), 'api.sock');
    const d = device(svc, { botId: 'bot-1', localSocket: sock });
    const crashed = daemon(d);
    await listening(d);
    await crashed.stop('SIGKILL');
    expect(statSync(sock).isSocket()).toBe(true);

    writeFileSync(d.logFile, '');
    const second = daemon(d);
    await listening(d);
    expect((await call(sock, '/v1/status')).status).toBe(200);

    // Another daemon (its own stateDir) on the same socket path must not take it over.
    const other = device(svc, { botId: 'bot-1', localSocket: sock });
    const refused = await daemon(other).exited;
    expect(refused.code).toBe(Exit.UNAVAILABLE);
    expect(other.log()).toContain(`another process serves the local API socket ${sock}`);
    expect((await call(sock, '/v1/status')).status).toBe(200);

    expect((await second.stop('SIGTERM')).code).toBe(0);
    expect(existsSync(sock)).toBe(false);
  });

  it('lets a process in localGroup connect and refuses one outside it with EACCES', async () => {
    const setpriv = requireTool('setpriv');
    const svc = await service(DAEMON_SEED);
    const sock = join(openDir(), 'api.sock');
    const d = device(svc, { botId: 'bot-1', localSocket: sock, localGroup: 4243 });
    daemon(d);
    await listening(d);
    const probe = `require('node:http').get({ socketPath: ${JSON.stringify(sock)}, path: '/v1/status' }, (r) => { console.log(r.statusCode); r.resume(); }).on('error', (e) => console.log(e.code))`;
    const asUid = (gid: number) =>
      new Promise<string>((resolve, reject) => {
        const child = spawn(setpriv, ['--reuid', '4242', '--regid', String(gid), '--clear-groups', nodeForOtherUsers(), '-e', probe]);
        let out = '';
        child.stdout.on('data', (b: Buffer) => (out += b.toString()));
        child.stderr.on('data', (b: Buffer) => (out += b.toString()));
        child.on('error', reject);
        child.on('close', () => resolve(out.trim()));
      });
    expect(await asUid(4243)).toBe('200');
    expect(await asUid(4244)).toBe('EACCES');
  });

  it('survives 10,000 malformed local requests with its cloud link untouched', async () => {
    const { svc, proc, before, sock } = await connectedDaemon();
    const huge = `GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`;
    const kinds: (string | Buffer)[] = [
      'BREW /v1/status HTTP/1.1\r\n\r\n',
      huge,
      'GET /v1/status HTTP/1.1\r\nHost: x\r\nContent-Le',
      'GET /soulmate/voiceChat/v1 HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
      'GET * HTTP/1.1\r\n\r\n',
      'GET http://evil/v1/token HTTP/1.1\r\n\r\n',
      'POST /v1/token HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'GET /v1/status HTTP/9.9\r\n\r\n',
      '',
    ];
    let seed = 1;
    const garbage = (): Buffer => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return Buffer.from(Array.from({ length: 1 + (seed % 512) }, (_, i) => (seed >> (i % 24)) & 0xff));
    };
    for (let batch = 0; batch < 200; batch++) {
      await Promise.all(Array.from({ length: 50 }, (_, i) => raw(sock, i % 5 === 0 ? garbage() : kinds[(batch + i) % kinds.length]!)));
    }
    expect(proc.child.exitCode).toBeNull();
    const status = JSON.parse((await call(sock, '/v1/status')).body) as StatusDoc;
    expect(status.link.state).toBe('connected');
    expect(status.link.reconnects).toBe(before.link.reconnects);
    expect(status.link.since).toBe(before.link.since);
    expect(svc.stats.getToken.total).toBe(1);
  }, 60_000);

  it('answers while the device is still being provisioned: status, 503 for a token and for the relay', async () => {
    // A vendor-only device whose cloud is unreachable: provisioning waits for the network.
    const d = device('http://127.0.0.1:1', { vendorId: 'V1', deviceId: 'SN-1' });
    daemon(d);
    await listening(d);
    const sock = join(d.runtimeDir, 'botlink.sock');
    const status = JSON.parse((await call(sock, '/v1/status')).body) as StatusDoc;
    expect(status.identity).toEqual({ kind: 'vendor', id: 'V1', mode: 'sign' });
    const token = await call(sock, '/v1/token');
    expect([token.status, JSON.parse(token.body)]).toEqual([503, { code: 503, msg: expect.stringContaining('no botId yet') }]);
    const relay = await raw(
      sock,
      'GET /soulmate/voiceChat/v1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n\r\n',
    );
    expect(relay).toMatch(/^HTTP\/1\.1 503 /);
    expect(relay).toContain('no botId yet');
  });

  it('survives apps that hang up the moment their upgrade is sent (answered 404 or 409)', async () => {
    const { proc, before, sock } = await connectedDaemon();
    // One app attached, so every relay upgrade below is answered 409 into a socket already gone.
    const app = new WebSocket(`ws+unix://${sock}:/soulmate/voiceChat/v1`);
    await once(app, 'message');
    const upgrade = (path: string): string =>
      `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${'A'.repeat(22)}==\r\n\r\n`;
    const hangUp = (bytes: string): Promise<void> =>
      new Promise((resolve) => {
        const s = connect(sock, () => {
          s.write(bytes);
          s.destroy();
          resolve();
        });
        s.on('error', () => resolve());
      });
    for (let batch = 0; batch < 20; batch++) {
      await Promise.all(Array.from({ length: 25 }, (_, i) => hangUp(upgrade(i % 2 ? '/elsewhere' : '/soulmate/voiceChat/v1'))));
    }
    const status = JSON.parse((await call(sock, '/v1/status')).body) as StatusDoc;
    expect(proc.child.exitCode).toBeNull();
    expect(status.link.since).toBe(before.link.since);
    expect(status.relay.attached).toBe(true);
    app.terminate();
  }, 60_000);
});
