import { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { PendingRelay } from '../../../src/agent/local/pending-relay.js';
import { STOPPING_REFUSAL } from '../../../src/agent/local/refuse-upgrade.js';

/** An in-memory socket: what the relay writes to it, once it has ended it. */
function socket(): { duplex: Duplex; answer: Promise<string> } {
  const chunks: Buffer[] = [];
  let done: (text: string) => void = () => {};
  const answer = new Promise<string>((resolve) => (done = resolve));
  const duplex = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk);
      cb();
    },
    final(cb) {
      done(Buffer.concat(chunks).toString());
      cb();
    },
  });
  return { duplex, answer };
}

async function refusal(relay: PendingRelay, path: 'handleUpgrade' | 'handleObserve'): Promise<{ head: string; body: unknown }> {
  const s = socket();
  relay[path]({} as Parameters<PendingRelay[typeof path]>[0], s.duplex, Buffer.alloc(0));
  const [head = '', body = ''] = (await s.answer).split('\r\n\r\n');
  return { head, body: JSON.parse(body) };
}

describe('PendingRelay: the relay before the link exists', () => {
  it.each(['handleUpgrade', 'handleObserve'] as const)(
    '%s: 503 saying the device is provisioned, then that botlink stops',
    async (path) => {
      const relay = new PendingRelay();
      const early = await refusal(relay, path);
      expect(early.head).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
      expect(early.body).toEqual({ code: 503, msg: 'no botId yet: botlink is provisioning this device' });
      await relay.stop();
      expect((await refusal(relay, path)).body).toEqual({ code: 503, msg: STOPPING_REFUSAL });
    },
  );
});
