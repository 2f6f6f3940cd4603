import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, renameSync, unlinkSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { dirname } from 'node:path';
import { BotlinkError, messageOf } from '../../protocol/errors.js';
import { ConfigError } from '../config/error.js';
import { socketTempPath } from '../config/local.js';

/** The socket's mode (DESIGN §3.5): owner and group may connect, nobody else. */
export const SOCKET_MODE = 0o660;
/** Mask while binding: the file is born 0600, so nobody can connect before its group and mode are set. */
const BIND_UMASK = 0o177;

/** The file this daemon made, so stop() removes it only while it is still this one. */
export interface BoundSocket {
  path: string;
  dev: number;
  ino: number;
}

/** Where user names are looked up: Node has no getpwuid, and a device keeps its users here. */
const PASSWD_FILE = '/etc/passwd';

/** Whether something accepts connections on the socket at `path` (ECONNREFUSED: a leftover from a crash); 'unknown' when we may not try. */
function isLive(path: string): Promise<boolean | 'unknown'> {
  return new Promise((resolve) => {
    const probe = connect(path);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    // ECONNREFUSED and ENOENT mean nobody listens; EAGAIN (a full backlog) means somebody does.
    probe.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EACCES' || err.code === 'EPERM') resolve('unknown');
      else resolve(err.code !== 'ECONNREFUSED' && err.code !== 'ENOENT');
    });
  });
}

/** `name (uid N)`, or `uid N` when the passwd file does not name it. */
export function ownerName(uid: number, passwdFile = PASSWD_FILE): string {
  try {
    for (const line of readFileSync(passwdFile, 'utf8').split('\n')) {
      const [name, , id] = line.split(':');
      if (name && id === String(uid)) return `${name} (uid ${uid})`;
    }
  } catch {
    // No passwd file: the number alone.
  }
  return `uid ${uid}`;
}

/** Fails unless `path` is free or holds a dead socket; never touches a live socket or any other file. */
export async function checkSocketPath(path: string): Promise<void> {
  let kind: string;
  try {
    const st = lstatSync(path);
    if (st.isSocket()) {
      const live = await isLive(path);
      if (live === 'unknown') throw unprobeable(path, st.uid, st.mode);
      if (!live) return;
      throw new BotlinkError('ERR_ALREADY_RUNNING', `another process serves the local API socket ${path}`, 'fatal', {
        fix: 'stop the other botlink daemon, or give this one its own localSocket',
      });
    }
    kind = st.isDirectory() ? 'a directory' : 'a file that is not a socket';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  throw new ConfigError('localSocket', `localSocket ${path} is ${kind}`, { fix: 'remove it, or choose another localSocket' });
}

/** A socket file this daemon may not even connect to: say whose it is and what to do, not "another daemon". */
function unprobeable(path: string, uid: number, mode: number): ConfigError {
  const owner = ownerName(uid);
  const me = process.getuid?.();
  return new ConfigError(
    'localSocket',
    `cannot tell whether anything serves the local API socket ${path}: it belongs to ${owner}, mode ${(mode & 0o777).toString(8).padStart(4, '0')}, and botlink (uid ${me}) may not connect to it`,
    {
      fix: `if no botlink daemon runs as ${owner} (a leftover of a run as that user), remove it: sudo rm ${path}; else stop that daemon, or give this one its own localSocket`,
    },
  );
}

/** Binds `server` beside `path`, gives the file its group and mode, then renames it over `path` (and any dead socket). */
export async function bindSocket(server: Server, path: string, gid: number | null): Promise<BoundSocket> {
  // The config checks that this name fits too (socketTempPath): a socket path has at most 107 bytes.
  const temp = socketTempPath(path, process.pid);
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    removeIfPresent(temp);
    await listen(server, temp);
    if (gid !== null) chownSync(temp, -1, gid);
    chmodSync(temp, SOCKET_MODE);
    renameSync(temp, path);
    const st = lstatSync(path);
    return { path, dev: st.dev, ino: st.ino };
  } catch (err) {
    if (server.listening) server.close();
    removeIfPresent(temp);
    const code = (err as NodeJS.ErrnoException).code;
    const what = code === 'EPERM' && gid !== null ? `cannot give it group ${gid} (localGroup)` : messageOf(err);
    const fix =
      code === 'EPERM' && gid !== null
        ? 'run botlink in that group (systemd Group=), or as root, or leave localGroup unset'
        : `choose a localSocket in a directory botlink can write (now ${dirname(path)})`;
    throw new ConfigError(code === 'EPERM' && gid !== null ? 'localGroup' : 'localSocket', `local API socket ${path}: ${what}`, {
      cause: err,
      fix,
    });
  }
}

/** Removes the socket file if it is still the one bound (a newer daemon may have taken the path since). */
export function unlinkBound(bound: BoundSocket): void {
  try {
    const st = lstatSync(bound.path);
    if (st.dev === bound.dev && st.ino === bound.ino) unlinkSync(bound.path);
  } catch {
    // Already gone: nothing to remove.
  }
}

function removeIfPresent(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Absent is the expected case.
  }
}

function listen(server: Server, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const old = process.umask(BIND_UMASK);
    try {
      server.once('error', reject);
      // In the main thread Node binds synchronously inside listen(): the mask covers the bind only.
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    } finally {
      process.umask(old);
    }
  });
}
