/** Registering a device with the cloud under its vendor (DESIGN §1.5), as enroll and an operator's accept both do. */
import type { CloudClient } from '../cloud/client.js';
import type { RegisterDeviceRequest } from '../protocol/wire.js';
import type { Clock } from '../clock.js';
import { CloudGate } from './cloud-gate.js';
import { cloudRefusal } from './tokens.js';
import { VendorTokens } from './vendor-tokens.js';

/** The botId the cloud registered the device under (the same deviceId gives the same botId); a failure is a Refusal (502, 503). */
export type Register = (request: RegisterDeviceRequest) => Promise<string>;

export function cloudRegistrar(d: { cloud: CloudClient; gate: CloudGate; vendors: VendorTokens }): Register {
  return async (request) => {
    try {
      const token = await d.vendors.get(request.vendorId);
      return await d.gate.run(() => d.cloud.registerDevice(token, request));
    } catch (err) {
      d.vendors.forget(request.vendorId);
      throw cloudRefusal(err);
    }
  };
}

/** An operator's process (`broker accept`): one cloud call at a time, its own vendor tokens. */
export function operatorRegistrar(cloud: CloudClient, clock: Clock): Register {
  const gate = new CloudGate(1, 1);
  return cloudRegistrar({ cloud, gate, vendors: new VendorTokens(cloud, gate, clock) });
}
