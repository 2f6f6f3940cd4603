import { DEFAULT_CONFIG_FILE, loadConfigValues } from '../../agent/config/config.js';
import { ensureDeviceKey } from '../../agent/config/device-key.js';
import { boardSerial } from '../../agent/daemon/provisioning.js';
import { defineCommand } from '../frame/command.js';
import { Failure, UsageError } from '../frame/exit.js';
import { printable, printableJson } from '../printable.js';

const USAGE = `usage: botlink key [--config FILE] [--device-id SN] [--json]

Broker mode: makes this device's key when there is none, and prints the line a factory collects for
\`botlink broker preauth\`: deviceId,publicKey. Sends nothing anywhere.

  --config FILE    agent configuration (default: $BOTLINK_CONFIG, else ${DEFAULT_CONFIG_FILE})
  --device-id SN   the serial to print (default: deviceId in the config, else the board's)
  --json           {"deviceId", "publicKey", "keyId"} instead`;

/** The broker's form of a deviceId (DESIGN §3.7): what `broker preauth` accepts on its lines. */
const DEVICE_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/** `botlink key`: the device key's public half, made first when there is none (DESIGN §3.1, §3.7). */
export const key = defineCommand({
  usage: USAGE,
  flags: { config: { type: 'string' }, 'device-id': { type: 'string' }, json: { type: 'boolean' } },
  async run({ flags, stdout, env }) {
    const flag = flags['device-id'];
    if (flag !== undefined && !DEVICE_ID.test(flag)) throw new UsageError('--device-id must be 1 to 64 of A-Z a-z 0-9 . _ : -');
    const values = loadConfigValues({ ...(flags.config !== undefined && { file: flags.config }), env });
    if (values.mode !== 'broker') {
      throw new Failure('this device signs with the account secret: it has no device key (brokerUrl is not set)', {
        fix: 'set brokerUrl (and remove accessKeyId and secretKeyFile) to run in broker mode',
        kind: 'config',
      });
    }
    const deviceId = flag ?? values.deviceId ?? boardSerial()?.serial;
    if (deviceId === undefined) {
      throw new Failure('no deviceId: none configured, and no board serial found', {
        fix: 'give --device-id SN, or set deviceId in the config',
        kind: 'config',
      });
    }
    const device = ensureDeviceKey(values.deviceKeyFile).key;
    const line = { deviceId, publicKey: device.publicKey, keyId: device.keyId };
    stdout.write(flags.json === true ? `${printableJson(line)}\n` : `${printable(`${deviceId},${device.publicKey}`)}\n`);
  },
});
