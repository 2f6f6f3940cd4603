import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createConnection, createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { acquireLock, lockAddress, probeLock, type HeldLock } from '../../../src/agent/store/lock.js';

// Random: abstract names are machine-wide, and another run of this file may be under way.
const KEY = randomBytes(16).toString('hex');
const held: HeldLock[] = [];
const servers: Server[] = [];

afterEach(async () => {
  for (const h of held.splice(0)) await h.release();
  for (const s of servers.splice(0)) s.close();
});

async function take(key = KEY): Promise<HeldLock> {
  const claim = await acquireLock(key, 'renew');
  if (!claim.ok) throw new Error(`lock not taken: ${JSON.stringify(claim.probe)}`);
  held.push(claim.lock);
  return claim.lock;
}

/** Another local user binding the lock's name, answering each connection with `reply` (or hanging up). */
async function squat(address: string, reply?: string): Promise<void> {
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => (reply === undefined ? socket.destroy() : socket.end(reply)));
  });
  servers.push(server);
  server.listen(address);
  await once(server, 'listening');
}

describe('lock on an abstract socket name', () => {
  it('is free, then held by this pid, then free again once released', async () => {
    expect(await probeLock(KEY, 'renew')).toEqual({ state: 'free' });
    const lock = await take();
    expect(await probeLock(KEY, 'renew')).toEqual({ state: 'held', pid: process.pid });
    expect(await acquireLock(KEY, 'renew')).toEqual({ ok: false, probe: { state: 'held', pid: process.pid } });
    await lock.release();
    held.pop();
    expect(await probeLock(KEY, 'renew')).toEqual({ state: 'free' });
  });

  it('names differ by key and by lock, so one stateDir never blocks another', async () => {
    await take();
    expect(await probeLock(KEY, 'instance')).toEqual({ state: 'free' });
    await take(randomBytes(16).toString('hex'));
    expect(lockAddress(KEY, 'renew')).not.toBe(lockAddress(KEY, 'instance'));
    expect(lockAddress(KEY, 'renew')).not.toContain(KEY);
  });

  it('a name bound by a process that cannot prove the key is unusable, not held', async () => {
    await squat(lockAddress(KEY, 'renew'));
    const probe = await probeLock(KEY, 'renew');
    expect(probe).toMatchObject({ state: 'unusable', detail: expect.stringMatching(/could not prove it knows the key/) });
    expect(await acquireLock(KEY, 'renew')).toEqual({ ok: false, probe });
  });

  it('a proof recorded from the real holder does not pass for another nonce', async () => {
    const lock = await take();
    // Eavesdrop one honest answer, as a local user can by connecting.
    const socket = createConnection(lockAddress(KEY, 'renew'));
    socket.write(`${'a'.repeat(32)}\n`);
    let recorded = '';
    socket.on('data', (d: Buffer) => (recorded += d.toString()));
    await once(socket, 'close');
    expect(JSON.parse(recorded)).toMatchObject({ pid: process.pid, proof: expect.any(String) });
    await lock.release();
    held.pop();
    await squat(lockAddress(KEY, 'renew'), recorded);
    expect(await probeLock(KEY, 'renew')).toMatchObject({ state: 'unusable' });
  });

  it('a holder hangs up on a malformed nonce', async () => {
    await take();
    const socket = createConnection(lockAddress(KEY, 'renew'));
    socket.write('not a nonce\n');
    let reply = '';
    socket.on('data', (d: Buffer) => (reply += d.toString()));
    await once(socket, 'close');
    expect(reply).toBe('');
  });
});
