import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/native.js';
import { createTestService } from '../../../src/service/testing.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import type { CliRun } from '../../../scripts/lib/exec.js';
import { type AdminRig, startAdminRig } from '../../helpers/admin-rig.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { freePort } from '../../helpers/ports.js';
import { json, startScriptedServer } from '../../helpers/scripted-server.js';
import { terminalHazards } from '../../helpers/terminal.js';

// The operator's commands from anywhere (DESIGN §3.1 `--admin URL`): each against a real `botlink broker`'s admin
// listener, printing what the same command prints on the store, with §3.1's exit codes.

const TOKEN = 'BOTLINK_BROKER_ADMIN_TOKEN';
const CODE_LINE = /^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}\n$/;
let a: AdminRig;

beforeAll(async () => {
  a = await startAdminRig('test-broker-admin-cli-');
}, 120_000);
afterAll(() => a?.close());

/** `botlink broker SUB --config FILE …rest`: on the store. */
const onStore = ([sub = '', ...rest]: string[]): Promise<CliRun> => a.rig.cli([sub, '--config', a.rig.configFile, ...rest]);
/** `botlink broker SUB --admin URL …rest` with the token in the environment alone. */
const overApi = ([sub = '', ...rest]: string[], token = a.operator): Promise<CliRun> =>
  a.rig.cli([sub, '--admin', a.admin, ...rest], { [TOKEN]: token });

/** A new key that asked to wait for `deviceId` (the rig's pattern: SN-WAIT-n): 202. */
async function waiting(deviceId: string, name = 'dock 4'): Promise<TestDevice> {
  const device = new TestDevice();
  const reply = await device.enroll(a.broker.url, { vendorId: 'V1', deviceId, name });
  expect(reply.status, JSON.stringify(reply.json)).toBe(202);
  return device;
}

function displacementOf(botId: string): unknown {
  const db = openDatabase(join(a.rig.dir, 'state', 'broker.db'));
  try {
    return db.prepare('SELECT due_at AS dueAt FROM displacements WHERE bot_id = ?').get(botId);
  } finally {
    db.close();
  }
}

