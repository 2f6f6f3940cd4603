import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/agent/config/config.js';
import {
  BOTLINK_APP_ID,
  boardSerial,
  machineAppSpecificId,
  resolveIdentity,
  type BoardPaths,
} from '../../../src/agent/daemon/provisioning.js';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { BotlinkError } from '../../../src/protocol/errors.js';
import { useHarness } from '../../helpers/harness.js';

const { cleanups, tempDir } = useHarness();

const MACHINE_ID = '3d1219c7c4c5404aaa1f6d2a48adfda4';
/** `systemd-id128 machine-id --app-specific=BOTLINK_APP_ID` (systemd 252) with each machine id bind-mounted over /etc/machine-id. */
const SYSTEMD_ANSWERS: [machineId: string, appSpecific: string][] = [
  [MACHINE_ID, '97fea7c30f9e4ae0a73ce674e79bdd43'],
  ['0123456789abcdef0123456789abcdef', 'f51c147d34b449e5a4956fab88d1af47'],
  ['b08dfa6083e7567a1921a715000001fb', 'f0e1e664afeb4849b636f76fad671645'],
];
const PI_CPUINFO =
  'processor\t: 0\nHardware\t: BCM2835\nRevision\t: c03114\nSerial\t\t: 10000000ABCDEF01\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n';
const PC_CPUINFO = 'processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n';

/** A board whose /proc/cpuinfo and /etc/machine-id hold the given text (undefined: the file is absent). */
function board(cpuinfo: string | undefined, machineId: string | undefined): BoardPaths {
  const dir = tempDir('botlink-board-');
  const paths = { cpuinfo: join(dir, 'cpuinfo'), machineId: join(dir, 'machine-id') };
  if (cpuinfo !== undefined) writeFileSync(paths.cpuinfo, cpuinfo);
  if (machineId !== undefined) writeFileSync(paths.machineId, machineId);
  return paths;
}

/** What resolveIdentity reads: a loaded config (vendor V1, no botId unless given) and a real store. */
function runtime(config: Record<string, unknown> = {}) {
  const dir = tempDir('botlink-provisioning-');
  writeFileSync(join(dir, 'secret-key'), 'SK\n', { mode: 0o600 });
  const body = {
    baseUrl: 'https://api.example.com',
    accessKeyId: 'AK',
    secretKeyFile: 'secret-key',
    vendorId: 'V1',
    stateDir: 'state',
    ...config,
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(body));
  const loaded = loadConfig({ file: join(dir, 'config.json'), env: {} });
  const store = TokenStore.open(loaded.stateDir);
  cleanups.push(() => store.close());
  const key = (deviceId: string) => ({ baseUrl: loaded.baseUrl, accessKeyId: loaded.accessKeyId, vendorId: 'V1', deviceId });
  return { rt: { config: loaded, store }, store, key };
}

