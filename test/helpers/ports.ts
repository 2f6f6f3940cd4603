import { type AddressInfo, createServer } from 'node:net';

/** A port on 127.0.0.1 that nothing listens on now: bound, then released (a server the test starts may take it). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
