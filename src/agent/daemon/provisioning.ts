import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { BotlinkError, type BotlinkErrorOptions } from '../../protocol/errors.js';
import type { DeviceType, Identity } from '../../protocol/wire.js';
import type { Random } from '../../clock.js';
import { FailureRun } from '../token/failures.js';
import { ENROLL_COMMAND } from '../config/device-key.js';
import type { AgentRuntime } from './runtime.js';
import { type Enrollment, enrollItself } from './zero-touch.js';

export interface BoardPaths {
  cpuinfo: string;
  machineId: string;
}
export const SYSTEM_BOARD_PATHS: BoardPaths = { cpuinfo: '/proc/cpuinfo', machineId: '/etc/machine-id' };

/** botlink's application id (`systemd-id128 new`): the key of its machine-id-derived deviceId, fixed forever. */
export const BOTLINK_APP_ID = '5319b15d9e2a4da8b7f8db5d3031bb61';

/**
 * sd_id128_get_machine_app_specific(3): HMAC-SHA256 keyed by the 16-byte machine id over the 16-byte app
 * id, first half, marked as a v4 UUID, as 32 lowercase hex; `systemd-id128 machine-id -a APP` prints the same.
 */
export function machineAppSpecificId(machineId: string, appId: string = BOTLINK_APP_ID): string {
  const id = createHmac('sha256', Buffer.from(machineId, 'hex')).update(Buffer.from(appId, 'hex')).digest().subarray(0, 16);
  id[6] = (id[6]! & 0x0f) | 0x40;
  id[8] = (id[8]! & 0x3f) | 0x80;
  return id.toString('hex');
}

export interface BoardSerial {
  /** The deviceId this board registers with. */
  serial: string;
  /** The raw machine id, which earlier versions registered with: a botId stored under it is still this board's. */
  legacy?: string;
}

/**
 * The board's serial: the Raspberry Pi's `Serial` line in /proc/cpuinfo, else an app-specific hash of
 * /etc/machine-id, which machine-id(5) asks never to expose; undefined when neither is usable.
 */
