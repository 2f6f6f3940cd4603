// A throwaway PostgreSQL server, without vitest: the tests (postgres.ts) and the broker's benchmark use it.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import pg from 'pg';
import { closed, exec } from './exec.js';
import { findTool, requireRoot, requireTool } from './tools.js';

/** What a test says when Debian's PostgreSQL is not on this machine. */
export const POSTGRES_MISSING = 'postgresql is not installed: run scripts/test-tools.sh (apt-get install postgresql)';

const READY = 'database system is ready to accept connections';
const START_LIMIT_MS = 60_000;
const STOP_LIMIT_MS = 30_000;

/** A throwaway PostgreSQL server on 127.0.0.1, its data in a temp folder; one per test file. */
export interface PostgresServer {
  readonly port: number;
  /** A URL to a new, empty database of its own (CREATE DATABASE): one per test. */
  freshDatabase(): Promise<string>;
  /** Runs one statement as the superuser in `url`'s database and returns its rows. */
  query<T extends pg.QueryResultRow>(url: string, sql: string, params?: unknown[]): Promise<T[]>;
  /** SIGINT (fast shutdown), waits for it to exit, removes its folder. */
  stop(): Promise<void>;
}

/** The uid and gid of `nobody`: PostgreSQL refuses to run as root, and the tests do. */
function nobody(): { uid: number; gid: number } {
  const id = (flag: string): number => Number(execFileSync('id', [flag, 'nobody'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Runs `initdb` as nobody in a new folder below `parent` (a folder `nobody` may enter), then `postgres`
 * on 127.0.0.1 with a free port and its socket in that folder; resolves once its log says it accepts
 * connections. Fails by name when PostgreSQL is not installed.
 */
export async function startPostgresIn(parent: string): Promise<PostgresServer> {
  const initdb = findTool('postgresql');
  if (initdb === undefined) throw new Error(POSTGRES_MISSING);
  requireRoot('a throwaway PostgreSQL runs as nobody');
  const setpriv = requireTool('setpriv');
  const bin = dirname(initdb);
  const { uid, gid } = nobody();
  const asNobody = (cmd: string, args: string[]): [string, string[]] => [
    setpriv,
    [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', join(bin, cmd), ...args],
  ];
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', TZ: 'UTC' };

  const dir = mkdtempSync(join(parent, 'postgres-'));
  chownSync(dir, uid, gid);
  const data = join(dir, 'data');
  const sockets = join(dir, 'run');
  mkdirSync(sockets, { mode: 0o700 });
  chownSync(sockets, uid, gid);
  try {
    const made = await exec(...asNobody('initdb', ['-D', data, '-U', 'botlink', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']), {
      env,
      timeoutMs: START_LIMIT_MS,
    });
    if (made.code !== 0) throw new Error(`initdb failed (${made.code ?? made.signal}): ${made.stderr}`);
    // A port another process takes between our probe and postgres's bind: try another.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const started = await launch(asNobody, env, data, sockets, port);
      if ('child' in started) return server(started.child, port, dir);
      if (!/could not bind|Address already in use/.test(started.log) || attempt === 3)
        throw new Error(`postgres did not start: ${started.log}`);
    }
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** Starts postgres and waits for its ready line on stderr, or its exit (then its log). */
async function launch(
  asNobody: (cmd: string, args: string[]) => [string, string[]],
  env: NodeJS.ProcessEnv,
  data: string,
  sockets: string,
  port: number,
): Promise<{ child: ChildProcess } | { log: string }> {
  const settings = ['listen_addresses=127.0.0.1', `port=${port}`, `unix_socket_directories=${sockets}`, 'fsync=off', 'max_connections=200'];
  const child = spawn(...asNobody('postgres', ['-D', data, ...settings.flatMap((s) => ['-c', s])]), {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const onLog = (chunk: Buffer): void => {
    log += chunk.toString();
  };
  child.stderr!.on('data', onLog);
  const outcome = await new Promise<'ready' | 'exited' | 'timeout'>((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), START_LIMIT_MS);
    child.stderr!.on('data', () => {
      if (log.includes(READY)) {
        clearTimeout(timer);
        resolve('ready');
      }
    });
    void closed(child).then(() => {
      clearTimeout(timer);
      resolve('exited');
    });
  });
  if (outcome === 'ready') {
    // Its log is read on and dropped, so that a full pipe never stalls the server.
    child.stderr!.off('data', onLog);
    return { child };
  }
  child.kill('SIGKILL');
  await closed(child);
  return { log: outcome === 'timeout' ? `not ready after ${START_LIMIT_MS} ms: ${log}` : log };
}

function server(child: ChildProcess, port: number, dir: string): PostgresServer {
  const exited = closed(child);
  const url = (database: string): string => `postgres://botlink@127.0.0.1:${port}/${database}`;
  let databases = 0;
  const query = async <T extends pg.QueryResultRow>(target: string, sql: string, params: unknown[] = []): Promise<T[]> => {
    const client = new pg.Client({ connectionString: target });
    await client.connect();
    try {
      return (await client.query<T>(sql, params)).rows;
    } finally {
      await client.end();
    }
  };
  return {
    port,
    query,
    async freshDatabase() {
      const name = `test_${++databases}`;
      await query(url('postgres'), `CREATE DATABASE ${name}`);
      return url(name);
    },
    async stop() {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_LIMIT_MS);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
