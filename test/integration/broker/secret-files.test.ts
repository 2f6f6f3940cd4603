import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Exit } from '../../../src/cli/frame/exit.js';
import { brokerSettings } from '../../helpers/broker-files.js';
import { useHarness } from '../../helpers/harness.js';
import { botlinkInProcess } from '../../helpers/in-process.js';

// The broker's secrets are checked before it starts (DESIGN §3.7): each private file a regular file of the
// broker's user or root, readable by no one else; the token key apart from a SQLite store; a config whose
// store URL holds a password as private as a secret. Each failure is exit 78 naming the file and the fix.
const { tempDir } = useHarness();
const OTHER_UID = 4243;

/** A broker's folder and config as the tests write them, with `change` applied to the files; the config's path. */
function vendor(change: (dir: string, settings: Record<string, unknown>) => Record<string, unknown> | undefined = () => undefined): string {
  const dir = tempDir('botlink-broker-secrets-');
  const settings = brokerSettings(dir, { cloudUrl: 'http://127.0.0.1:9', secret: 'SK-secret-files' });
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ ...settings, ...change(dir, settings) }), { mode: 0o600 });
  return file;
}

/** `botlink broker --config FILE`, in-process: a refused start returns its exit code and what it said. */
const start = (config: string) => botlinkInProcess(['broker', '--config', config]);

describe('botlink broker refuses its secrets unless they are private (exit 78, the file and the fix named)', () => {
  it.each<[string, (dir: string, settings: Record<string, unknown>) => Record<string, unknown> | undefined, RegExp, RegExp]>([
    [
      'a token key open to others',
      (dir) => void chmodSync(join(dir, 'token-key'), 0o644),
      /tokenKeyFile .*token-key has mode 0644/,
      /chmod 600/,
    ],
    [
      'an account secret open to the group',
      (dir) => void chmodSync(join(dir, 'secret-key'), 0o640),
      /secretKeyFile .*secret-key has mode 0640/,
      /chmod 600/,
    ],
    [
      'an account secret owned by another user',
      (dir) => void chownSync(join(dir, 'secret-key'), OTHER_UID, OTHER_UID),
      /secret-key is owned by uid 4243, which is neither this user/,
      /chown/,
    ],
    [
      'a token key that is a folder',
      (dir) => {
        mkdirSync(join(dir, 'key-folder'));
        return { tokenKeyFile: join(dir, 'key-folder') };
      },
      /key-folder is not a regular file/,
      /head -c 32 \/dev\/urandom/,
    ],
    [
      'a token key in the SQLite store’s folder',
      (dir) => ({ store: `sqlite:${join(dir, 'broker.db')}` }),
      /tokenKeyFile .*token-key is in .*, the SQLite store's folder: a backup of the store would carry the key/,
      /keep it elsewhere/,
    ],
    [
      'a store password file open to others',
      (dir) => {
        writeFileSync(join(dir, 'store-password'), 'hunter2\n', { mode: 0o644 });
        return { store: 'postgres://broker@127.0.0.1:9/broker', storePasswordFile: join(dir, 'store-password') };
      },
      /storePasswordFile .*store-password has mode 0644/,
      /chmod 600/,
    ],
  ])('%s', async (_, change, said, fix) => {
    const r = await start(vendor(change));
    expect(r.code, r.stderr).toBe(Exit.CONFIG);
    expect(r.stderr).toMatch(said);
    expect(r.stderr).toMatch(fix);
    expect(r.stderr).not.toContain('SK-secret-files');
  });

  it('a config whose store URL holds a password must be private; the password is never shown', async () => {
    const url = 'postgres://broker:hunter2-secret@127.0.0.1:9/broker';
    const config = vendor(() => ({ store: url }));
    chmodSync(config, 0o644);
    const open = await start(config);
    expect(open.code, open.stderr).toBe(Exit.CONFIG);
    expect(open.stderr).toMatch(/config\.json has mode 0644/);
    expect(open.stderr).toMatch(/chmod 600 .*config\.json`, or keep the password out of the URL in a storePasswordFile/);
    expect(open.stderr).not.toContain('hunter2');
    // Private, it passes that check and meets the server that is not there: not a config error of the file.
    chmodSync(config, 0o600);
    const closed = await start(config);
    expect(closed.stderr).not.toMatch(/config\.json has mode/);
    expect(closed.stderr).not.toContain('hunter2');
  });
});
