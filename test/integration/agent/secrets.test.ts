import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename, join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { WsMessage } from '../../../src/protocol/codes.js';
import type { DaemonProc } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { useHarness } from '../../helpers/harness.js';
import { filesUnder } from '../../helpers/tree.js';
import { waitFor } from '../../helpers/wait-for.js';

/**
 * Suite 5 of issue 6: the daemon (built bundle, child process) goes through a slice of the fault,
 * crash and clock suites with a distinctive secret; afterwards neither the secret nor any token it
 * was issued may appear in its logs, status file, output, arguments or environment.
 */

const SECRET = 'S3cr3t-botlink-secrets-suite-9f27c1e4';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };
/** A token cut short in a log line would still give it away: its first characters count as the token. */
const TOKEN_PREFIX = 16;
const DB_FILES = new Set(['botlink.db', 'botlink.db-wal', 'botlink.db-shm']);

const { cleanups, service, device: deviceDir, daemon, tempDir } = useHarness();

/**
 * The agent's side of the wire: a pass-through to the service that keeps every token in the answers
 * (Date and status untouched, so server time and faults reach the agent as they are).
 */
async function tokenTap(target: string): Promise<{ url: string; tokens: Set<string> }> {
  const tokens = new Set<string>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      request(new URL(req.url ?? '/', target), {
        method: 'POST',
        headers: {
          'content-type': req.headers['content-type'] ?? 'application/json',
          ...(req.headers.authorization && { authorization: req.headers.authorization }),
        },
        body: Buffer.concat(chunks),
      }).then(
        async (answer) => {
          const body = Buffer.from(await answer.body.arrayBuffer());
          try {
            const json = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
            for (const key of ['accessToken', 'refreshToken']) if (typeof json[key] === 'string') tokens.add(json[key]);
          } catch {
            // a broken answer (fault knob): nothing to collect
          }
          const pass: Record<string, string> = { 'content-length': String(body.length) };
          for (const key of ['date', 'content-type']) if (typeof answer.headers[key] === 'string') pass[key] = answer.headers[key];
          res.sendDate = false;
          res.writeHead(answer.statusCode, pass).end(body);
        },
        () => res.socket?.destroy(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, tokens };
}

/** A `timedatectl` that says the clock is synchronised and records how it was called. */
function syncedTimedatectl(): { binDir: string; argsLog: string } {
  const binDir = tempDir('botlink-secrets-bin-');
  const argsLog = join(binDir, 'calls.log');
  const script = join(binDir, 'timedatectl');
  writeFileSync(script, `#!/bin/sh\necho "$0 $*" >> '${argsLog}'\necho yes\n`);
  chmodSync(script, 0o755);
  return { binDir, argsLog };
}

/** Whatever the kernel shows of a running process: its arguments and its environment. */
function procView(p: DaemonProc): { name: string; text: string }[] {
  const pid = p.child.pid!;
  return ['cmdline', 'environ'].map((file) => ({
    name: `/proc/${pid}/${file}`,
    text: readFileSync(`/proc/${pid}/${file}`).toString('latin1'),
  }));
}

function occurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + 1)) count++;
  return count;
}

