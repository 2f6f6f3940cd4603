import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { type RunningBroker, startBroker } from '../../../src/broker/broker.js';
import { type BrokerConfig, parseBrokerConfig } from '../../../src/broker/config.js';
import { displace } from '../../../src/broker/displace.js';
import { DISPLACE_AFTER_EXPIRY_MS } from '../../../src/broker/displacements.js';
import { brokerKeys, readTokenKey } from '../../../src/broker/keys.js';
import { createCode, displaceRevoked, revoke } from '../../../src/broker/operator.js';
import { CloudClient } from '../../../src/cloud/client.js';
import { openDatabase } from '../../../src/native.js';
import { voiceChatUrl } from '../../../src/protocol/conversation.js';
import { DISPLACED_CLOSE_CODE } from '../../../src/service/ws.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { brokerSettings } from '../../helpers/broker-files.js';
import { vendorSeed } from '../../helpers/broker-rig.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { waitFor } from '../../helpers/wait-for.js';

// revoke --displace (issue 33 item 8, DESIGN §3.7): the cloud ends no token early and closes a socket only when
// another connects for its botId (§1.4), so a stolen device's open socket outlives a plain revoke. Here a
// device holding a token from the broker keeps a socket open to the reference service; the operator's revoke
// --displace closes it at once, and once the token has expired the broker's housekeeping (driven by a manual
// clock the service shares) displaces it again, for good.
const SECRET = 'SK-displace-test-5c2e';
const ACCESS_TTL_S = 600;

let clock: ManualClock;
let cloud: TestService;
let broker: RunningBroker;
let config: BrokerConfig;
let dir: string;
const audit: Record<string, unknown>[] = [];
const logged: string[] = [];
/** The broker's log, which the operator's actions write to as well: every line kept, audit lines apart. */
const log = pino(
  { level: 'info' },
  {
    write(line: string) {
      logged.push(line);
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (parsed['audit'] !== undefined) audit.push(parsed);
    },
  },
);

beforeAll(async () => {
  clock = new ManualClock({ wall: Date.now() });
  // One clock for broker and cloud: the broker signs with its time, the cloud expires tokens by its own.
  cloud = await createTestService({ seed: vendorSeed(SECRET), accessTtlS: ACCESS_TTL_S, now: () => clock.wallNow() });
  dir = mkdtempSync(join(tmpdir(), 'botlink-displace-'));
  config = parseBrokerConfig(brokerSettings(dir, { cloudUrl: cloud.url, secret: SECRET }), {});
  broker = await startBroker({ config, clock, log });
});

