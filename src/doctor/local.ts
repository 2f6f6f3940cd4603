import { lstatSync, mkdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { ConfigError, describeSource, loadConfig } from '../agent/config/config.js';
import { messageOf } from '../protocol/errors.js';
import { fail, failWith, octal, ok, skip, UNMET, type Check, type Outcome } from './check.js';
import { openRuntime } from '../agent/daemon/runtime.js';
import { systemRandom } from '../clock.js';
import { SecretFileError } from '../agent/config/secret.js';
import { DeviceKeyError, ENROLL_COMMAND } from '../agent/config/device-key.js';
import { readStatusFile } from '../agent/daemon/status.js';
import { SOCKET_MODE } from '../agent/local/socket-file.js';
import { runningDaemon } from '../agent/store/instance.js';

/** Creates the directory as the agent would, then proves it writable with a file created and removed. */
function probeDir(key: 'stateDir' | 'runtimeDir', dir: string, mode: number): Outcome | undefined {
  try {
    mkdirSync(dir, { recursive: true, mode });
    const probe = join(dir, `.doctor-${process.pid}`);
    writeFileSync(probe, '', { flag: 'wx', mode: 0o600 });
    unlinkSync(probe);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? messageOf(err);
    const fixes: Record<string, string> = {
      EACCES: `run doctor as the user botlink runs as (or root), and make ${dir} owned by that user (chmod ${octal(mode)})`,
      EROFS: `the file system is read-only: choose a writable ${key}`,
      ENOSPC: 'the disk is full: free some space',
      ENOTDIR: `a file is in the way: ${key} must be a directory`,
    };
    const known = code === 'EPERM' ? 'EACCES' : code === 'EEXIST' ? 'ENOTDIR' : code;
    return fail(`${dir}: ${code}`, fixes[known] ?? `choose a writable directory for ${key}`);
  }
}

function modeOf(path: string): number | undefined {
  try {
    return statSync(path).mode & 0o777;
  } catch {
    return undefined;
  }
}

/** A logger that keeps the store's warnings, so the database check can report a corrupt file moved aside. */
function troubleLog(into: string[]) {
  return pino(
    { level: 'warn', base: null, timestamp: false },
    {
      write(line: string) {
        const entry = JSON.parse(line) as { msg?: string; movedTo?: string };
        into.push(`${entry.msg ?? 'token store warning'}${entry.movedTo ? ` (to ${entry.movedTo})` : ''}`);
      },
    },
  );
}

export const configCheck: Check = {
  name: 'config',
  needs: [],
  run(ctx) {
    try {
      ctx.config = loadConfig({ ...(ctx.configFile !== undefined && { file: ctx.configFile }), env: ctx.env });
      return ok(describeSource(ctx.config.source));
    } catch (err) {
      // loadConfig reads the secret (or the device key) last, so an error there means every setting passed.
      if (err instanceof ConfigError && err.cause instanceof SecretFileError) {
        ctx.secretError = err.cause;
        return ok('settings valid; the secret key file is not (see next line)');
      }
      if (err instanceof ConfigError && err.cause instanceof DeviceKeyError) {
        ctx.keyError = err.cause;
        return ok('settings valid; the device key file is not (see next line)');
      }
      if (err instanceof ConfigError) return failWith(err, 'correct the setting it names');
      throw err;
    }
  },
};

/** Signing mode: the vendor's account secret, on this device (DESIGN §3.7); broker mode: the device's own key. */
export const secretFileCheck: Check = {
  name: 'secret file',
  needs: [],
  run(ctx) {
    const problem = ctx.secretError ?? ctx.keyError;
    if (problem) return failWith(problem, 'check the file and the disk it is on');
    const config = ctx.config;
    if (!config) return skip(UNMET.config(ctx)!);
    if (config.mode === 'broker') {
      const st = statSync(config.deviceKeyFile);
      const key = `device key ${config.deviceKeyFile} (mode ${octal(st.mode)}, owner uid ${st.uid}, keyId ${config.deviceKey.keyId})`;
      return ok(`no account secret on this device (broker mode); ${key}`);
    }
    const st = statSync(config.secretKeyFile);
    return ok(`${config.secretKeyFile} (mode ${octal(st.mode)}, owner uid ${st.uid}); ${ACCOUNT_SECRET_WARNING}`);
  },
};

/** The warning of signing mode (DESIGN §3.7): the file holds the account secret, the same on every device. */
export const ACCOUNT_SECRET_WARNING =
  "WARNING: this is the vendor's account secret, the same on every device: a copy of this card mints tokens for " +
  `every botId of the vendor; broker mode keeps it off the device (${ENROLL_COMMAND})`;

export const stateDirCheck: Check = {
  name: 'state dir',
  needs: ['config'],
  run(ctx) {
    const config = ctx.config!;
    const problem = probeDir('stateDir', config.stateDir, 0o700);
    if (problem) return problem;
    // Opening the store resets the mode to 0600: look before, for the database check.
    ctx.dbModeBefore = modeOf(join(config.stateDir, 'botlink.db'));
    try {
      const quick = { ...config, httpTimeoutMs: Math.min(config.httpTimeoutMs, ctx.timeoutMs) };
      ctx.rt = openRuntime(quick, { log: troubleLog(ctx.storeTrouble), clock: ctx.clock, random: systemRandom });
    } catch (err) {
      return failWith(err, 'check stateDir and the disk it is on');
    }
    return ok(`${config.stateDir} is writable; token store opened`);
  },
};

export const runtimeDirCheck: Check = {
  name: 'runtime dir',
  needs: ['config'],
  run(ctx) {
    const dir = ctx.config!.runtimeDir;
    return probeDir('runtimeDir', dir, 0o755) ?? ok(`${dir} is writable`);
  },
};

export const databaseCheck: Check = {
  name: 'database',
  needs: ['runtime'],
  run(ctx) {
    const store = ctx.rt!.store;
    if (ctx.storeTrouble.length > 0) {
      return fail(ctx.storeTrouble.join('; '), 'check the storage (dmesg, SD card wear); the agent signs again with an empty cache');
    }
    const integrity = store.integrityCheck();
    if (integrity !== 'ok') {
      return fail(
        `${store.path}: integrity_check: ${integrity.split('\n')[0]}`,
        `stop botlink and move ${store.path} aside; the agent then starts with an empty cache and signs again`,
      );
    }
    const before = ctx.dbModeBefore;
    if (before !== undefined && before !== 0o600) {
      return fail(
        `${store.path} had mode ${octal(before)} (reset to 0600 on open)`,
        'find what loosened it (a copy or restore without modes); the tokens in it were readable by others',
      );
    }
    return ok(`${store.path}: integrity ok, mode ${octal(statSync(store.path).mode)}`);
  },
};

const RESTART_FIX = 'restart botlink (systemctl restart botlink): it makes the socket afresh at start';

/** The local API socket of a running daemon (DESIGN §3.5): there, mode 0660, in localGroup; and whether an app is attached. */
export const localApiCheck: Check = {
  name: 'local api',
  needs: ['runtime'],
  async run(ctx) {
    const config = ctx.config!;
    const path = config.localSocket;
    if (path === null) return ok('turned off (localSocket is "")');
    const group = config.localGroup === null ? "the daemon's own group" : `gid ${config.localGroup}`;
    const daemon = await runningDaemon(ctx.rt!.store);
    if (!daemon) return ok(`no daemon runs; botlink makes ${path} at start (mode ${octal(SOCKET_MODE)}, ${group})`);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? messageOf(err);
      return fail(`daemon pid ${daemon.pid} runs but ${path}: ${code}`, `check that the daemon uses localSocket ${path}; ${RESTART_FIX}`);
    }
    if (!st.isSocket()) return fail(`${path} is not a socket`, `remove it; ${RESTART_FIX}`);
    if ((st.mode & 0o777) !== SOCKET_MODE) {
      return fail(`${path} has mode ${octal(st.mode)}, not ${octal(SOCKET_MODE)}`, `find what changed it; ${RESTART_FIX}`);
    }
    if (config.localGroup !== null && st.gid !== config.localGroup) {
      return fail(`${path} is in gid ${st.gid}, not localGroup ${config.localGroup}`, RESTART_FIX);
    }
    const status = readStatusFile(config.runtimeDir);
    const app =
      status?.pid !== daemon.pid || !status.relay
        ? 'app: unknown (no status.json of this daemon)'
        : status.relay.attached
          ? 'an app is attached'
          : 'no app attached';
    return ok(`${path}: mode ${octal(st.mode)}, gid ${st.gid}; ${app}`);
  },
};
