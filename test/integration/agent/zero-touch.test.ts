import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createDeviceKey } from '../../../src/agent/config/device-key.js';
import { keyIdOf } from '../../../src/protocol/device-sig.js';
import { VERSION } from '../../../src/version.js';
import { type DeviceDir, runCli } from '../../helpers/daemon-proc.js';
import { useHarness } from '../../helpers/harness.js';
import { json, type ScriptedRequest, startScriptedServer } from '../../helpers/scripted-server.js';
import { waitFor } from '../../helpers/wait-for.js';

/**
 * Zero-touch enrollment (DESIGN §3.2, §3.7) in `botlink run`, against a broker scripted to answer what the
 * real one will (202 pending, then the operator's accept or reject): the daemon makes its key, enrolls
 * with no code, shows the key's state in status, asks again as Retry-After says, and never exits.
 */
const { cleanups, device, daemon, service } = useHarness();

interface Answer {
  status: number;
  body: unknown;
  retryAfter?: string;
}
type EnrollStep = (keyId: string) => Answer;
const pending: EnrollStep = (keyId) => ({ status: 202, body: { state: 'pending', keyId }, retryAfter: '1' });

/** A broker whose /v1/enroll answers follow `steps` (the last repeated); /v1/token answers `token`; health is ok. */
async function scriptedBroker(steps: EnrollStep[], token: (botId: string) => Answer = issued) {
  let asked = 0;
  let boundBotId = '';
  const server = await startScriptedServer((req, res, body) => {
    let answer: Answer;
    if (req.url === '/v1/enroll') {
      const { publicKey } = JSON.parse(body) as { publicKey: string };
      answer = (steps[Math.min(asked++, steps.length - 1)] as EnrollStep)(keyIdOf(Buffer.from(publicKey, 'base64url')));
      const bound = (answer.body as { botId?: string }).botId;
      if (bound !== undefined) boundBotId = bound;
    } else if (req.url === '/v1/token') answer = token(boundBotId);
    else answer = { status: 200, body: { ok: true, store: 'sqlite' } };
    if (answer.retryAfter !== undefined) res.setHeader('retry-after', answer.retryAfter);
    json(res, answer.body, answer.status);
  });
  cleanups.push(() => server.close());
  return { ...server, enrolls: (): ScriptedRequest[] => server.requests.filter((r) => r.url === '/v1/enroll') };
}

function issued(botId: string): Answer {
  return { status: 200, body: { botId, accessToken: 'access-token-from-the-broker', expireIn: 3600, expiresAt: Date.now() + 3_600_000 } };
}

/** A zero-touch device: brokerUrl and vendorId, no botId, no key yet, no account secret. */
async function zeroTouchDevice(brokerUrl: string, deviceId: string): Promise<DeviceDir> {
  const cloud = await service();
  return device(cloud, { brokerUrl, vendorId: 'V1', deviceId, botId: undefined, accessKeyId: undefined, secretKeyFile: undefined });
}