afterAll(async () => {
  await broker?.close();
  await cloud?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The operator's commands, audited through the broker's own trail. */
const operator = () => ({ actor: 'cli:test', audit: broker.audit });

/** A device enrolled on the broker with a fresh code, and the token the broker handed it. */
async function deviceWithToken(deviceId: string): Promise<{ device: TestDevice; botId: string; accessToken: string; expiresAt: number }> {
  const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
  const binding = { deviceId };
  const issued = await createCode(
    broker.store,
    keys,
    { vendorId: 'V1', binding, uses: 1, ttlS: 600, kind: 'plain' },
    clock.wallNow(),
    operator(),
  );
  const device = new TestDevice();
  // Signed by the broker's clock, which the tests move on.
  const enrolled = await device.enroll(broker.url, { code: issued.code, deviceId }, { ts: clock.wallNow() });
  expect(enrolled.status, JSON.stringify(enrolled.json)).toBe(200);
  const botId = enrolled.json['botId'] as string;
  const reply = await device.token(broker.url, {}, { ts: clock.wallNow() });
  expect(reply.status, JSON.stringify(reply.json)).toBe(200);
  return { device, botId, accessToken: reply.json['accessToken'] as string, expiresAt: reply.json['expiresAt'] as number };
}

/** A socket the device opened to the cloud itself, with the frames it got and how it closed. */
interface DeviceSocket {
  frames: string[];
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

async function openSocket(botId: string, accessToken: string): Promise<DeviceSocket> {
  const ws = new WebSocket(`${cloud.wsUrl}?botId=${botId}`, { headers: { Authorization: `Bearer ${accessToken}` } });
  const frames: string[] = [];
  ws.on('message', (data, isBinary) => {
    if (!isBinary) frames.push(data.toString());
  });
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await once(ws, 'open');
  return { frames, closed, close: () => ws.terminate() };
}

/** A handshake the cloud refuses: its HTTP status and body. */
async function refusedHandshake(botId: string, accessToken: string): Promise<{ status: number | undefined; body: string }> {
  const ws = new WebSocket(`${cloud.wsUrl}?botId=${botId}`, { headers: { Authorization: `Bearer ${accessToken}` } });
  const [, res] = (await once(ws, 'unexpected-response')) as [unknown, IncomingMessage];
  let body = '';
  for await (const chunk of res) body += String(chunk);
  ws.on('error', () => undefined);
  ws.terminate();
  return { status: res.statusCode, body };
}

/** The displacement frame of §1.4/§1.7 as the reference service sends it (its default marker, the guide's event). */
function displacementEvents(frames: readonly string[]): unknown[] {
  return frames
    .map((f) => JSON.parse(f) as { contentType?: string; content?: { eventType?: string } })
    .filter((f) => f.contentType === 'EVENT' && f.content?.eventType === 'REPEAT_CLIENT_SESSION');
}

/** The displacements the broker's SQLite store holds, read as another process would. */
function queued(): { bot_id: string; due_at: number; attempts: number }[] {
  const db = openDatabase(config.store.slice('sqlite:'.length));
  try {
    return db.prepare('SELECT bot_id, due_at, attempts FROM displacements ORDER BY bot_id').all() as {
      bot_id: string;
      due_at: number;
      attempts: number;
    }[];
  } finally {
    db.close();
  }
}

function operatorCloud(): CloudClient {
  return new CloudClient({ baseUrl: config.baseUrl, accessKeyId: config.accessKeyId, secretKey: { reveal: () => SECRET }, clock });
}

describe('revoke --displace', () => {
  it('closes the device’s socket right after the revoke, and again, for good, once its token has expired', async () => {
    const { device, botId, accessToken, expiresAt } = await deviceWithToken('SN-THIEF-1');
    const thief = await openSocket(botId, accessToken);

    const result = await revoke(broker.store, botId, clock.wallNow(), operator(), { displace: true });
    expect(result).toEqual({ revoked: 1, displaceAt: expiresAt + DISPLACE_AFTER_EXPIRY_MS });
    expect(queued()).toEqual([{ bot_id: botId, due_at: expiresAt + DISPLACE_AFTER_EXPIRY_MS, attempts: 0 }]);
    const opCloud = operatorCloud();
    try {
      const wsUrl = voiceChatUrl(config.baseUrl);
      expect(await displaceRevoked({ cloud: opCloud, wsUrl, clock }, botId, operator())).toEqual({ outcome: 'displaced' });
    } finally {
      await opCloud.close();
    }
    // The cloud told the device's socket it was displaced (the guide's event), then closed it.
    expect(await thief.closed).toEqual({ code: DISPLACED_CLOSE_CODE, reason: '' });
    expect(displacementEvents(thief.frames)).toHaveLength(1);
    expect(audit).toContainEqual(expect.objectContaining({ audit: 'displace', botId, actor: 'cli:test', outcome: 'displaced' }));
    expect((await device.token(broker.url, {}, { ts: clock.wallNow() })).json['code']).toBe('revoked');

    // Its token still lives: the device opens a socket again. This is what the second displacement is for.
    const again = await openSocket(botId, accessToken);
    // The broker's housekeeping runs each minute: step its clock one timer at a time until the row is taken.
    while (queued().length > 0) {
      expect(clock.wallNow()).toBeLessThan(expiresAt + DISPLACE_AFTER_EXPIRY_MS + 3 * 60_000);
      await clock.next();
    }
    expect(clock.wallNow()).toBeGreaterThanOrEqual(expiresAt + DISPLACE_AFTER_EXPIRY_MS);
    expect(await again.closed).toEqual({ code: DISPLACED_CLOSE_CODE, reason: '' });
    expect(displacementEvents(again.frames)).toHaveLength(1);
    await waitFor(
      () => audit.some((a) => a['audit'] === 'displace' && a['botId'] === botId && a['actor'] === 'broker'),
      10_000,
      "the broker's displacement audit line",
    );
    expect(audit.filter((a) => a['audit'] === 'displace' && a['botId'] === botId)).toEqual([
      expect.objectContaining({ actor: 'cli:test', outcome: 'displaced', attempt: 1 }),
      expect.objectContaining({ actor: 'broker', outcome: 'displaced', attempt: 1 }),
    ]);
    // And now for good: the token has expired, so the device opens no socket again.
    const refused = await refusedHandshake(botId, accessToken);
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toEqual({ code: 400, msg: 'Unauthorized' });
    for (const line of logged) expect(line).not.toContain(accessToken);
  });

  it('gives up after 10 s when the cloud does not answer, and the revoke stands', async () => {
    const { device, botId, accessToken } = await deviceWithToken('SN-THIEF-2');
    const thief = await openSocket(botId, accessToken);
    expect((await revoke(broker.store, botId, clock.wallNow(), operator(), { displace: true })).revoked).toBe(1);
    const opCloud = operatorCloud();
    cloud.faults.setLatencyMs(60_000);
    try {
      const asked = once(cloud.events, 'http-request');
      const displacing = displaceRevoked({ cloud: opCloud, wsUrl: voiceChatUrl(config.baseUrl), clock }, botId, operator());
      await asked;
      await clock.advance(10_000);
      expect(await displacing).toEqual({ outcome: 'failed', reason: 'no displacement within 10 s' });
    } finally {
      cloud.faults.setLatencyMs(0);
      await opCloud.close();
    }
    expect(audit).toContainEqual(
      expect.objectContaining({ audit: 'displace', botId, actor: 'cli:test', outcome: 'failed', reason: 'no displacement within 10 s' }),
    );
    expect((await device.token(broker.url, {}, { ts: clock.wallNow() })).json['code']).toBe('revoked');
    thief.close();
  });
});

describe('the displacing socket', () => {
  it('reads no frame past 64 KiB: a peer’s larger one ends the socket, named in the failure', async () => {
    const { WebSocketServer } = await import('ws');
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(server, 'listening');
    server.on('connection', (peer) => peer.send('x'.repeat(100 * 1024)));
    try {
      const { port } = server.address() as { port: number };
      const cloud = { getToken: async () => ({ accessToken: 'tok', expireIn: 60, refreshToken: 'r', refreshExpireIn: 60 }) };
      const result = await displace(
        { cloud: cloud as never, wsUrl: `ws://127.0.0.1:${port}/`, clock: new ManualClock({ wall: Date.now() }) },
        'bot-x',
      );
      expect(result).toEqual({ outcome: 'failed', reason: expect.stringContaining('WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') });
    } finally {
      server.close();
    }
  });
});
