// Row 3 of the broker bench: the device. Boot → connected with a cached token, an agent in broker mode
// against the same agent in signing mode, alternating (as bench:link times a boot: spawn until the service
// accepts the WebSocket). Both devices are made as a technician makes them: the broker-mode one by
// `botlink provision --broker URL --code CODE`, with a code from `botlink broker code`.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReferenceService } from '../../src/service/server.js';
import { cleanEnv } from '../lib/env.js';
import { exec } from '../lib/exec.js';
import { fileAppears } from '../lib/file-appears.js';
import type { BrokerRig } from './broker-rig.js';
import type { Device } from './fixture.js';
import { disconnect, startService, timeToConnected } from './fixture.js';
import { type BootPhases, bootPhases, dropWarmUp, timedBoot } from './link.js';
import { median } from '../lib/stats.js';
import { alternate } from './sample.js';
import type { Workspace } from './workspace.js';

export const DEVICE_GOAL = 1.05;
const SIGNING_BOT = 'bot-1';

type Mode = 'broker' | 'signing';

/** Medians from an agent's log (ms): spawn → 'botlink starting' → 'link connecting' → the socket open at the service. */
export interface Phases {
  load: number;
  setUp: number;
  connect: number;
}

export interface DeviceMeasured {
  broker: number[];
  signing: number[];
  phases: Record<Mode, Phases>;
}

/** Runs `botlink ARGS` from the bundle; its stdout, or an error with its output. */
async function botlink(ws: Workspace, args: string[]): Promise<string> {
  const run = await exec(process.execPath, [ws.bundle, ...args], { env: cleanEnv(), timeoutMs: 60_000 });
  if (run.code !== 0) throw new Error(`botlink ${args[0]} exited ${run.code}: ${run.stderr}${run.stdout}`);
  return run.stdout;
}

/** A device turned to broker mode: its config without the account's keys, then provisioned with a code. */
async function brokerDevice(
  ws: Workspace,
  svc: ReferenceService,
  brokerUrl: string,
  brokerConfig: string,
): Promise<{ device: Device; botId: string }> {
  const device = ws.device('bot-2', svc);
  const {
    accessKeyId: _a,
    secretKeyFile: _s,
    botId: _b,
    ...rest
  } = JSON.parse(readFileSync(device.configFile, 'utf8')) as Record<string, unknown>;
  writeFileSync(device.configFile, JSON.stringify(rest, null, 2));
  const code = (await botlink(ws, ['broker', 'code', '--config', brokerConfig, '--vendor-id', 'V1', '--device-id', 'SN-bench-device']))
    .trim()
    .split('\n')
    .pop()!;
  await botlink(ws, ['provision', '--broker', brokerUrl, '--code', code, '--device-id', 'SN-bench-device', '--config', device.configFile]);
  const botId = (JSON.parse(readFileSync(device.configFile, 'utf8')) as { botId: string }).botId;
  return { device, botId };
}

/**
 * A reference service on a SQLite file, a broker on it holding the signing device's account secret, one
 * device of each mode; each boots once (caching its token, and the bundle's code cache), then `n`
 * alternating boots each.
 */
export async function measureDevice(ws: Workspace, rig: BrokerRig, n: number): Promise<DeviceMeasured> {
  const svc = await startService(join(ws.dir, 'device-service.db'));
  try {
    const signing = ws.device(SIGNING_BOT, svc);
    const broker = await rig.broker({
      name: 'device',
      cloud: svc.url,
      store: rig.sqliteStore('device'),
      secretKeyFile: join(signing.dir, 'secret-key'),
    });
    try {
      const { device, botId } = await brokerDevice(ws, svc, broker.url, broker.configFile);
      const first = async (d: Device, bot: string, until?: Promise<unknown>): Promise<void> => {
        const { child } = await timeToConnected(svc, bot, () => ws.agent(d));
        await until;
        await disconnect(svc, bot, child);
      };
      // The agent writes its code cache 5 s after its start: every measured boot starts from it.
      await first(signing, SIGNING_BOT, fileAppears(ws.cacheDir, '.v8cache'));
      await first(device, botId);
      const phasesOf: Record<Mode, BootPhases> = { broker: bootPhases(), signing: bootPhases() };
      const boot = (d: Device, bot: string, mode: Mode) => (): Promise<number> => timedBoot(svc, bot, d, phasesOf[mode], () => ws.agent(d));
      const [viaBroker = [], signed = []] = await alternate(n, [boot(device, botId, 'broker'), boot(signing, SIGNING_BOT, 'signing')]);
      const medians = (p: BootPhases): Phases => {
        dropWarmUp(p, viaBroker.length);
        return { load: median(p.load), setUp: median(p.setUp), connect: median(p.connect) };
      };
      return { broker: viaBroker, signing: signed, phases: { broker: medians(phasesOf.broker), signing: medians(phasesOf.signing) } };
    } finally {
      await broker.stop();
    }
  } finally {
    await svc.close();
  }
}
