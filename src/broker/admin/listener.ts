/**
 * The admin listener (DESIGN §3.8): apart from the devices' port, on adminListen — plain http only on loopback, else
 * the broker's TLS certificate — with its own connection cap and the device port's deadlines (connections.ts).
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Clock } from '../../clock.js';
import { UnsignedRefusals } from '../auth/unsigned.js';
import type { AdminListenerConfig } from '../config-address.js';
import { ConnectionGuard } from '../connections.js';
import { answerClientError, answerTimedOut } from '../server.js';
import type { AdminContext } from './context.js';
import { ADMIN_FAILURES_PER_MINUTE, createAdminHandler } from './router.js';

/** Open connections to the admin listener, per replica: operators, not a fleet. */
export const ADMIN_CONNECTIONS_MAX = 64;

export interface AdminListenerDeps {
  config: AdminListenerConfig;
  ctx: AdminContext;
  tls: { cert: Buffer; key: Buffer } | undefined;
  trustedProxies: ReadonlySet<string>;
  clock: Clock;
  deadlines: { idleMs: number; headMs: number; bodyMs: number };
}

export interface RunningAdminListener {
  /** adminOrigin: the console's one origin, the URL `--admin` takes. */
  url: string;
  close(): Promise<void>;
}

export async function startAdminListener(deps: AdminListenerDeps): Promise<RunningAdminListener> {
  const { config, clock, tls } = deps;
  const guard = new ConnectionGuard(
    { max: ADMIN_CONNECTIONS_MAX, perSource: ADMIN_CONNECTIONS_MAX, ...deps.deadlines },
    clock,
    deps.trustedProxies,
    (socket, res) => answerTimedOut(socket, res, clock.wallNow()),
  );
  let origin = config.origin ?? '';
  const handler = createAdminHandler({
    ctx: deps.ctx,
    origin: () => origin,
    trustedProxies: deps.trustedProxies,
    guard,
    failures: new UnsignedRefusals(ADMIN_FAILURES_PER_MINUTE),
  });
  const server: Server = tls ? createHttpsServer({ ...tls, handshakeTimeout: deps.deadlines.headMs }, handler) : createHttpServer(handler);
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  server.keepAliveTimeout = 0;
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => guard.accept(socket));
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket, clock.wallNow()));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.listen.port, config.listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host;
  if (config.origin === null) origin = `${tls ? 'https' : 'http'}://${host}:${port}`;
  return {
    url: origin,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
