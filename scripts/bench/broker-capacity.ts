// The broker's capacity model, from the fleet row's measured rate: what N devices ask of it in steady state
// and after an outage, and how many replicas a million devices need.
import type { FleetMeasured } from './broker-fleet.js';

/** The access lifetime the cloud gives (expireIn: the specification's example, 2 h; its docs also say 8 h). */
export const ACCESS_LIFETIME_S = 7200;
/** A device asks again with about this much left (DESIGN §1.6, the broker's default minValidityS). */
export const RENEW_AHEAD_S = 1800;
/** How fast a fleet should have its tokens back after an outage, for the replica count. */
export const DRAIN_TARGET_S = 600;
const MILLION = 1_000_000;

/** Lines of text: requests per second for N devices, one replica's rate here, replicas for a million. */
export function capacityModel(f: FleetMeasured): string {
  const every = ACCESS_LIFETIME_S - RENEW_AHEAD_S;
  const perReplica = f.broker.rps;
  const steady = (n: number): string => `${(n / every).toFixed(n / every < 10 ? 1 : 0)}/s`;
  const drain = (n: number): string => `${Math.ceil(n / perReplica)} s`;
  const forSteady = Math.max(1, Math.ceil(MILLION / every / perReplica));
  const forDrain = Math.max(1, Math.ceil(MILLION / DRAIN_TARGET_S / perReplica));
  return [
    `Capacity model (each device asks once per token lifetime: ${ACCESS_LIFETIME_S} s, renewed ${RENEW_AHEAD_S} s ahead, so every ${every} s;`,
    '  in steady state each ask is one cloud call, since the cached token is the one the device is renewing):',
    `  steady state: ${steady(f.devices)} for ${f.devices.toLocaleString('en-US')} devices, ${steady(MILLION)} for a million;`,
    `  after an outage, all at once: every device with an expired token costs a cloud call; one replica here (${f.storeKind},`,
    `  cloudConcurrency ${f.cap}) issues ${Math.round(perReplica)} first tokens/s, so it drains ${f.devices.toLocaleString('en-US')} devices in ${drain(f.devices)}`,
    `  and a million in ${drain(MILLION)};`,
    `  a million devices: ${forSteady} replica(s) for the steady state; ${forDrain} to give every device its token back within`,
    `  ${DRAIN_TARGET_S / 60} min of an outage (PostgreSQL, each replica at this rate; the cloud must then take ${forDrain * f.cap} calls in flight).`,
  ].join('\n');
}
