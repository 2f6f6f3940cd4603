// A `botlink broker` with its admin listener (DESIGN §3.8) on loopback, and two admin tokens made by the command
// line: `ops` (operator) and `watcher` (viewer).
import { expect } from 'vitest';
import { createTestService, type TestService } from '../../src/service/testing.js';
import { type BrokerProc, type BrokerRig, brokerRig, vendorSeed } from './broker-rig.js';
import { type Bundle, privateDaemonBundle } from './bundle.js';

const SECRET = 'SK-admin-5d1f';

export interface AdminRig {
  /** The bundle the broker and the commands run from, for another broker beside it. */
  bundle: Bundle;
  rig: BrokerRig;
  broker: BrokerProc;
  /** adminOrigin, from the broker's `admin on` line. */
  admin: string;
  operator: string;
  viewer: string;
  /** `broker admin-token create`: the token on its last line. */
  newToken(name: string, role: string, extra?: string[]): Promise<string>;
  close(): Promise<void>;
}

export async function startAdminRig(prefix: string): Promise<AdminRig> {
  const bundle: Bundle = await privateDaemonBundle(prefix);
  const cloud: TestService = await createTestService({ seed: vendorSeed(SECRET) });
  const rig = brokerRig({
    bundle: bundle.file,
    cloudUrl: cloud.url,
    secret: SECRET,
    extra: { adminListen: '127.0.0.1:0', enrollPerMinute: 100, pendingEnrollment: { V1: { devicePattern: 'SN-WAIT-[0-9]+' } } },
  });
  const newToken = async (name: string, role: string, extra: string[] = []): Promise<string> => {
    const r = await rig.cli(['admin-token', 'create', '--config', rig.configFile, '--name', name, '--role', role, ...extra]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim().split('\n').at(-1) ?? '';
  };
  const broker = await rig.start();
  const admin = await broker.adminUrl();
  const [operator, viewer] = await Promise.all([newToken('ops', 'operator'), newToken('watcher', 'viewer')]);
  return {
    bundle,
    rig,
    broker,
    admin,
    operator,
    viewer,
    newToken,
    async close() {
      await rig.close();
      await cloud.close();
      bundle.dispose();
    },
  };
}
