import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOCAL_LIMITS } from '../../src/agent/local/server.js';
import { DAEMON_SEED, useHarness } from '../helpers/harness.js';
import { waitFor } from '../helpers/wait-for.js';

const { service, device, daemon } = useHarness();

describe("the local API's header timeout, looked for only every checkIntervalMs (an idle daemon wakes for each look)", () => {
  it(
    'still answers 408 to a client that stalls in its headers, and closes it',
    async () => {
      const svc = await service(DAEMON_SEED);
      const d = device(svc);
      daemon(d);
      await d.waitForLink('connected');
      await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');

      const s = connect(join(d.runtimeDir, 'botlink.sock'));
      let got = '';
      s.on('data', (b: Buffer) => (got += b.toString('latin1')));
      const closed = new Promise<void>((resolve) => s.on('close', () => resolve()));
      s.write('GET /v1/status HTTP/1.1\r\nHost: localhost\r\n');
      await closed;
      expect(got).toMatch(/^HTTP\/1\.1 408 /);
    },
    3 * (LOCAL_LIMITS.headersTimeoutMs + LOCAL_LIMITS.checkIntervalMs),
  );
});
