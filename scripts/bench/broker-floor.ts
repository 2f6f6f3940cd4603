// The fleet row's floor: what any broker must do for a device's first token, and nothing else, in a process
// of its own run as the broker's unit runs a broker. node:http; the device's Ed25519 signature verified
// with its key imported from the stored text; getToken signed V2 and sent through the broker's own cloud
// client (undici, as many connections as the broker's cap of calls in flight); the access token sealed
// with AES-256-GCM; one row written into a store of the broker's kind, the broker's way (writeToken).
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brokerKeys, readTokenKey } from '../../src/broker/keys.js';
import { storedKey } from '../../src/broker/auth/keys.js';
import { openStore } from '../../src/broker/store/open.js';
import { CloudClient } from '../../src/cloud/client.js';
import { systemClock } from '../../src/clock.js';
import { parseDeviceAuthorization, verifyRequest } from '../../src/protocol/device-sig.js';
import { ACCESS_KEY_ID, type BenchDevice, SECRET, signedTokenRequest } from './broker-load.js';
import { NODE_FLAGS, UNIT_ENV } from './broker-rig.js';
import { forkSelf, setupFromParent } from './child.js';
import { cleanEnv } from '../lib/env.js';

interface FloorSetup {
  cloud: string;
  /** `sqlite:PATH` or a postgres:// URL, as a broker's config names its store. */
  store: string;
  tokenKeyFile: string;
  /** The broker's cloudConcurrency: the floor's pool has as many connections, so the cloud sees as many callers. */
  cloudConnections: number;
  /** Each device as the broker's store holds it: keyId, public key text, botId (here in memory, not read from a store). */
  devices: [string, string, string][];
}

/** The floor's side, in the forked process: serves POST /v1/token until the parent disconnects. */
export async function serveFleetFloor(): Promise<void> {
  const setup = await setupFromParent<FloorSetup>();
  const devices = new Map(setup.devices.map(([keyId, publicKey, botId]) => [keyId, { publicKey, botId }]));
  const store = await openStore(setup.store, { clock: systemClock });
  const keys = brokerKeys(readTokenKey(setup.tokenKeyFile));
  const cloud = new CloudClient({
    baseUrl: setup.cloud,
    accessKeyId: ACCESS_KEY_ID,
    secretKey: { reveal: () => SECRET },
    clock: systemClock,
    parserTier: 'optimizing',
    connections: setup.cloudConnections,
  });
  const firstToken = async (authorization: string | undefined, path: string, raw: Buffer): Promise<object | undefined> => {
    const auth = parseDeviceAuthorization(authorization);
    const device = devices.get(auth.keyId);
    if (device === undefined || !verifyRequest(storedKey(device.publicKey), auth, 'POST', path, raw)) return undefined;
    const pair = await cloud.getToken({ kind: 'bot', id: device.botId }, Date.now());
    const now = Date.now();
    const expiresAt = now + pair.expireIn * 1000;
    // Kept as the broker keeps a token: only while the device's key is still active (its store holds the fleet, preloaded).
    const kept = await store.keepToken(auth.keyId, {
      botId: device.botId,
      accessSealed: keys.seal(pair.accessToken),
      accessExpiresAt: expiresAt,
      accessLifetimeS: pair.expireIn,
      refreshSealed: null,
      refreshExpiresAt: null,
      updatedAt: now,
    });
    if (!kept) return undefined;
    return { botId: device.botId, accessToken: pair.accessToken, expireIn: pair.expireIn, expiresAt };
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      firstToken(req.headers.authorization, req.url ?? '', Buffer.concat(chunks)).then(
        (answer) => send(res, answer === undefined ? 401 : 200, answer ?? { code: 'bad-signature' }),
        (err: unknown) => send(res, 500, { code: 'internal', msg: String(err) }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send!({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  process.once('disconnect', () => {
    server.close();
    server.closeAllConnections();
    void Promise.all([cloud.close(), store.close()]);
  });
}

function send(res: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

export interface FleetFloor {
  url: string;
  pid: number;
  close(): Promise<void>;
}

export interface FleetFloorOptions {
  cloud: string;
  store: string;
  tokenKeyFile: string;
  cloudConnections: number;
  devices: readonly BenchDevice[];
  /** The brokers' node flags: the unit's unless the bench was told others. */
  nodeFlags: readonly string[] | undefined;
}

/** Starts the floor with the broker unit's node flags and Environment=, and checks it refuses a forged request. */
export async function startFleetFloor(o: FleetFloorOptions): Promise<FleetFloor> {
  const setup: FloorSetup = {
    cloud: o.cloud,
    store: o.store,
    tokenKeyFile: o.tokenKeyFile,
    cloudConnections: o.cloudConnections,
    devices: o.devices.map((d) => [d.keyId, d.publicKey, d.botId]),
  };
  const child = await forkSelf<{ url: string }>(['--floor'], setup, { execArgv: o.nodeFlags ?? NODE_FLAGS, env: cleanEnv(UNIT_ENV) });
  // A floor that skipped the verification would be no floor: a body changed after signing must be refused.
  const forged = signedTokenRequest(o.devices[0]!);
  const res = await fetch(`${child.ready.url}${forged.path}`, { method: 'POST', headers: forged.headers, body: '{ }' });
  await res.arrayBuffer();
  if (res.status !== 401) {
    await child.close();
    throw new Error(`the fleet's floor answered a forged request ${res.status}, not 401`);
  }
  return { url: child.ready.url, pid: child.pid, close: () => child.close() };
}
