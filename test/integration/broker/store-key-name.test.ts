import { describe, expect, it } from 'vitest';
import type { BrokerStore, PendingAsk, PendingRow } from '../../../src/broker/store/types.js';
import { byCode, codeRow, newKey } from '../../helpers/broker-store.js';
import { useHarness } from '../../helpers/harness.js';
import { storeBackends } from '../../helpers/store-backends.js';

// An enrolled key keeps its device's name (DESIGN §3.7: the enroll body's `name`, else the deviceId; §3.8's device
// item shows it), written with the key: at an enrollment by code or pre-authorisation, at an accept (the pending
// row's), at a rotation (the rotated key's). Keys enrolled before migration 10 have none.

const { sqlite, postgres, open } = storeBackends(useHarness(), 'botlink-broker-key-name-');

/** The name on the devices page's line and on the key's own item: they must agree. */
async function nameOf(store: BrokerStore, keyId: string): Promise<string | null | undefined> {
  const item = await store.admin.deviceItemOfKey(keyId);
  const line = (await store.admin.pageDevices({}, null, 100)).find((r) => r.keyId === keyId);
  expect(line?.name).toBe(item?.name);
  return item?.name;
}

function ask(deviceId: string, name: string): PendingAsk {
  const key = newKey();
  const now = Date.now();
  const row: PendingRow = {
    ...key,
    vendorId: 'V1',
    deviceId,
    appId: '',
    type: 'PHYSICAL_ROBOT',
    name,
    source: '192.0.2.1',
    firstAsked: now,
    lastAsked: now,
  };
  const window = { bucket: `ask:${key.keyId}/60000`, start: Math.floor(now / 60_000) * 60_000 };
  return { row, sourceBucket: '192.0.2.1', perSource: 100, perVendor: 100, window };
}

describe.each([sqlite, postgres])("an enrolled key's name on $kind", (backend) => {
  it("is the enrollment's name, else the deviceId; an accepted key keeps the pending name; a rotated key the device's", async () => {
    const store = await open(await backend.fresh());
    const code = codeRow({ usesLeft: 5 });
    await store.addCode(code);
    const named = byCode(code, { deviceId: 'SN-1', name: 'Hall <b>robot</b> "1"' });
    const bare = byCode(code, { deviceId: 'SN-2' });
    for (const c of [named, bare]) expect((await store.enroll(c)).outcome).toBe('ok');
    expect(await nameOf(store, named.key.keyId)).toBe('Hall <b>robot</b> "1"');
    expect(await nameOf(store, bare.key.keyId)).toBe('SN-2');

    const pre = { ...newKey(), vendorId: 'V1', deviceId: 'SN-3', createdAt: Date.now() };
    await store.addPreauth([pre]);
    const byPreauth = {
      ...byCode(code, { deviceId: 'SN-3', name: 'dock' }),
      admission: { by: 'preauth', keyId: pre.keyId } as const,
      key: pre,
    };
    expect((await store.enroll(byPreauth)).outcome).toBe('ok');
    expect(await nameOf(store, pre.keyId)).toBe('dock');

    const waiting = ask('SN-4', 'lab arm');
    expect(await store.askPending(waiting)).toBe('created');
    expect(await nameOf(store, waiting.row.keyId)).toBe('lab arm');
    expect((await store.acceptPending({ keyId: waiting.row.keyId, deviceId: 'SN-4', botId: 'bot-SN-4', now: Date.now() })).outcome).toBe(
      'ok',
    );
    expect((await store.admin.deviceItemOfKey(waiting.row.keyId))?.state).toBe('active');
    expect(await nameOf(store, waiting.row.keyId)).toBe('lab arm');

    for (const [old, name] of [
      [named.key.keyId, 'Hall <b>robot</b> "1"'],
      [waiting.row.keyId, 'lab arm'],
    ] as const) {
      const next = newKey();
      expect(await store.rotate(old, next, Date.now())).toBe('ok');
      expect(await nameOf(store, next.keyId)).toBe(name);
      // The rotated key's own row keeps the name too (the botId's keys list it as retired).
      expect((await store.admin.deviceItemOfKey(old))?.name).toBe(name);
    }
  });

  it('migration 10 adds the column to a store at version 9: its keys have no name, keys enrolled after it do', async () => {
    const spec = await backend.fresh();
    await backend.atVersion(
      spec,
      9,
      "INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, created_at) VALUES ('k-old', 'pk', 'bot-old', 'SN-9', 'V1', 'active', 5)",
    );
    const store = await open(spec);
    expect(await nameOf(store, 'k-old')).toBeNull();
    // A key rotated from one without a name has none either: nothing is made up for it.
    const next = newKey();
    expect(await store.rotate('k-old', next, Date.now())).toBe('ok');
    expect(await nameOf(store, next.keyId)).toBeNull();
    const code = codeRow();
    await store.addCode(code);
    const c = byCode(code, { deviceId: 'SN-10', name: 'new' });
    expect((await store.enroll(c)).outcome).toBe('ok');
    expect(await nameOf(store, c.key.keyId)).toBe('new');
  });
});