describe('machineAppSpecificId: sd_id128_get_machine_app_specific', () => {
  it.each(SYSTEMD_ANSWERS)('machine id %s gives what systemd gives: %s', (machineId, expected) => {
    expect(machineAppSpecificId(machineId, BOTLINK_APP_ID)).toBe(expected);
  });

  it('is a v4 UUID as 32 hex, and a different app id gives an unrelated id', () => {
    const id = machineAppSpecificId(MACHINE_ID);
    expect(id).toMatch(/^[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$/);
    // `systemd-id128 machine-id --app-specific=00000000000000000000000000000001` on the same machine id.
    expect(machineAppSpecificId(MACHINE_ID, '00000000000000000000000000000001')).toBe('c92b12aba31e4236a2296560761415ec');
  });
});

describe('boardSerial', () => {
  it('keeps the Raspberry Pi serial as it was (lower-cased), whatever the machine id', () => {
    expect(boardSerial(board(PI_CPUINFO, `${MACHINE_ID}\n`))).toEqual({ serial: '10000000abcdef01' });
  });

  it('never gives the raw machine id: it sends the app-specific hash and remembers the raw one only for stored botIds', () => {
    const serial = boardSerial(board(PC_CPUINFO, `${MACHINE_ID}\n`));
    expect(serial).toEqual({ serial: '97fea7c30f9e4ae0a73ce674e79bdd43', legacy: MACHINE_ID });
    expect(serial!.serial).not.toContain(MACHINE_ID.slice(0, 8));
  });

  it('takes a zero Pi serial as no serial, and two cloned boards apart only by a regenerated machine id', () => {
    const zeroSerial = PI_CPUINFO.replace('10000000ABCDEF01', '0000000000000000');
    expect(boardSerial(board(zeroSerial, `${MACHINE_ID}\n`))?.serial).toBe('97fea7c30f9e4ae0a73ce674e79bdd43');
    expect(boardSerial(board(PC_CPUINFO, `${MACHINE_ID}\n`))).toEqual(boardSerial(board(PC_CPUINFO, `${MACHINE_ID}\n`)));
    expect(boardSerial(board(PC_CPUINFO, '0123456789abcdef0123456789abcdef\n'))?.serial).toBe('f51c147d34b449e5a4956fab88d1af47');
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['uninitialized (first boot)', 'uninitialized\n'],
    ['all zeros', '00000000000000000000000000000000\n'],
    ['not 32 hex digits', 'my-board-7\n'],
  ])('has no serial when /etc/machine-id is %s and there is no Pi serial', (_what, text) => {
    expect(boardSerial(board(PC_CPUINFO, text))).toBeUndefined();
  });
});

describe('resolveIdentity: which deviceId registers, and upgrades keep their botId', () => {
  it('registers a board without a Pi serial under the hashed machine id', () => {
    const { rt } = runtime();
    expect(resolveIdentity(rt, board(PC_CPUINFO, `${MACHINE_ID}\n`))).toEqual({
      kind: 'vendor',
      id: 'V1',
      deviceId: '97fea7c30f9e4ae0a73ce674e79bdd43',
    });
  });

  it('keeps the botId a board was provisioned with under its raw machine id (no new registration on upgrade)', () => {
    const { rt, store, key } = runtime();
    store.setProvisionedBotId(key(MACHINE_ID), 'bot-legacy');
    expect(resolveIdentity(rt, board(PC_CPUINFO, `${MACHINE_ID}\n`))).toEqual({ kind: 'bot', id: 'bot-legacy', provisioned: true });
  });

  it('prefers a botId stored under the hashed id', () => {
    const { rt, store, key } = runtime();
    store.setProvisionedBotId(key(MACHINE_ID), 'bot-legacy');
    store.setProvisionedBotId(key('97fea7c30f9e4ae0a73ce674e79bdd43'), 'bot-new');
    expect(resolveIdentity(rt, board(PC_CPUINFO, `${MACHINE_ID}\n`))).toEqual({ kind: 'bot', id: 'bot-new', provisioned: true });
  });

  it('leaves a configured deviceId and a Pi serial as they were: no hash, no legacy lookup', () => {
    const configured = runtime({ deviceId: MACHINE_ID });
    expect(resolveIdentity(configured.rt, board(PC_CPUINFO, `${MACHINE_ID}\n`))).toEqual({
      kind: 'vendor',
      id: 'V1',
      deviceId: MACHINE_ID,
    });
    const pi = runtime();
    pi.store.setProvisionedBotId(pi.key(MACHINE_ID), 'bot-legacy');
    expect(resolveIdentity(pi.rt, board(PI_CPUINFO, `${MACHINE_ID}\n`))).toEqual({
      kind: 'vendor',
      id: 'V1',
      deviceId: '10000000abcdef01',
    });
  });

  it('a configured botId wins over everything', () => {
    const { rt } = runtime({ botId: 'bot-7' });
    expect(resolveIdentity(rt, board(PC_CPUINFO, undefined))).toEqual({ kind: 'bot', id: 'bot-7', provisioned: false });
  });

  it('names both sources and the fix when there is no serial at all', () => {
    const { rt } = runtime();
    const paths = board(PC_CPUINFO, 'uninitialized\n');
    let error: unknown;
    try {
      resolveIdentity(rt, paths);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(BotlinkError);
    expect((error as BotlinkError).code).toBe('ERR_NO_DEVICE_ID');
    expect((error as Error).message).toBe(
      `no deviceId configured and no board serial found (no Serial in ${paths.cpuinfo}, no valid ${paths.machineId})`,
    );
    expect((error as BotlinkError).fix).toBe('set deviceId');
  });
});
