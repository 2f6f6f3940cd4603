/**
 * What `botlink provision --broker` needs to recover a device (DESIGN §3.7): a key the broker revoked or
 * rejected is set aside for a new one, and a signing device that registered itself finds its botId in
 * the agent's store for an --adopt code.
 */
import { existsSync, linkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { DB_FILE, type ProvisionKey, TokenStore } from '../store/token-store.js';

/**
 * Moves the key at `path` aside as `<path>.revoked-<keyId>` (kept, never overwritten), so a new key can
 * be made in its place; returns where it went.
 */
export function retireDeviceKey(path: string, keyId: string): string {
  const aside = `${path}.revoked-${keyId}`;
  // A link, then the unlink: the old key is never lost halfway, and a file already at `aside` is not replaced.
  linkSync(path, aside);
  unlinkSync(path);
  return aside;
}

/** The botId this device registered itself with (vendorId, §1.5), as the agent's store keeps it; undefined when none. */
export function storedBotId(stateDir: string, key: ProvisionKey): string | undefined {
  if (!existsSync(join(stateDir, DB_FILE))) return undefined;
  const store = TokenStore.open(stateDir, { readOnly: true });
  try {
    return store.getProvisionedBotId(key);
  } finally {
    store.close();
  }
}