describe('botlink run, zero-touch (brokerUrl and vendorId, no botId)', () => {
  it('makes its key, stays up pending with its keyId in status, asks again on Retry-After, then keeps the accepted botId', async () => {
    const broker = await scriptedBroker([
      pending,
      pending,
      (keyId) => ({ status: 200, body: { botId: 'bot-zero-touch', vendorId: 'V1', keyId } }),
    ]);
    const d = await zeroTouchDevice(broker.url, 'SN-ZT-1');
    const first = daemon(d);
    await waitFor(() => d.status()?.identity.state === 'pending', 15_000, 'identity.state pending');
    const waiting = d.status()!;
    expect(waiting.identity).toMatchObject({ kind: 'vendor', id: 'V1', mode: 'broker', keyId: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const sent = JSON.parse(broker.enrolls()[0]!.body) as Record<string, unknown>;
    expect(sent).toMatchObject({ vendorId: 'V1', deviceId: 'SN-ZT-1' });
    expect(sent).not.toHaveProperty('code');
    expect(keyIdOf(Buffer.from(sent['publicKey'] as string, 'base64url'))).toBe(waiting.identity.keyId);

    await waitFor(() => d.status()?.identity.kind === 'bot', 15_000, 'the accepted botId');
    expect(d.status()!.identity).toMatchObject({ kind: 'bot', id: 'bot-zero-touch', state: 'active', keyId: waiting.identity.keyId });
    const stamps = broker.enrolls().map((r) => Number(/ts=(\d+)/.exec(String(r.headers.authorization))?.[1]));
    expect(stamps).toHaveLength(3);
    // Retry-After: 1 — never sooner, and at most 20 % later (plus the round trip).
    for (let i = 1; i < stamps.length; i++) expect(stamps[i]! - stamps[i - 1]!).toBeGreaterThanOrEqual(1000);
    await first.stop();

    // Restarted, it finds the botId in its store: no enrollment again.
    const asked = broker.enrolls().length;
    daemon(d);
    await waitFor(() => d.status()?.identity.kind === 'bot' && d.status()?.pid !== waiting.pid, 15_000, 'the stored botId');
    expect(d.status()!.identity).toMatchObject({ kind: 'bot', id: 'bot-zero-touch' });
    expect(broker.enrolls()).toHaveLength(asked);
    expect(d.log()).toContain('pending: keyId');
  });

  it('rejected: stops asking, says to ask the vendor, and stays up', async () => {
    const broker = await scriptedBroker([
      () => ({ status: 403, body: { code: 'rejected', msg: 'an operator rejected it' }, retryAfter: '1' }),
    ]);
    const d = await zeroTouchDevice(broker.url, 'SN-ZT-2');
    const p = daemon(d);
    await waitFor(() => d.status()?.identity.state === 'rejected', 15_000, 'identity.state rejected');
    expect(d.status()!.token.fix).toContain('ask the vendor to enroll this device');
    // Were it still asking, Retry-After (1 s) would have brought it back twice in this window.
    await new Promise((r) => setTimeout(r, 2500));
    expect(broker.enrolls()).toHaveLength(1);
    expect(p.child.exitCode).toBeNull();
  });

  it('device-exists: status conflict, and the fix names the --replace code to ask for', async () => {
    const broker = await scriptedBroker([() => ({ status: 409, body: { code: 'device-exists', msg: 'bound to another key' } })]);
    const d = await zeroTouchDevice(broker.url, 'SN-ZT-3');
    daemon(d);
    await waitFor(() => d.status()?.identity.state === 'conflict', 15_000, 'identity.state conflict');
    const s = d.status()!;
    expect(s.token.lastError).toContain('device-exists');
    expect(s.token.fix).toContain('ask the vendor for a --replace code for deviceId SN-ZT-3');
    expect(s.token.fix).toContain('botlink broker code --vendor-id V1 --device-id SN-ZT-3 --replace');
    // And `botlink status` says it in words.
    const text = await runCli(['status', '--config', d.configFile]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('identity:   vendor V1 (no botId yet: the daemon enrolls this device key with the broker)');
    expect(text.stdout).toContain(`device key: keyId ${s.identity.keyId} (refused: the broker holds this device under another key)`);
  });
});

describe('botlink run in broker mode, refused by a rate limit', () => {
  it('says in status when it may ask again and what spent the quota; its token requests carry its version', async () => {
    const broker = await scriptedBroker([], () => ({
      status: 429,
      body: { code: 'rate-limited', msg: 'more than 12 requests in 3600 s' },
      retryAfter: '600',
    }));
    const cloud = await service();
    const d = device(cloud, { brokerUrl: broker.url, botId: 'bot-limited', accessKeyId: undefined, secretKeyFile: undefined });
    createDeviceKey(join(d.stateDir, 'device-key.pem'));
    daemon(d);
    await waitFor(() => d.status()?.token.lastError?.includes('rate-limited') === true, 15_000, 'the rate-limited token');
    const s = d.status()!;
    expect(s.identity).toMatchObject({ kind: 'bot', id: 'bot-limited', state: 'active' });
    expect(s.token.fix).toMatch(/^it may ask again after \d{4}-\d\d-\d\dT[\d:.]+Z \(Retry-After\)/);
    expect(s.token.fix).toContain("the broker's deviceTokensPerHour counts every token request of this botId");
    const tokenBody = JSON.parse(broker.requests.find((r) => r.url === '/v1/token')!.body) as Record<string, unknown>;
    expect(tokenBody['agent']).toEqual({ version: VERSION });
  });
});