describe('the lists over --admin print what they print on the store', () => {
  beforeAll(async () => {
    const code = await a.rig.code(['--uses', '10']);
    await a.rig.code(['--device-id', 'SN-L9']);
    const bots: string[] = [];
    const devices = ['SN-L1', 'SN-L2', 'SN-L3', 'SN-L5'].map(() => new TestDevice());
    for (const [i, d] of devices.entries()) bots.push(await d.mustEnroll(a.broker.url, { code, deviceId: `SN-L${[1, 2, 3, 5][i]}` }));
    // A bot of two keys (the store lists it once), one that reported a version, one revoked, and one of two
    // keys both revoked (the store lists its newest).
    expect((await devices[0]?.rotate(a.broker.url, new TestDevice()))?.status).toBe(200);
    expect((await devices[1]?.token(a.broker.url, { agent: { version: '7.1.0' } }))?.status).toBe(200);
    expect((await devices[3]?.rotate(a.broker.url, new TestDevice()))?.status).toBe(200);
    for (const botId of [bots[2], bots[3]]) expect((await onStore(['revoke', botId ?? ''])).code).toBe(0);
    const file = join(a.rig.dir, 'one.csv');
    writeFileSync(file, `SN-L4,${new TestDevice().publicKey}\n`);
    expect((await onStore(['preauth', '--vendor-id', 'V1', file])).code).toBe(0);
    // Two keys for one device (duplicates), one for another.
    await waiting('SN-WAIT-1');
    await waiting('SN-WAIT-1', 'dock «4» ü');
    await waiting('SN-WAIT-2');
  }, 60_000);

  it.each([
    ['codes'],
    ['codes', '--json'],
    ['codes', '--vendor-id', 'V1'],
    ['devices', '--json'],
    ['devices'],
    ['devices', '--state', 'active'],
    ['devices', '--state', 'revoked', '--json'],
    ['devices', '--state', 'preauthorized'],
    ['devices', '--state', 'pending', '--json'],
    ['devices', '--vendor-id', 'V2'],
    ['pending'],
    ['pending', '--json'],
    ['pending', '--source', '127.0.0.0/8', '--vendor-id', 'V1'],
    ['pending', '--source', '10.0.0.0/8'],
  ])('broker %s …', async (...argv: string[]) => {
    const [store, api] = await Promise.all([onStore(argv), overApi(argv)]);
    expect(store.code, store.stderr).toBe(0);
    expect(api.code, api.stderr).toBe(0);
    expect(api.stdout).toBe(store.stdout);
    // Each list holds lines, but those of a vendor or block nobody is of.
    expect(store.stdout.includes('V1')).toBe(!argv.includes('V2') && !argv.includes('10.0.0.0/8'));
  });

  it('devices over --admin lists rejected keys as the store does, alone and among the rest', async () => {
    const key = await waiting('SN-WAIT-3');
    expect((await onStore(['reject', key.keyId])).code).toBe(0);
    for (const argv of [['devices', '--state', 'rejected'], ['devices'], ['devices', '--json']]) {
      const [store, api] = await Promise.all([onStore(argv), overApi(argv)]);
      expect([api.code, api.stderr]).toEqual([0, '']);
      expect(api.stdout).toBe(store.stdout);
      expect(api.stdout).toContain(key.keyId);
    }
  });

  it('preauth sends a file of 10,001 lines in two requests, and the lists page through them (500 a page)', async () => {
    const lines = Array.from({ length: 10_001 }, (_, i) => `SN-P${String(i).padStart(5, '0')},${new TestDevice().publicKey}`);
    const file = join(a.rig.dir, 'many.csv');
    writeFileSync(file, `# the factory's list\n${lines.join('\n')}\n`);
    const added = await overApi(['preauth', '--vendor-id', 'V1', file]);
    expect(added, added.stderr).toMatchObject({ code: 0, stdout: 'pre-authorised 10001 device(s) for vendor V1\n' });
    const argv = ['devices', '--state', 'preauthorized', '--json'];
    const [store, api] = await Promise.all([onStore(argv), overApi(argv)]);
    expect(api.stdout).toBe(store.stdout);
    expect(JSON.parse(api.stdout)).toHaveLength(10_002);
    // A file with a line the broker refuses: the others added, the refused one named, 65.
    const again = join(a.rig.dir, 'again.csv');
    writeFileSync(again, `SN-P00007,${new TestDevice().publicKey}\nSN-Q1,${new TestDevice().publicKey}\n`);
    const partly = await overApi(['preauth', '--vendor-id', 'V1', again]);
    expect([partly.code, partly.stdout]).toEqual([65, '']);
    expect(partly.stderr).toContain('1 device(s) pre-authorised for vendor V1, 1 refused: SN-P00007: deviceId SN-P00007');
    // A bad line is found before anything is sent, as on the store.
    writeFileSync(again, `SN-Q2,${new TestDevice().publicKey}\nSN-Q3,not-a-key\n`);
    const bad = await overApi(['preauth', '--vendor-id', 'V1', again]);
    expect([bad.code, bad.stdout]).toEqual([65, '']);
    expect(bad.stderr).toContain('line 2');
    expect((await overApi(['devices', '--state', 'preauthorized'])).stdout).not.toContain('SN-Q2');
  }, 120_000);
});

