import type { Logger } from 'pino';
import { BotlinkError } from '../../protocol/errors.js';
import { VERSION } from '../../version.js';
import type { AgentConfig } from '../config/config.js';
import type { RouteDeps } from '../local/routes.js';
import type { RelayPort } from '../local/relay-port.js';
import { LocalApi } from '../local/server.js';
import { claimInstance } from '../store/instance.js';
import type { HeldLock } from '../store/lock.js';
import { openRuntime, type AgentRuntime, type RuntimeOptions } from './runtime.js';

/** What the daemon holds from its claim on stateDir until its stop, whoever the device turns out to be. */
export interface Host {
  readonly rt: AgentRuntime;
  /** This stateDir's one-daemon lock; undefined when a stranger squats its name (the daemon runs anyway). */
  readonly instance: HeldLock | undefined;
  /** The local API (DESIGN §3.5); none when localSocket is "". */
  readonly local: LocalApi | undefined;
}

export interface HostOptions {
  config: AgentConfig;
  runtime: RuntimeOptions;
  log: Logger;
  /** Where the local API hands its upgrades: the relay, or what stands for it until there is one. */
  relay: RelayPort;
  routes: RouteDeps;
}

/**
 * Opens the runtime, claims stateDir and starts the local API, in that order (DESIGN §2): the API before
 * provisioning, which may wait for the network, so apps can ask /v1/status why. On a failure whatever
 * was opened is closed again before the error is thrown.
 */
export async function openHost(o: HostOptions): Promise<Host> {
  const { config, log } = o;
  const rt = openRuntime(config, o.runtime);
  let instance: HeldLock | undefined;
  try {
    const claim = await claimInstance(rt.store);
    if (!claim.ok) {
      throw new BotlinkError(
        'ERR_ALREADY_RUNNING',
        `another botlink daemon (pid ${claim.holder.pid}) already runs on ${config.stateDir}`,
        'fatal',
        { fix: 'stop it first (systemctl stop botlink)' },
      );
    }
    if ('lock' in claim) instance = claim.lock;
    else log.error({ code: 'ERR_LOCK_UNUSABLE' }, `instance lock unavailable (${claim.unusable}): running without the one-daemon check`);
    log.info(
      { version: VERSION, pid: process.pid, mode: config.mode, baseUrl: config.baseUrl, stateDir: config.stateDir },
      'botlink starting',
    );
    return { rt, instance, local: await startLocalApi(rt, o) };
  } catch (err) {
    await instance?.release();
    await rt.close();
    throw err;
  }
}

async function startLocalApi(rt: AgentRuntime, o: HostOptions): Promise<LocalApi | undefined> {
  const path = o.config.localSocket;
  if (path === null) return undefined;
  const api = new LocalApi({
    path,
    clock: rt.clock,
    maxConnections: rt.settings.local.maxConnections,
    gid: o.config.localGroup,
    relay: o.relay,
    log: o.log.child({ part: 'local' }),
    ...o.routes,
  });
  await api.start();
  return api;
}

/** The lock released and the runtime closed: the last of a stop, once everything that used them is down. */
export async function closeHost(host: Host): Promise<void> {
  await host.instance?.release();
  await host.rt.close();
}
