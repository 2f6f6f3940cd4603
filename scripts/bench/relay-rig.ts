// The relay benchmark's rig: a reference service echoing audio, a botlink daemon, the bare forwarder
// with the daemon's node flags, and one app on each path (through botlink, through the forwarder, direct).
import { build } from 'esbuild';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { VOICE_CHAT_PATH } from '../../src/protocol/conversation.js';
import { cleanEnv } from '../lib/env.js';
import { Child } from './child.js';
import { fetchToken, startService, timeToConnected } from './fixture.js';
import { App } from './relay-app.js';
import { ROOT } from './root.js';
import { sleep } from './sample.js';
import { UNIT_ENV } from './unit.js';
import type { Workspace } from './workspace.js';

/** One botId per path: the cloud allows one socket per device. */
export const BOTS = { botlink: 'bot-1', forwarder: 'bot-2', direct: 'bot-3' } as const;

export type Path = keyof typeof BOTS;
export type PerPath<T> = Record<Path, T>;
export type RelaySide = Exclude<Path, 'direct'>;
export type Relays<T> = Record<RelaySide, T>;

/** The service, the daemon, the forwarder and one app on each path. */
export async function relayRig(ws: Workspace, profileDir: string | undefined) {
  const svc = await startService(join(ws.dir, 'service.db'));
  svc.setEchoAudio(true);
  const children: Child[] = [];
  try {
    const device = ws.device(BOTS.botlink, svc);
    // Profiling replaces the unit's node flags (--cpu-prof is refused in NODE_OPTIONS): a developer's view, not the table's.
    const prof = profileDir ? ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', profileDir] : undefined;
    const start = (): Child => (prof ? new Child([...prof, ws.bundle, 'run', '--config', device.configFile]) : ws.agent(device));
    const daemon = (await timeToConnected(svc, BOTS.botlink, start)).child;
    children.push(daemon);
    // The local API's socket: Device sets runtimeDir, and localSocket defaults to <runtimeDir>/botlink.sock.
    const daemonSocket = join(device.runtimeDir, 'botlink.sock');
    await waitFor(() => existsSync(daemonSocket), 30_000, `the daemon's local socket ${daemonSocket}`);

    const forwarderSocket = join(ws.dir, 'forwarder.sock');
    const token = await fetchToken(svc, BOTS.forwarder);
    const forwarderEnv = {
      SOCKET: forwarderSocket,
      WS_URL: svc.wsUrl,
      BOT_ID: BOTS.forwarder,
      TOKEN: token,
    };
    // The node flags and environment the daemon runs with (the unit's), so the two processes differ only in what they run.
    const flags = daemon.proc.spawnargs.slice(1, daemon.proc.spawnargs.indexOf(ws.bundle));
    const forwarder = new Child([...flags, await buildForwarder(ws.dir)], cleanEnv({ ...UNIT_ENV, ...forwarderEnv }));
    children.push(forwarder);
    await waitFor(() => forwarder.out.includes('listening') || !forwarder.running, 30_000, 'the forwarder listening');
    if (!forwarder.running) throw new Error(`the forwarder exited: ${forwarder.out.slice(0, 2000)}`);

    const directUrl = new URL(svc.wsUrl);
    directUrl.searchParams.set('botId', BOTS.direct);
    const directToken = await fetchToken(svc, BOTS.direct);
    const apps: PerPath<App> = {
      botlink: await App.open(`ws+unix://${daemonSocket}:${VOICE_CHAT_PATH}`),
      forwarder: await App.open(`ws+unix://${forwarderSocket}:${VOICE_CHAT_PATH}`),
      direct: await App.open(directUrl.href, { Authorization: `Bearer ${directToken}` }),
    };
    return { svc, daemon, forwarder, apps };
  } catch (err) {
    await Promise.all(children.map((c) => c.stop('SIGKILL')));
    await svc.close();
    throw err;
  }
}

/** forwarder.ts as its own script in the workspace (under node_modules, so `ws` resolves). */
async function buildForwarder(dir: string): Promise<string> {
  const { scriptOptions } = (await import(pathToFileURL(join(ROOT, 'scripts', 'build.mjs')).href)) as typeof import('../build.mjs');
  const outfile = join(dir, 'forwarder.mjs');
  await build({ ...scriptOptions(), entryPoints: [join(ROOT, 'scripts', 'bench', 'forwarder.ts')], outfile });
  return outfile;
}

/** Checks every 50 ms until `ok()` holds; fails after `ms` with `what`. */
async function waitFor(ok: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!ok()) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(50);
  }
}