export function boardSerial(paths: BoardPaths = SYSTEM_BOARD_PATHS): BoardSerial | undefined {
  const cpu = readOptional(paths.cpuinfo)?.match(/^Serial\s*:\s*([0-9a-fA-F]+)\s*$/m)?.[1];
  if (cpu && !/^0+$/.test(cpu)) return { serial: cpu.toLowerCase() };
  const raw = readOptional(paths.machineId)?.trim();
  // Empty, "uninitialized" (first boot) or all zeros is no machine id (sd_id128_get_machine refuses them too).
  if (!raw || !/^[0-9a-fA-F]{32}$/.test(raw) || /^0+$/.test(raw)) return undefined;
  return { serial: machineAppSpecificId(raw.toLowerCase()), legacy: raw };
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** What the agent signs as: a bot, or a vendor that must first register this device. */
export type ResolvedIdentity = { kind: 'bot'; id: string; provisioned: boolean } | { kind: 'vendor'; id: string; deviceId: string };

/** This device has no identity to sign as: the config must name one. */
export class ProvisioningError extends BotlinkError {
  constructor(code: 'ERR_NO_IDENTITY' | 'ERR_NO_DEVICE_ID', message: string, options: BotlinkErrorOptions) {
    super(code, message, 'needs-config', options);
  }
}

/**
 * botId from the config, else one this device was provisioned with, else the vendor that provisions it.
 * A board provisioned under its raw machine id keeps that botId: registering the hashed id would make a new bot.
 */
export function resolveIdentity(rt: Pick<AgentRuntime, 'config' | 'store'>, board: BoardPaths = SYSTEM_BOARD_PATHS): ResolvedIdentity {
  const { config } = rt;
  if (config.botId) return { kind: 'bot', id: config.botId, provisioned: false };
  const vendorId = config.vendorId;
  if (!vendorId) {
    throw new ProvisioningError('ERR_NO_IDENTITY', 'neither botId nor vendorId is configured', {
      fix: 'set botId, or vendorId to let the device register itself',
    });
  }
  const serial = config.deviceId === undefined ? boardSerial(board) : undefined;
  const deviceId = config.deviceId ?? serial?.serial;
  if (!deviceId) {
    throw new ProvisioningError(
      'ERR_NO_DEVICE_ID',
      `no deviceId configured and no board serial found (no Serial in ${board.cpuinfo}, no valid ${board.machineId})`,
      { fix: 'set deviceId' },
    );
  }
  const key = { baseUrl: config.baseUrl, accessKeyId: config.accessKeyId, vendorId };
  const legacy = serial?.legacy === undefined ? undefined : { ...key, deviceId: serial.legacy };
  const botId = rt.store.getProvisionedBotId({ ...key, deviceId }) ?? (legacy && rt.store.getProvisionedBotId(legacy));
  return botId ? { kind: 'bot', id: botId, provisioned: true } : { kind: 'vendor', id: vendorId, deviceId };
}

export interface ProvisionRequest {
  vendorId: string;
  deviceId: string;
  appId?: string;
  type?: DeviceType;
  name?: string;
  /** Register again even when a botId is stored. */
  force?: boolean;
  /** One line per step, for the CLI. */
  onStep?: (step: 'vendor-token' | 'register' | 'stored', detail: string) => void;
  signal?: AbortSignal;
}

/** Registers this device under a vendor (DESIGN §1.5) and stores the botId; idempotent. */
export async function provision(rt: AgentRuntime, req: ProvisionRequest): Promise<{ botId: string; already: boolean }> {
  const { config, store, issuer } = rt;
  if (issuer.mode !== 'sign') {
    throw new BotlinkError(
      'ERR_PROVISION',
      'this device is in broker mode: it registers through the broker, not with a vendor token',
      'needs-config',
      {
        fix: `run \`${ENROLL_COMMAND}\``,
      },
    );
  }
  const key = { baseUrl: config.baseUrl, accessKeyId: config.accessKeyId, vendorId: req.vendorId, deviceId: req.deviceId };
  const stored = store.getProvisionedBotId(key);
  if (stored && !req.force) return { botId: stored, already: true };
  const vendor: Identity = { kind: 'vendor', id: req.vendorId };
  const tokens = rt.tokensFor(vendor);
  tokens.start();
  try {
    const vendorToken = await tokens.current({ failFast: true, ...(req.signal && { signal: req.signal }) });
    req.onStep?.('vendor-token', `vendor token for ${req.vendorId} obtained`);
    const botId = await issuer.api.registerDevice(vendorToken, {
      vendorId: req.vendorId,
      appId: req.appId ?? '',
      deviceId: req.deviceId,
      type: req.type ?? 'PHYSICAL_ROBOT',
      name: req.name ?? req.deviceId,
    });
    req.onStep?.('register', `device ${req.deviceId} registered as ${botId}`);
    store.setProvisionedBotId(key, botId);
    req.onStep?.('stored', `botId stored in ${store.path}`);
    return { botId, already: false };
  } finally {
    tokens.stop();
  }
}

export interface BotIdOptions {
  board?: BoardPaths;
  random: Random;
  signal: AbortSignal;
  log: Logger;
  /** Only a vendor is known: this device is about to register under it. */
  onVendor(vendorId: string): void;
  /** An attempt failed; the next one is `error`'s retry wait away (a person may have to fix something first). */
  onWaiting(error: BotlinkError): void;
  /** Broker mode, zero-touch: where the enrollment of this device key stands. */
  onEnrollment(e: Enrollment): void;
}

/**
 * The configured or provisioned botId; registers this device first when only a vendor is known, and
 * tries again, as the token manager does, until it succeeds. undefined once `signal` aborts.
 */
export async function botIdFor(rt: AgentRuntime, o: BotIdOptions): Promise<string | undefined> {
  const failures = new FailureRun(rt.settings.tokenBackoff, o.random, o.log);
  while (!o.signal.aborted) {
    try {
      const resolved = resolveIdentity(rt, o.board);
      if (resolved.kind === 'bot') return resolved.id;
      o.onVendor(resolved.id);
      // Broker mode registers through the broker: the device key enrolls itself, with no code.
      if (rt.issuer.mode === 'broker') {
        const device = { vendorId: resolved.id, deviceId: resolved.deviceId };
        const agent = { clock: rt.clock, backoff: rt.settings.tokenBackoff, store: rt.store, account: rt.config };
        return await enrollItself(agent, rt.issuer.broker, device, {
          random: o.random,
          signal: o.signal,
          log: o.log,
          onEnrollment: o.onEnrollment,
        });
      }
      o.log.info({ vendorId: resolved.id, deviceId: resolved.deviceId }, 'no botId yet: provisioning this device');
      const { botId } = await provision(rt, {
        vendorId: resolved.id,
        deviceId: resolved.deviceId,
        signal: o.signal,
        onStep: (step, detail) => o.log.info({ step }, detail),
      });
      return botId;
    } catch (err) {
      if (o.signal.aborted) return undefined;
      const { error, waitMs } = failures.failed(err, 'ERR_PROVISION', 'provisioning failed');
      o.onWaiting(error);
      await rt.clock.sleep(waitMs, o.signal);
    }
  }
  return undefined;
}