describe('secrets: the daemon through a sign, refresh, re-sign, faults, a clock correction and a SIGKILL', () => {
  it('leaves the secret and every issued token out of logs, status.json, output, arguments and environment', async () => {
    const svc = await service(SEED, { accessTtlS: 3, refreshTtlS: 6 });
    const internalErrors: unknown[] = [];
    svc.events.on('internal-error', (err) => internalErrors.push(err));
    // The service runs 10 minutes ahead: the first getToken, signed with the "synced" wall clock, is refused 1003.
    svc.faults.shiftClockMs(10 * 60_000);
    const tap = await tokenTap(svc.url);
    const { binDir, argsLog } = syncedTimedatectl();
    const device = deviceDir(
      tap.url,
      {
        wsUrl: svc.wsUrl,
        botId: 'bot-1',
        tokenBackoffBaseMs: 50,
        tokenBackoffCapMs: 500,
        linkBackoffBaseMs: 50,
        linkBackoffCapMs: 500,
      },
      SECRET,
    );
    const env = cleanEnv({ PATH: `${binDir}:${process.env['PATH'] ?? ''}` });
    const seen: { name: string; text: string }[] = [];
    const reconnects = (): number => device.status()?.link.reconnects ?? 0;

    const first = daemon(device, env);
    await device.waitForLink('connected');
    // Clock correction: refused once for the timestamp, then signed on the server's time.
    expect(svc.stats.getToken.byCode[1003]).toBe(1);
    expect(svc.stats.getToken.ok).toBe(1);
    seen.push(...procView(first));

    await waitFor(() => svc.stats.refreshToken.ok >= 1, 15_000, 'a refresh');
    // A fault on the next refresh and on the re-sign: their errors are logged, and must be logged cleanly.
    svc.faults.nextResponses('http-503-html', 1, '/auth/refreshToken');
    svc.faults.failNextGetToken(1);
    await waitFor(() => svc.stats.getToken.ok >= 2, 12_000, 'a re-sign as the refresh token runs out');
    expect(svc.stats.getToken.byCode[1006]).toBe(1);

    let before = reconnects();
    svc.faults.dropAllSockets();
    await waitFor(() => reconnects() > before && device.status()?.link.state === 'connected', 15_000, 'reconnected after a forced drop');

    before = reconnects();
    svc.faults.refuseWebSockets(WsMessage.UNAUTHORIZED, 'handshake');
    svc.faults.dropAllSockets();
    await waitFor(() => (device.status()?.link.lastError ?? '').includes('Unauthorized'), 15_000, 'Unauthorized reported');
    svc.faults.refuseWebSockets(undefined);
    await waitFor(() => reconnects() > before + 1 && device.status()?.link.state === 'connected', 15_000, 'connected after Unauthorized');
    seen.push(...procView(first));

    await first.stop('SIGKILL');
    const second = daemon(device, env);
    await waitFor(
      () => device.status()?.pid === second.child.pid && device.status()?.link.state === 'connected',
      15_000,
      'connected after SIGKILL and restart',
    );
    seen.push(...procView(second));
    expect((await second.stop('SIGTERM')).code).toBe(0);

    // Every token issued reached the agent through the tap, and the cached pair is among them.
    const issued = svc.stats.getToken.ok * 2 + svc.stats.refreshToken.ok;
    expect(tap.tokens.size).toBe(issued);
    expect(issued).toBeGreaterThanOrEqual(6);
    const db = [...DB_FILES]
      .map((name) => join(device.stateDir, name))
      .filter((path) => existsSync(path))
      .map((path) => readFileSync(path).toString('latin1'))
      .join('');

    const texts = [
      ...seen,
      { name: 'first stdout', text: first.stdout },
      { name: 'first stderr', text: first.stderr },
      { name: 'second stdout', text: second.stdout },
      { name: 'second stderr', text: second.stderr },
      { name: 'timedatectl calls', text: readFileSync(argsLog, 'utf8') },
      ...filesUnder(device.dir)
        .filter((f) => !DB_FILES.has(basename(f.path)) && basename(f.path) !== 'secret-key')
        .map((f) => ({ name: f.path, text: f.text })),
    ];
    // The scan must have had something to read: a log with the whole story, and the status file.
    const log = device.log();
    for (const line of ['token signed', 'token refreshed', 'link connected']) expect(log).toContain(line);
    expect(texts.some((t) => t.name.endsWith('status.json'))).toBe(true);

    const leaks = (among: { name: string; text: string }[]): string[] =>
      among.flatMap(({ name, text }) => [
        ...(occurrences(text, SECRET) > 0 ? [`${name}: the secret`] : []),
        ...[...tap.tokens]
          .filter((token) => text.includes(token.slice(0, TOKEN_PREFIX)))
          .map((token) => `${name}: token ${token.slice(0, 6)}…`),
      ]);
    expect(leaks(texts)).toEqual([]);
    // The scan finds what is there: the secret in its own file, a token in the cache.
    expect(leaks([{ name: 'secret-key', text: readFileSync(join(device.dir, 'secret-key'), 'utf8') }])).toEqual(['secret-key: the secret']);
    expect(leaks([{ name: 'db', text: db }]).length).toBeGreaterThan(0);
    // The database is the token cache, never the secret's home.
    for (const name of DB_FILES) {
      const path = join(device.stateDir, name);
      if (existsSync(path)) expect(occurrences(readFileSync(path).toString('latin1'), SECRET), name).toBe(0);
    }
    expect(internalErrors).toEqual([]);
  });
});
