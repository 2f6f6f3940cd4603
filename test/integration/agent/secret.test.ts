import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_SECRET_STAND_IN, readSecretFile, SecretFileError } from '../../../src/agent/config/secret.js';
import { type Bundle, bundleChild, nodeForOtherUsers } from '../../helpers/bundle.js';
import { useHarness } from '../../helpers/harness.js';
import { requireRoot, requireTool } from '../../../scripts/lib/tools.js';

const SECRET = 'owner-test-secret-51c2';
const OTHER_UID = 4242;
const AGENT_UID = 4243;

const { tempDir } = useHarness();

/** A 0600 secret file owned by `uid`, in a folder every uid can traverse. */
function secretOwnedBy(uid: number): string {
  requireRoot(`this test chowns a secret file to uid ${uid}`);
  const dir = tempDir('botlink-secret-owner-');
  chmodSync(dir, 0o755);
  const path = join(dir, 'secret-key');
  writeFileSync(path, `${SECRET}\n`, { mode: 0o600 });
  chownSync(path, uid, uid);
  return path;
}

function refusal(path: string): SecretFileError {
  try {
    readSecretFile(path);
  } catch (err) {
    expect(err).toBeInstanceOf(SecretFileError);
    return err as SecretFileError;
  }
  throw new Error(`${path} was accepted`);
}

describe('readSecretFile: the owner (these tests run as root and chown for real)', () => {
  it('refuses a 0600 file owned by another non-root user, naming the file, the owner and the fix', () => {
    const path = secretOwnedBy(OTHER_UID);
    const e = refusal(path);
    expect(e.path).toBe(path);
    expect(e.message).toBe(
      `secret key file ${path} is owned by uid ${OTHER_UID}, which is neither this user (uid 0) nor root; refusing to use it`,
    );
    expect(e.fix).toBe(`run \`sudo chown root: ${path}\``);
    expect(e.message).not.toContain(SECRET);
  });

  it('accepts a 0600 file owned by root', () => {
    expect(readSecretFile(secretOwnedBy(0)).reveal()).toBe(SECRET);
  });
});

describe('readSecretFile as a non-root agent user (setpriv)', () => {
  let child: Bundle;
  beforeAll(async () => {
    child = await bundleChild(
      "import { readSecretFile } from './src/agent/config/secret.ts';\n" +
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the child's own template literal, in its source text.
        'try { process.stdout.write(`ok ${readSecretFile(process.argv[2]!).reveal()}`); } catch (e) { const { message, fix } = e as { message: string; fix?: string }; process.stdout.write(`refused ${message} | fix: ${fix}`); }\n',
      'secret-child.ts',
      'secret-owner-',
      { forOtherUsers: true },
    );
  });
  afterAll(() => child?.dispose());

  /** Reads `path` as uid/gid 4243 with no groups; `readAnything` grants CAP_DAC_READ_SEARCH, so only the owner rule can refuse. */
  function readAs(path: string, readAnything: boolean): string {
    const caps = readAnything ? ['--inh-caps', '+dac_read_search', '--ambient-caps', '+dac_read_search'] : [];
    const args = [
      '--reuid',
      String(AGENT_UID),
      '--regid',
      String(AGENT_UID),
      '--clear-groups',
      ...caps,
      nodeForOtherUsers(),
      child.file,
      path,
    ];
    const r = spawnSync(requireTool('setpriv'), args, { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    return r.stdout;
  }

  it('accepts a file the agent user owns', () => {
    expect(readAs(secretOwnedBy(AGENT_UID), false)).toBe(`ok ${SECRET}`);
  });

  it('accepts a root-owned file it is allowed to read', () => {
    expect(readAs(secretOwnedBy(0), true)).toBe(`ok ${SECRET}`);
  });

  it('refuses a file owned by another non-root user even when it can read it', () => {
    const path = secretOwnedBy(OTHER_UID);
    expect(readAs(path, true)).toBe(
      `refused secret key file ${path} is owned by uid ${OTHER_UID}, which is neither this user (uid ${AGENT_UID}) nor root; ` +
        `refusing to use it | fix: run \`sudo chown ${AGENT_UID} ${path}\``,
    );
  });
});

describe("readSecretFile: the unit's stand-in for a missing /etc/botlink/secret-key", () => {
  it('is refused by name, pointing at the file to store or at broker mode', () => {
    const dir = tempDir('botlink-secret-standin-');
    const path = join(dir, 'secret-key');
    writeFileSync(path, NO_SECRET_STAND_IN, { mode: 0o400 });
    const err = refusal(path);
    expect(err.message).toContain('no secret key file');
    expect(err.fix).toContain('/etc/botlink/secret-key');
    expect(err.fix).toContain('provision --broker');
  });
});
