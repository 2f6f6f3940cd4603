/** The admin API's items as §3.8 spells them: what the store's rows become on the wire. */
import type { DeviceItemRow } from '../store/admin-types.js';

export interface DeviceItem {
  botId: string | null;
  deviceId: string | null;
  vendorId: string | null;
  name: string | null;
  keyId: string;
  state: string;
  lastSeen: number | null;
  agentVersion: string | null;
  lastRefusal: { code: string; at: number } | null;
}

/** A device's line; `name` the device's (an enrolled or pending key's; null for a key enrolled before keys kept one). */
export function deviceItem(r: DeviceItemRow): DeviceItem {
  return {
    botId: r.botId,
    deviceId: r.deviceId,
    vendorId: r.vendorId,
    name: r.name,
    keyId: r.keyId,
    state: r.state,
    lastSeen: r.lastSeenAt,
    agentVersion: r.agentVersion,
    lastRefusal: r.refusalCode === null || r.refusalAt === null ? null : { code: r.refusalCode, at: r.refusalAt },
  };
}
