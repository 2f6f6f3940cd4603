// The broker's capacity model, from the fleet row's measured rates: what N devices ask of it in steady state
// and after an outage, how many replicas a million devices need, and the cloud's own rate (getToken sent
// straight to it) as the ceiling no number of replicas passes.
import type { FleetMeasured } from './broker-fleet.js';

/** The access lifetime the cloud gives (expireIn: the specification's example, 2 h; its docs also say 8 h). */
export const ACCESS_LIFETIME_S = 7200;
/** A device asks again with about this much left (DESIGN §1.6, the broker's default minValidityS). */
export const RENEW_AHEAD_S = 1800;
/** How soon a fleet should have its tokens back after an outage, for the replica count. */
export const DRAIN_TARGET_S = 600;
const MILLION = 1_000_000;

const count = (n: number): string => Math.round(n).toLocaleString('en-US');

/** Lines of text: requests per second for N devices, one replica's rate here, replicas for a million, the cloud's ceiling. */
export function capacityModel(f: FleetMeasured): string {
  const every = ACCESS_LIFETIME_S - RENEW_AHEAD_S;
  const rate = f.paths.broker.rps;
  const cloud = f.paths.straight.rps;
  const steady = (n: number): string => `${(n / every).toFixed(n / every < 10 ? 1 : 0)}/s`;
  const forDrain = Math.max(1, Math.ceil(MILLION / DRAIN_TARGET_S / rate));
  return [
    `Capacity model. A device asks when its token has ~${RENEW_AHEAD_S} s left: once per ${every} s with ${ACCESS_LIFETIME_S} s tokens. The`,
    "broker's cached token is then the one being renewed, so each ask costs one cloud call, as a first token does here.",
    `  steady state: N / ${every} per second — ${steady(f.devices)} for ${count(f.devices)} devices, ${steady(MILLION)} for a million;`,
    '  after an outage long enough for every token to end: all N at once, each a cloud call; one replica here',
    `  (${f.storeKind}, cloudConcurrency ${f.cap}) answers ${count(rate)}/s: ${count(f.devices)} devices in ${count(f.devices / rate)} s, a million in ${count(MILLION / rate)} s;`,
    `  a million devices: one replica carries the steady state ${(rate / (MILLION / every)).toFixed(1)}× over; ${forDrain} replicas (PostgreSQL) give every`,
    `  device its token back within ${DRAIN_TARGET_S / 60} min of such an outage, if the cloud takes ${forDrain * f.cap} calls in flight;`,
    `  the cloud itself answered ${count(cloud)} getToken/s sent straight to it: no number of replicas gets more from it, so a million`,
    `  devices need ${count(MILLION / cloud)} s at least from this cloud, which ${Math.ceil(cloud / rate)} replicas of this one would reach.`,
  ].join('\n');
}
