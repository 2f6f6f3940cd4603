import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * Cross-process locks that need no file: a lock is an abstract Unix socket name (Linux), bound by
 * its holder. Binding writes nothing, so it works on a full or read-only disk; the kernel frees the
 * name the moment the holder exits, however it dies; no pid is compared, so a reused pid is never
 * taken for a holder. Names are per network namespace: the daemon's unit keeps the host's, which a
 * technician's `sudo botlink …` shares.
 *
 * Anyone can bind any abstract name, and bound names are listed in /proc/net/unix. So the name
 * derives from a random key kept in the 0600 token database, and a holder proves it knows that key
 * (an HMAC of the prober's nonce): a name bound by a process that cannot prove it is unusable, and
 * callers go on without the lock rather than let another local user stop them.
 */

export type LockName = 'renew' | 'instance';

export interface HeldLock {
  release(): Promise<void>;
}

/** What a probe of a lock name found: nobody, a holder that proved the key, or a name no botlink can use (a squatter). */
export type LockProbe = { state: 'free' } | { state: 'held'; pid: number } | { state: 'unusable'; detail: string };

export type LockClaim = { ok: true; lock: HeldLock } | { ok: false; probe: Exclude<LockProbe, { state: 'free' }> };

/** A holder answers in microseconds; this covers an event loop stalled by a slow disk. */
const PROBE_TIMEOUT_MS = 5000;
const NONCE = /^[0-9a-f]{32}$/;
const MAX_LINE = 512;
/** A holder can release between our bind and our probe: bind again, a few times at most. */
const BIND_ATTEMPTS = 3;

export function lockAddress(key: string, name: LockName): string {
  return `\0botlink-${createHash('sha256').update(`${key}\n${name}`).digest('hex').slice(0, 40)}`;
}

function proofOf(key: string, address: string, nonce: string): string {
  return createHmac('sha256', key).update(`${address}\n${nonce}`).digest('hex');
}

/** Takes lock `name` unless a holder that knows `key` has it; an unusable name is reported, not waited on. */
export async function acquireLock(key: string, name: LockName): Promise<LockClaim> {
  const address = lockAddress(key, name);
  for (let attempt = 1; ; attempt++) {
    let server: Server | undefined;
    try {
      server = await bind(address, key);
    } catch (err) {
      return { ok: false, probe: { state: 'unusable', detail: `cannot bind it: ${(err as Error).message}` } };
    }
    if (server) return { ok: true, lock: { release: () => new Promise((resolve) => server.close(() => resolve())) } };
    const probe = await probeAddress(address, key);
    if (probe.state !== 'free') return { ok: false, probe };
    if (attempt === BIND_ATTEMPTS)
      return { ok: false, probe: { state: 'unusable', detail: `${name} lock bound and freed ${BIND_ATTEMPTS} times in a row` } };
  }
}

/** Who holds lock `name`, without taking it. */
export function probeLock(key: string, name: LockName): Promise<LockProbe> {
  return probeAddress(lockAddress(key, name), key);
}

/** The bound server, or undefined when the name is taken. */
function bind(address: string, key: string): Promise<Server | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => answer(socket, address, key));
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(undefined) : reject(err)));
    // A lock must never be what keeps a process alive.
    server.unref();
    server.listen(address, () => resolve(server));
  });
}

/** Reads the prober's nonce, answers with our pid and the proof, and hangs up. */
function answer(socket: Socket, address: string, key: string): void {
  socket.setTimeout(PROBE_TIMEOUT_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  let line = '';
  socket.on('data', (chunk: Buffer) => {
    line += chunk.toString('latin1');
    const end = line.indexOf('\n');
    if (end < 0) {
      if (line.length > MAX_LINE) socket.destroy();
      return;
    }
    const nonce = line.slice(0, end);
    if (!NONCE.test(nonce)) return void socket.destroy();
    socket.end(`${JSON.stringify({ pid: process.pid, proof: proofOf(key, address, nonce) })}\n`);
  });
}

function probeAddress(address: string, key: string): Promise<LockProbe> {
  return new Promise((resolve) => {
    const nonce = randomBytes(16).toString('hex');
    const socket = createConnection(address);
    let reply = '';
    let settled = false;
    const settle = (probe: LockProbe): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(probe);
    };
    const unusable = (detail: string) => settle({ state: 'unusable', detail });
    socket.setTimeout(PROBE_TIMEOUT_MS, () => unusable(`its holder gave no answer within ${PROBE_TIMEOUT_MS / 1000} s`));
    socket.on('connect', () => socket.write(`${nonce}\n`));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') settle({ state: 'free' });
      // A holder that hangs up before proving anything is judged on 'close', like one that answers wrong.
      else if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') unusable(`probing it failed: ${err.message}`);
    });
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1');
      if (reply.length > MAX_LINE) unusable('its holder sent an oversized answer');
    });
    socket.on('close', () => {
      const pid = verify(reply, address, key, nonce);
      if (pid === undefined) unusable('its holder could not prove it knows the key in the token database');
      else settle({ state: 'held', pid });
    });
  });
}

/** The holder's pid when `reply` carries a valid proof for our nonce. */
function verify(reply: string, address: string, key: string, nonce: string): number | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(reply);
  } catch {
    return undefined;
  }
  const { pid, proof } = (parsed ?? {}) as { pid?: unknown; proof?: unknown };
  if (!Number.isSafeInteger(pid) || typeof proof !== 'string') return undefined;
  const expected = Buffer.from(proofOf(key, address, nonce));
  const given = Buffer.from(proof);
  return given.length === expected.length && timingSafeEqual(given, expected) ? (pid as number) : undefined;
}