describe('the actions over --admin print what they print on the store', () => {
  it('code: the code alone on stdout, what it is on stderr (--json: one object); it enrolls; an unknown vendor is 65', async () => {
    const made = await overApi(['code', '--vendor-id', 'V1', '--device-id', 'SN-C1', '--uses', '1']);
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toMatch(CODE_LINE);
    expect(made.stderr).toMatch(
      /^plain code for vendor V1, for device SN-C1: 1 use\(s\), expires \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ?; id [0-9a-f]{20}\n$/,
    );
    const stored = await onStore(['code', '--vendor-id', 'V1', '--device-id', 'SN-C1', '--uses', '1']);
    const shape = (r: CliRun) => r.stderr.replace(/expires .*; id [0-9a-f]{20}/, 'expires T; id ID');
    expect(shape(made)).toBe(shape(stored));
    await new TestDevice().mustEnroll(a.broker.url, { code: made.stdout.trim(), deviceId: 'SN-C1' });
    const adoptAny = await overApi(['code', '--vendor-id', 'V1', '--any-device', '--adopt']);
    expect([adoptAny.code, adoptAny.stdout]).toEqual([65, '']);
    const one = await overApi(['code', '--vendor-id', 'V1', '--any-device', '--json']);
    expect(one).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(one.stdout)).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{20}$/),
      code: expect.any(String),
      expiresAt: expect.any(Number),
      uses: 1,
    });
    const unknown = await overApi(['code', '--vendor-id', 'V9', '--device-id', 'SN-1']);
    expect([unknown.code, unknown.stdout]).toEqual([65, '']);
    expect(unknown.stderr).toContain('the cloud knows no vendor V9');
  });

  it('cancel ends a code by its id as on the store; an id no code has is 65; a code itself is 64 and never sent', async () => {
    const ids = await Promise.all(
      [0, 1].map(async () => {
        const r = await onStore(['code', '--vendor-id', 'V1', '--device-id', 'SN-X1', '--uses', '1', '--json']);
        return JSON.parse(r.stdout) as { id: string; code: string };
      }),
    );
    const [viaStore, viaApi] = [await onStore(['cancel', ids[0]?.id ?? '']), await overApi(['cancel', ids[1]?.id ?? ''])];
    expect(viaApi).toMatchObject({
      code: 0,
      stdout: `cancelled plain code ${ids[1]?.id} for vendor V1, for device SN-X1: 1 use(s) were left\n`,
      stderr: '',
    });
    expect(viaApi.stdout.replace(ids[1]?.id ?? '', 'ID')).toBe(viaStore.stdout.replace(ids[0]?.id ?? '', 'ID'));
    const again = await overApi(['cancel', ids[1]?.id ?? '']);
    expect([again.code, again.stdout]).toEqual([65, '']);
    expect(again.stderr).toContain(`no code has the id ${ids[1]?.id}`);
    const typed = await overApi(['cancel', ids[1]?.code ?? '']);
    expect([typed.code, typed.stdout]).toEqual([64, '']);
    expect(typed.stderr).not.toContain(ids[1]?.code);
  });

  it('revoke sends displace: false unless --displace: nothing queued without it; with it, displaced and told as on the store', async () => {
    const code = await a.rig.code(['--uses', '4']);
    const devices = [new TestDevice(), new TestDevice(), new TestDevice(), new TestDevice()];
    const bots = await Promise.all(devices.map((d, i) => d.mustEnroll(a.broker.url, { code, deviceId: `SN-R${i + 1}` })));
    // Each holds a token: a revoke that displaces queues the displacement due once it has expired.
    for (const d of devices) expect((await d.token(a.broker.url)).status).toBe(200);
    const [plain, stored] = [await overApi(['revoke', bots[0] ?? '']), await onStore(['revoke', bots[1] ?? ''])];
    expect(plain).toMatchObject({
      code: 0,
      stdout: `revoked 1 key(s) of ${bots[0]}; a token it already holds lives until it expires (2–8 h)\n`,
      stderr: '',
    });
    expect(plain.stdout.replace(bots[0] ?? '', 'B')).toBe(stored.stdout.replace(bots[1] ?? '', 'B'));
    expect(displacementOf(bots[0] ?? '')).toBeUndefined();
    const displaced = await overApi(['revoke', '--displace', bots[2] ?? '']);
    const displacedOnStore = await onStore(['revoke', '--displace', bots[3] ?? '']);
    expect(displaced.code, displaced.stderr).toBe(0);
    // The broker's answer carries the displacement's outcome and next time: the same lines as the store path's.
    const shape = (out: string, botId: string) => out.replaceAll(botId, 'B').replace(/again at \S+ \S+/, 'again at T');
    expect(displaced.stdout).toContain(`displaced ${bots[2]}: the cloud closed any socket it held\n`);
    expect(displaced.stdout).toContain(', once its last token has expired\n');
    expect([shape(displaced.stdout, bots[2] ?? ''), displaced.stderr]).toEqual([
      shape(displacedOnStore.stdout, bots[3] ?? ''),
      displacedOnStore.stderr,
    ]);
    expect(displacementOf(bots[2] ?? '')).toEqual({ dueAt: expect.any(Number) });
    expect((await devices[0]?.token(a.broker.url))?.json['code']).toBe('revoked');
    // Nothing left to revoke (409), and a botId the broker does not know (404): 65.
    for (const botId of [bots[0] ?? '', 'bot-nobody']) {
      const refused = await overApi(['revoke', botId]);
      expect([refused.code, refused.stdout], refused.stderr).toEqual([65, '']);
    }
  });

  it('reset-limits clears a botId’s counts and says how many windows, as on the store; an unknown botId is 65', async () => {
    const code = await a.rig.code(['--uses', '2']);
    const devices = [new TestDevice(), new TestDevice()];
    const bots = await Promise.all(devices.map((d, i) => d.mustEnroll(a.broker.url, { code, deviceId: `SN-RL${i + 1}` })));
    // A token request each: one count window each to clear.
    for (const d of devices) expect((await d.token(a.broker.url)).status).toBe(200);
    const [remote, stored] = [await overApi(['reset-limits', bots[0] ?? '']), await onStore(['reset-limits', bots[1] ?? ''])];
    expect(remote).toMatchObject({ code: 0, stderr: '' });
    expect(remote.stdout).toMatch(
      new RegExp(`^reset the hourly limits of ${bots[0]} \\([1-9]\\d* count window\\(s\\) cleared\\); rotatePerDay is kept\\n$`),
    );
    expect(remote.stdout.replace(bots[0] ?? '', 'B')).toBe(stored.stdout.replace(bots[1] ?? '', 'B'));
    const unknown = await overApi(['reset-limits', 'bot-nobody']);
    expect([unknown.code, unknown.stdout]).toEqual([65, '']);
    expect(unknown.stderr).toContain('no device with botId bot-nobody');
  });

  it('preauth --remove drops one device’s pre-authorisation as on the store; none is 65', async () => {
    const keys = [new TestDevice(), new TestDevice()];
    const file = join(a.rig.dir, 'remove.csv');
    writeFileSync(file, `SN-RM1,${keys[0]?.publicKey}\nSN-RM2,${keys[1]?.publicKey}\n`);
    expect((await onStore(['preauth', '--vendor-id', 'V1', file])).code).toBe(0);
    const viaApi = await overApi(['preauth', '--remove', '--vendor-id', 'V1', 'SN-RM1']);
    expect(viaApi).toMatchObject({
      code: 0,
      stdout: `removed the pre-authorisation of device SN-RM1 for vendor V1 (key ${keys[0]?.keyId})\n`,
      stderr: '',
    });
    const viaStore = await onStore(['preauth', '--remove', '--vendor-id', 'V1', 'SN-RM2']);
    expect(viaApi.stdout.replace('SN-RM1', 'D').replace(keys[0]?.keyId ?? '', 'K')).toBe(
      viaStore.stdout.replace('SN-RM2', 'D').replace(keys[1]?.keyId ?? '', 'K'),
    );
    const none = await overApi(['preauth', '--remove', '--vendor-id', 'V1', 'SN-RM1']);
    expect([none.code, none.stdout]).toEqual([65, '']);
    expect(none.stderr).toContain('no pre-authorisation of device SN-RM1 for vendor V1');
  });

  it('accept enrolls the waiting key (botId last, the other keys for it counted); a wrong serial (409) or unknown key (404) is 65', async () => {
    const chosen = await waiting('SN-WAIT-51');
    await waiting('SN-WAIT-51');
    const wrong = await overApi(['accept', chosen.keyId, '--device-id', 'SN-WAIT-52']);
    expect([wrong.code, wrong.stdout]).toEqual([65, '']);
    expect(wrong.stderr).toContain('waits for device SN-WAIT-51, not SN-WAIT-52');
    const unknown = await overApi(['accept', 'f'.repeat(32), '--device-id', 'SN-WAIT-51']);
    expect([unknown.code, unknown.stdout]).toEqual([65, '']);
    const accepted = await overApi(['accept', chosen.keyId, '--device-id', 'SN-WAIT-51']);
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(accepted.stdout).toMatch(/^botId: \S+\n$/);
    expect(accepted.stderr).toBe(`accepted key ${chosen.keyId} for device SN-WAIT-51; 1 other waiting key(s) rejected\n`);
    expect((await chosen.token(a.broker.url)).status).toBe(200);
  });

  it('reject: one key by its keyId (again: 65), or every key of a filter in one go', async () => {
    const one = await waiting('SN-WAIT-61');
    expect(await overApi(['reject', one.keyId])).toMatchObject({ code: 0, signal: null, stdout: 'rejected 1 key(s)\n', stderr: '' });
    expect((await overApi(['reject', one.keyId])).code).toBe(65);
    expect((await one.enroll(a.broker.url, { vendorId: 'V1', deviceId: 'SN-WAIT-61' })).json['code']).toBe('rejected');
    await waiting('SN-WAIT-62');
    const waitingNow = (JSON.parse((await onStore(['pending', '--json'])).stdout) as unknown[]).length;
    expect(waitingNow).toBeGreaterThan(0);
    const all = await overApi(['reject', '--vendor-id', 'V1', '--source', '127.0.0.0/8', '--first-asked-before', '0s']);
    expect(all).toMatchObject({ code: 0, stdout: `rejected ${waitingNow} key(s)\n`, stderr: '' });
    expect((await onStore(['pending', '--json'])).stdout).toBe('[]\n');
  });
});

