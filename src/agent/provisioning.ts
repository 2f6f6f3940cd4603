import { readFileSync } from 'node:fs';
import { BotlinkError } from '../protocol/errors.js';
import type { DeviceType, Identity } from '../protocol/wire.js';
import type { AgentRuntime } from './runtime.js';

export interface BoardPaths {
  cpuinfo: string;
  machineId: string;
}
export const SYSTEM_BOARD_PATHS: BoardPaths = { cpuinfo: '/proc/cpuinfo', machineId: '/etc/machine-id' };

/** The board's serial: the Raspberry Pi's `Serial` line in /proc/cpuinfo, else /etc/machine-id. */
export function boardSerial(paths: BoardPaths = SYSTEM_BOARD_PATHS): string | undefined {
  const cpu = readOptional(paths.cpuinfo)?.match(/^Serial\s*:\s*([0-9a-fA-F]+)\s*$/m)?.[1];
  if (cpu && !/^0+$/.test(cpu)) return cpu.toLowerCase();
  const machineId = readOptional(paths.machineId)?.trim();
  return machineId ? machineId : undefined;
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** What the agent signs as: a bot, or a vendor that must first register this device. */
export type ResolvedIdentity =
  | { kind: 'bot'; id: string; provisioned: boolean }
  | { kind: 'vendor'; id: string; deviceId: string };

export class ProvisioningError extends BotlinkError {}

/** botId from the config, else one this device was provisioned with, else the vendor that provisions it. */
export function resolveIdentity(rt: AgentRuntime, board: BoardPaths = SYSTEM_BOARD_PATHS): ResolvedIdentity {
  const { config } = rt;
  if (config.botId) return { kind: 'bot', id: config.botId, provisioned: false };
  const vendorId = config.vendorId;
  if (!vendorId) {
    throw new ProvisioningError('ERR_NO_IDENTITY', 'neither botId nor vendorId is configured: set botId, or vendorId to let the device register itself', 'needs-config');
  }
  const deviceId = config.deviceId ?? boardSerial(board);
  if (!deviceId) {
    throw new ProvisioningError('ERR_NO_DEVICE_ID', 'no deviceId configured and no board serial found (/proc/cpuinfo, /etc/machine-id): set deviceId', 'needs-config');
  }
  const botId = rt.store.getProvisionedBotId({ baseUrl: config.baseUrl, accessKeyId: config.accessKeyId, vendorId, deviceId });
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
  const { config, store } = rt;
  const key = { baseUrl: config.baseUrl, accessKeyId: config.accessKeyId, vendorId: req.vendorId, deviceId: req.deviceId };
  const stored = store.getProvisionedBotId(key);
  if (stored && !req.force) return { botId: stored, already: true };
  const vendor: Identity = { kind: 'vendor', id: req.vendorId };
  const tokens = rt.tokensFor(vendor);
  tokens.start();
  try {
    const vendorToken = await tokens.current({ failFast: true, ...(req.signal && { signal: req.signal }) });
    req.onStep?.('vendor-token', `vendor token for ${req.vendorId} obtained`);
    const botId = await rt.api.registerDevice(vendorToken, {
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
