import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openBrowser } from '../helpers/browser.js';

// The console's tests are only as strict as their watcher: a page that breaks its own policy, throws, and asks another
// origin must fail expectClean, each named.
let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/open') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>open</title><img src="http://127.0.0.2:9/y.png">');
      return;
    }
    if (req.url === '/late.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' });
      res.end("throw new Error('thrown by the page');");
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html', 'content-security-policy': "default-src 'self'" });
    // An inline script (refused by the policy), an image of another origin (refused too), a script that throws.
    res.end(
      '<!doctype html><title>bad</title><script>window.ran = 1</script><img src="http://127.0.0.2:9/x.png"><script src="/late.js"></script>',
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(
  () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
);

it('fails a page on a CSP violation and an uncaught error, naming each', async () => {
  const s = await openBrowser(origin);
  try {
    await s.page.goto(`${origin}/`);
    await expect.poll(() => s.problems.some((p) => p.startsWith('uncaught: thrown by the page'))).toBe(true);
    await expect.poll(() => s.problems.filter((p) => p.includes('CSP violation: script-src-elem inline')).length).toBe(1);
    expect(s.problems.some((p) => p.includes('CSP violation: img-src http://127.0.0.2:9/x.png'))).toBe(true);
    expect(() => s.expectClean()).toThrow();
    expect(await s.page.evaluate('window.ran')).toBeUndefined();
  } finally {
    await s.close();
  }
});

it('fails a page that asks another origin', async () => {
  const s = await openBrowser(origin);
  try {
    await s.page.goto(`${origin}/open`);
    await expect.poll(() => s.requests.map((r) => r.url)).toContain('http://127.0.0.2:9/y.png');
    expect(() => s.expectClean()).toThrow(/requests to an origin other than/);
  } finally {
    await s.close();
  }
});
