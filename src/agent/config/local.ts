import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ConfigError } from './error.js';
import type { ConfigKey } from './keys.js';
import { bad, type Raw } from './values.js';

export const LOCAL_SOCKET_FILE = 'botlink.sock';
/** Where group names are looked up: Node has no getgrnam, and a device keeps its groups here. */
export const GROUP_FILE = '/etc/group';
/** The largest gid Linux accepts ((gid_t)-1 means "unchanged" to chown). */
const MAX_GID = 0xfffffffe;

/** sun_path holds 107 bytes and a NUL: a longer path cannot be bound at all. */
export const MAX_SOCKET_PATH_BYTES = 107;
/** Linux pids have at most 7 digits (pid_max ≤ 4,194,304): the longest temporary name is this pid's. */
const LONGEST_PID = 4_194_304;

/** The name a socket is bound under before it is renamed over `path`: beside it, so the rename is atomic. */
export function socketTempPath(path: string, pid: number): string {
  return join(dirname(path), `.bl${pid}`);
}

/** The local API's socket (null: turned off with "") and its group (null: the daemon's own), DESIGN §3.2. */
export function localValues(
  raw: ReadonlyMap<ConfigKey, Raw>,
  runtimeDir: string,
  groupFile = GROUP_FILE,
): { localSocket: string | null; localGroup: number | null; metricsFile: string | null } {
  return {
    localSocket: socketValue(raw.get('localSocket'), runtimeDir, raw.get('runtimeDir')),
    localGroup: groupValue(raw.get('localGroup'), groupFile),
    metricsFile: metricsFileValue(raw.get('metricsFile')),
  };
}

/** node_exporter's textfile collector reads `*.prom` files only: another name would be written and never read. */
function metricsFileValue(r: Raw | undefined): string | null {
  if (r === undefined || r.value === '') return null;
  if (typeof r.value !== 'string' || r.value.includes('\0')) throw bad('metricsFile', r, 'must be a path ending in .prom, or "" for none');
  if (!r.value.endsWith('.prom')) {
    throw bad(
      'metricsFile',
      r,
      `must end in .prom (node_exporter's textfile collector reads no other name); got ${JSON.stringify(r.value)}`,
    );
  }
  return resolve(r.baseDir, r.value);
}

function socketValue(r: Raw | undefined, runtimeDir: string, runtimeRaw: Raw | undefined): string | null {
  if (r === undefined) {
    // The default lives in runtimeDir: a runtimeDir too long for it is runtimeDir's fault.
    const path = join(runtimeDir, LOCAL_SOCKET_FILE);
    const problem = socketPathProblem(path);
    if (problem === undefined) return path;
    const where = runtimeRaw ?? { value: runtimeDir, where: 'runtimeDir', fix: 'set a shorter runtimeDir', baseDir: '', fromEnv: false };
    throw new ConfigError('runtimeDir', `${where.where} is too long for the local API socket in it: ${problem}`, {
      fix: `${where.fix}: a shorter runtimeDir, or a short localSocket elsewhere (or "" to turn the local API off)`,
    });
  }
  if (typeof r.value !== 'string') throw bad('localSocket', r, 'must be a path, or "" to turn the local API off');
  if (r.value === '') return null;
  if (r.value.includes('\0')) throw bad('localSocket', r, 'must be a file system path');
  const path = resolve(r.baseDir, r.value);
  const problem = socketPathProblem(path);
  if (problem !== undefined) throw bad('localSocket', r, `must fit a Unix socket path: ${problem}`);
  return path;
}

/** Why `path`, or the temporary name it is bound under, cannot be a Unix socket's path; undefined when both fit. */
function socketPathProblem(path: string): string | undefined {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return `${path} is over ${MAX_SOCKET_PATH_BYTES} bytes`;
  const temp = socketTempPath(path, LONGEST_PID);
  if (Buffer.byteLength(temp) > MAX_SOCKET_PATH_BYTES) {
    return `it is bound first as ${temp}, which is over ${MAX_SOCKET_PATH_BYTES} bytes: give it a shorter folder`;
  }
  return undefined;
}

function groupValue(r: Raw | undefined, groupFile: string): number | null {
  if (r === undefined) return null;
  const v = r.fromEnv && typeof r.value === 'string' && /^\d+$/.test(r.value) ? Number(r.value) : r.value;
  if (typeof v === 'number') {
    if (Number.isInteger(v) && v >= 0 && v <= MAX_GID) return v;
    throw bad('localGroup', r, `must be a group name or a gid (0 to ${MAX_GID}); got ${JSON.stringify(r.value)}`);
  }
  if (typeof v !== 'string' || !/^[A-Za-z_][A-Za-z0-9_.-]*\$?$/.test(v) || v.length > 32) {
    throw bad('localGroup', r, `must be a group name or a gid; got ${JSON.stringify(r.value)}`);
  }
  const gid = gidOf(v, groupFile);
  if (gid !== undefined) return gid;
  return missingGroup(r, v, groupFile);
}

function missingGroup(r: Raw, name: string, groupFile: string): never {
  throw new ConfigError('localGroup', `${r.where} names group "${name}", which is not in ${groupFile}`, {
    fix: `create the group (addgroup --system ${name}) or give its numeric gid; or ${r.fix}`,
  });
}

/** The gid of a group named in the group file, or undefined. */
function gidOf(name: string, groupFile: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(groupFile, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [group, , gid] = line.split(':');
    if (group === name && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  return undefined;
}