describe('exit codes and refusals over --admin', () => {
  it('a token the API does not know is 77 and never printed; a viewer may list but not act (77)', async () => {
    const bogus = 'blk_not-a-token-at-all';
    const refused = await overApi(['devices'], bogus);
    expect([refused.code, refused.stdout]).toEqual([77, '']);
    expect(refused.stderr).toContain(TOKEN);
    expect(refused.stderr).not.toContain(bogus);
    expect((await overApi(['codes'], a.viewer)).code).toBe(0);
    const viewer = await overApi(['reset-limits', 'bot-any'], a.viewer);
    expect([viewer.code, viewer.stdout]).toEqual([77, '']);
    expect(viewer.stderr).toContain('watcher is a viewer');
    expect(viewer.stderr).not.toContain(a.viewer);
  });

  it('usage (64): http off loopback before the token is read; no token; --admin with --config; admin-token with --admin', async () => {
    // No token in the environment: a 64 naming http proves the URL was judged first.
    for (const [args, env] of [
      [['devices', '--admin', 'http://192.0.2.7:8443'], {}],
      [['devices'], { BOTLINK_BROKER_ADMIN_URL: 'http://broker.example:8443' }],
    ] as const) {
      const r = await a.rig.cli([...args], env);
      expect([r.code, r.stdout]).toEqual([64, '']);
      expect(r.stderr).toContain('plain http only to loopback');
      expect(r.stderr).not.toContain(TOKEN);
    }
    const noToken = await a.rig.cli(['devices', '--admin', a.admin]);
    expect([noToken.code, noToken.stdout]).toEqual([64, '']);
    expect(noToken.stderr).toContain(`${TOKEN} is not set`);
    const both = await a.rig.cli(['devices', '--admin', a.admin, '--config', a.rig.configFile], { [TOKEN]: a.operator });
    expect([both.code, both.stderr.split('\n')[0]]).toEqual([
      64,
      'botlink broker devices: --admin and --config exclude each other: --admin acts through the admin API, --config on the store',
    ]);
    const token = await a.rig.cli(['admin-token', 'list', '--admin', a.admin], { [TOKEN]: a.operator });
    expect([token.code, token.stdout]).toEqual([64, '']);
    expect(token.stderr).toContain("admin-token works on the broker's store only");
    // The environment's URL serves when no --config is given.
    const fromEnv = await a.rig.cli(['codes', '--json'], { BOTLINK_BROKER_ADMIN_URL: a.admin, [TOKEN]: a.operator });
    expect(fromEnv.code, fromEnv.stderr).toBe(0);
  });

  it('no broker there is 69', async () => {
    const r = await a.rig.cli(['devices', '--admin', `http://127.0.0.1:${await freePort()}`], { [TOKEN]: a.operator });
    expect([r.code, r.stdout]).toEqual([69, '']);
    expect(r.stderr).toContain('cannot reach the admin API');
  });

  it('by status: 401/403 → 77, 400/404/409 → 65, 429/5xx → 69, a redirect 69 naming it and not followed; the server’s words cleaned', async () => {
    let status = 503;
    const server = await startScriptedServer((_req, res) => {
      if (status === 302) {
        res.writeHead(302, { location: 'https://elsewhere.example/admin/' });
        return void res.end();
      }
      json(res, { code: 'x', msg: 'the store\u001b]0;owned\u0007 is away\u009b' }, status);
    });
    try {
      for (const [given, exit] of [
        [401, 77],
        [403, 77],
        [400, 65],
        [404, 65],
        [409, 65],
        [429, 69],
        [500, 69],
        [503, 69],
        [302, 69],
      ] as const) {
        status = given;
        const before = server.requests.length;
        const r = await a.rig.cli(['revoke', '--admin', server.url, 'bot-1'], { [TOKEN]: a.operator });
        expect([r.code, r.stdout], `${given}: ${r.stderr}`).toEqual([exit, '']);
        expect(server.requests.length - before).toBe(1);
        expect(terminalHazards(r.stderr)).toEqual([]);
        expect(r.stderr).not.toContain(a.operator);
        if (given === 302) expect(r.stderr).toContain('redirecting to https://elsewhere.example/admin/: no redirect is followed');
        else expect(r.stderr).toContain('is away');
      }
      const [sent] = server.requests.slice(-1);
      expect(sent).toMatchObject({ method: 'POST', url: '/admin/v1/devices/bot-1/revoke', body: '{"displace":false}' });
      expect(sent?.headers['authorization']).toBe(`Bearer ${a.operator}`);
      expect(sent?.headers['cookie']).toBeUndefined();
    } finally {
      await server.close();
    }
  });
  it('an answer larger than 8 MiB is not read whole: 69', async () => {
    const server = await startScriptedServer((_req, res) => json(res, { codes: ['x'.repeat(9 * 1024 * 1024)], next: null }));
    try {
      const r = await a.rig.cli(['codes', '--admin', server.url], { [TOKEN]: a.operator });
      expect([r.code, r.stdout]).toEqual([69, '']);
      expect(r.stderr).toContain('larger than 8388608 bytes');
    } finally {
      await server.close();
    }
  });
});

