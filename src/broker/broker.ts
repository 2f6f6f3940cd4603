/**
 * `botlink broker` put together (DESIGN §3.7): store, keys, the cloud client that alone holds the
 * account secret, the gate, the token issuer and the HTTP(S) front. start() → listening; close() → all ends.
 */
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { CloudClient } from '../cloud/client.js';
import type { Clock } from '../clock.js';
import { voiceChatUrl } from '../protocol/conversation.js';
import { messageOf } from '../protocol/errors.js';
import { Cursors } from './admin/cursor.js';
import { type RunningAdminListener, startAdminListener } from './admin/listener.js';
import { pendingBook } from './admin/pending-wiring.js';
import { AuditTrail } from './audit/trail.js';
import { CloudGate } from './cloud-gate.js';
import { cloudRegistrar, type Register } from './registrar.js';
import { displace } from './displace.js';
import { DueDisplacements } from './displacements.js';
import type { BrokerConfig } from './config.js';
import { BrokerConfigError } from './config-error.js';
import type { BrokerContext } from './context.js';
import { brokerKeys, readAccountSecret, readStorePassword, readTokenKey, refuseKeyBesideStore } from './keys.js';
import { UnsignedRefusals } from './auth/unsigned.js';
import { DeviceCensus } from './device-census.js';
import { startHousekeeping } from './housekeeping.js';
import { dropStalePending } from './pending-operator.js';
import { KeyCache } from './key-cache.js';
import { BrokerMetrics } from './metrics.js';
import { ConnectionGuard } from './connections.js';
import { StoreHealth } from './store-health.js';
import { answerClientError, answerTimedOut, createListener } from './server.js';
import { openStore } from './store/open.js';
import type { BrokerStore } from './store/types.js';
import { TokenIssuer } from './tokens.js';
import { VendorTokens } from './vendor-tokens.js';

/** Waiting cloud calls per replica past the in-flight cap; beyond it a request is told 503 at once. */
const MAX_QUEUED_CLOUD_CALLS = 100_000;
/** Each connection's deadlines (connections.ts): idle between requests, a request's head, its body. */
const IDLE_MS = 5_000;
const HEAD_MS = 10_000;
const BODY_MS = 10_000;

export interface BrokerDeps {
  config: BrokerConfig;
  clock: Clock;
  log: Logger;
}

export interface RunningBroker {
  url: string;
  /** The admin listener's origin (adminOrigin), when adminListen is set. */
  adminUrl: string | undefined;
  store: BrokerStore;
  /** Its audit, which operators acting in the same process (the demo) record into too. */
  audit: AuditTrail;
  /** How it registers a device with the cloud, for an operator's accept in the same process (the demo). */
  register: Register;
  close(): Promise<void>;
}

export async function startBroker({ config, clock, log }: BrokerDeps): Promise<RunningBroker> {
  refuseKeyBesideStore(config.tokenKeyFile, config.store);
  const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
  const secret = readAccountSecret(config.secretKeyFile);
  const tls = config.tls === null ? undefined : readTls(config.tls);
  const password = readStorePassword(config.storePasswordFile);
  const store = await openStore(config.store, { clock, ...(password !== undefined && { password }) });
  // A broker parses the cloud's answers all day: V8's optimizing tier pays for itself there (src/cloud/http.ts).
  const cloud = new CloudClient({
    baseUrl: config.baseUrl,
    accessKeyId: config.accessKeyId,
    secretKey: { reveal: () => secret },
    clock,
    parserTier: 'optimizing',
    // As many connections as cloud calls may be in flight: a smaller pool would be the real cap.
    connections: config.limits.cloudConcurrency,
  });
  const gate = new CloudGate(config.limits.cloudConcurrency, MAX_QUEUED_CLOUD_CALLS);
  const ctx: BrokerContext = {
    store,
    keys,
    keyCache: new KeyCache(),
    unsigned: new UnsignedRefusals(config.limits.unsignedPerMinute),
    cloud,
    gate,
    issuer: new TokenIssuer({ store, keys, cloud, gate, clock }),
    vendors: new VendorTokens(cloud, gate, clock),
    clock,
    limits: config.limits,
    pending: config.pendingEnrollment,
    metrics: new BrokerMetrics(),
    census: new DeviceCensus(store, clock),
    audit: new AuditTrail({ store, log, clock }),
  };
  const trustedProxies = new Set(config.trustedProxies);
  const { connectionsMax: max, connectionsPerSource: perSource } = config.limits;
  const guard = new ConnectionGuard(
    { max, perSource, idleMs: IDLE_MS, headMs: HEAD_MS, bodyMs: BODY_MS },
    clock,
    trustedProxies,
    (socket, res) => answerTimedOut(socket, res, clock.wallNow()),
  );
  const health = new StoreHealth(store, clock);
  const listener = createListener({ ctx, log, trustedProxies, guard, health });
  // TLS has the head's time for its handshake; then the guard keeps the TLS connection as any other.
  const server: Server = tls ? createHttpsServer({ ...tls, handshakeTimeout: HEAD_MS }, listener) : createHttpServer(listener);
  // Node's own deadlines are checked on a 30 s sweep: the guard keeps each connection's instead.
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  server.keepAliveTimeout = 0;
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => guard.accept(socket));
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket, clock.wallNow()));
  const wsUrl = voiceChatUrl(config.baseUrl);
  let admin: RunningAdminListener | undefined;
  try {
    await listen(server, config.listen.host, config.listen.port);
    if (config.admin !== null) {
      const adminCtx = {
        store,
        keys,
        clock,
        audit: ctx.audit,
        vendors: ctx.vendors,
        displacer: { cloud, gate, wsUrl, clock },
        cursors: new Cursors(keys),
        log,
        pending: pendingBook(store, cloudRegistrar({ cloud, gate, vendors: ctx.vendors }), clock),
      };
      const deadlines = { idleMs: IDLE_MS, headMs: HEAD_MS, bodyMs: BODY_MS };
      admin = await startAdminListener({ config: config.admin, ctx: adminCtx, tls, trustedProxies, clock, deadlines });
    }
  } catch (err) {
    server.close();
    await Promise.all([store.close(), cloud.close()]);
    throw err;
  }
  const displacements = new DueDisplacements({
    store,
    displace: (botId, signal) => displace({ cloud, gate, wsUrl, clock }, botId, signal),
    audit: ctx.audit,
    log,
  });
  const pending = { drop: () => dropStalePending(store, ctx.audit, clock.wallNow()) };
  const stopHousekeeping = startHousekeeping({ store, clock, log, auditRetentionDays: config.auditRetentionDays, displacements, pending });
  health.start();
  const { port } = server.address() as AddressInfo;
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host;
  return {
    url: `${tls ? 'https' : 'http'}://${host}:${port}`,
    adminUrl: admin?.url,
    store,
    audit: ctx.audit,
    register: cloudRegistrar({ cloud, gate, vendors: ctx.vendors }),
    async close() {
      stopHousekeeping();
      health.stop();
      await displacements.stop();
      await Promise.all([
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
        admin?.close(),
      ]);
      // What the requests audited reaches the store before it closes.
      await ctx.audit.close();
      await Promise.all([cloud.close(), store.close()]);
    },
  };
}

function readTls(files: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  const read = (file: string, key: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new BrokerConfigError(key, `cannot read ${file} (${messageOf(err)})`);
    }
  };
  return { cert: read(files.certFile, 'tlsCertFile'), key: read(files.keyFile, 'tlsKeyFile') };
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
