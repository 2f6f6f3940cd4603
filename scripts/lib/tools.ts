import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The system tools tests drive for real, each with the Debian package that provides it; scripts/test-tools.sh
 * installs the same list (`scripts/test-tools.sh --list`, compared by test/integration/project/test-tools.test.ts).
 */
export const TEST_TOOLS = {
  logrotate: 'logrotate',
  'systemd-analyze': 'systemd',
  python3: 'python3',
  openssl: 'openssl',
  setpriv: 'util-linux',
  flock: 'util-linux',
  libfaketime: 'faketime',
  sox: 'sox',
  // Prometheus's own Python client: its text-format parser checks botlink's metrics independently.
  prometheus_client: 'python3-prometheus-client',
  // The broker's store on PostgreSQL: tests run a throwaway server (test/helpers/postgres.ts).
  postgresql: 'postgresql',
  // A second broker client, in Python, signs its requests with the cryptography module's Ed25519.
  cryptography: 'python3-cryptography',
  // The console's tests (test/browser) drive Debian's headless Chromium through playwright-core, which downloads no browser.
  chromium: 'chromium',
} as const;
export type TestTool = keyof typeof TEST_TOOLS;

/** Debian's multiarch folders for the faketime package's preload library (amd64, arm64, armhf). */
const LIBFAKETIME_PATHS = ['x86_64-linux-gnu', 'aarch64-linux-gnu', 'arm-linux-gnueabihf'].map(
  (triplet) => `/usr/lib/${triplet}/faketime/libfaketime.so.1`,
);

/** Where Debian's python3-prometheus-client puts its text-format parser. */
const PROMETHEUS_CLIENT_PATHS = ['/usr/lib/python3/dist-packages/prometheus_client/parser.py'];

/** Where Debian's python3-cryptography puts its package. */
const CRYPTOGRAPHY_PATHS = ['/usr/lib/python3/dist-packages/cryptography/__init__.py'];

/** Debian keeps each PostgreSQL major's server binaries outside PATH, in /usr/lib/postgresql/<major>/bin. */
const POSTGRESQL_ROOT = '/usr/lib/postgresql';

/** The newest installed major's initdb, or undefined. */
function newestInitdb(): string | undefined {
  if (!existsSync(POSTGRESQL_ROOT)) return undefined;
  const majors = readdirSync(POSTGRESQL_ROOT)
    .filter((name) => /^\d+$/.test(name) && existsSync(join(POSTGRESQL_ROOT, name, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(POSTGRESQL_ROOT, majors[0], 'bin', 'initdb');
}

/** PATH plus the sbin folders a non-root PATH lacks (logrotate lives in /usr/sbin). */
function searchPath(): string[] {
  return [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin'].filter(Boolean);
}

/** Where `tool` is on this machine, or undefined. */
export function findTool(tool: TestTool): string | undefined {
  if (tool === 'libfaketime') return LIBFAKETIME_PATHS.find((path) => existsSync(path));
  if (tool === 'prometheus_client') return PROMETHEUS_CLIENT_PATHS.find((path) => existsSync(path));
  if (tool === 'postgresql') return newestInitdb();
  if (tool === 'cryptography') return CRYPTOGRAPHY_PATHS.find((path) => existsSync(path));
  for (const dir of searchPath()) {
    try {
      accessSync(join(dir, tool), constants.X_OK);
      return join(dir, tool);
    } catch {
      // not in this folder
    }
  }
  return undefined;
}

/** What a test says when `tool` is missing: the tool, then the two ways to get it. */
export function missingToolMessage(tool: TestTool): string {
  return `${tool} not found: run scripts/test-tools.sh or apt-get install ${TEST_TOOLS[tool]}`;
}

/** The absolute path of `tool`; a test that needs it fails (never skips) with missingToolMessage when it is absent. */
export function requireTool(tool: TestTool): string {
  const path = findTool(tool);
  if (path === undefined) throw new Error(missingToolMessage(tool));
  return path;
}

/** Tests that chown files to other users or switch uid need root: they fail (never skip) saying so. */
export function requireRoot(why: string): void {
  const uid = process.getuid?.();
  if (uid !== 0) throw new Error(`${why}: run npm test as root (uid ${uid} now), as CI does: sudo npm test, or in a container`);
}