describe('an https admin listener', () => {
  it('is trusted through BOTLINK_BROKER_ADMIN_CA_FILE alone; without it, 69 naming the variable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'botlink-admin-tls-'));
    const cloud = await createTestService({ seed: vendorSeed('SK-admin-tls') });
    const cert = (name: string): string => {
      const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2'];
      const names = ['-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'];
      execFileSync(requireTool('openssl'), [...args, ...names, '-keyout', join(dir, `${name}.key`), '-out', join(dir, `${name}.pem`)], {
        stdio: 'ignore',
      });
      return join(dir, `${name}.pem`);
    };
    const own = cert('admin');
    const stranger = cert('stranger');
    const rig = brokerRig({
      bundle: a.bundle.file,
      cloudUrl: cloud.url,
      secret: 'SK-admin-tls',
      extra: { adminListen: '127.0.0.1:0', tlsCertFile: own, tlsKeyFile: join(dir, 'admin.key') },
    });
    try {
      const made = await rig.cli(['admin-token', 'create', '--config', rig.configFile, '--name', 'ops', '--role', 'operator']);
      const token = made.stdout.trim().split('\n').at(-1) ?? '';
      const broker = await rig.start();
      const admin = await broker.adminUrl();
      expect(admin).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const untrusted = await rig.cli(['devices', '--admin', admin], { [TOKEN]: token });
      expect([untrusted.code, untrusted.stdout]).toEqual([69, '']);
      expect(untrusted.stderr).toContain('BOTLINK_BROKER_ADMIN_CA_FILE');
      const wrongCa = await rig.cli(['devices', '--admin', admin], { [TOKEN]: token, BOTLINK_BROKER_ADMIN_CA_FILE: stranger });
      expect(wrongCa.code).toBe(69);
      const trusted = await rig.cli(['devices', '--admin', admin], { [TOKEN]: token, BOTLINK_BROKER_ADMIN_CA_FILE: own });
      expect(trusted).toMatchObject({
        code: 0,
        stdout: 'botId\tdeviceId\tvendorId\tkeyId\tstate\tlastSeen\tagentVersion\n',
        stderr: expect.any(String),
      });
      const unreadable = await rig.cli(['devices', '--admin', admin], {
        [TOKEN]: token,
        BOTLINK_BROKER_ADMIN_CA_FILE: join(dir, 'absent.pem'),
      });
      expect([unreadable.code, unreadable.stdout]).toEqual([64, '']);
      expect(unreadable.stderr).toContain('BOTLINK_BROKER_ADMIN_CA_FILE: cannot read');
    } finally {
      await rig.close();
      await cloud.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
