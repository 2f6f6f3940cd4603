/**
 * The broker's addresses (DESIGN §3.7, §3.8): `listen`, `baseUrl` and the admin listener's `adminListen` and
 * `adminOrigin`, each judged as config.ts reads the file; plain http only on loopback.
 */
import { isLoopbackHost } from '../loopback.js';
import { BrokerConfigError } from './config-error.js';

export interface AdminListenerConfig {
  listen: { host: string; port: number };
  /** The console's one origin (`scheme://host[:port]`); null: the scheme and the address bound (port 0 resolved). */
  origin: string | null;
}

/** adminListen (http only on loopback, else the broker's TLS certificate) and adminOrigin (an origin: no path, no query). */
export function parseAdmin(raw: Readonly<Record<string, unknown>>, tls: boolean): AdminListenerConfig | null {
  const listenValue = raw['adminListen'];
  const originValue = raw['adminOrigin'];
  if (listenValue === undefined) {
    if (originValue !== undefined) throw new BrokerConfigError('adminOrigin', 'adminOrigin needs adminListen');
    return null;
  }
  if (typeof listenValue !== 'string') throw new BrokerConfigError('adminListen', 'adminListen must be host:port');
  const listen = parseListen(listenValue, 'adminListen');
  if (!tls && !isLoopbackHost(listen.host)) {
    throw new BrokerConfigError('adminListen', `plain http is only for loopback, and adminListen is ${listen.host}`, {
      fix: "set tlsCertFile and tlsKeyFile (the admin listener uses the broker's certificate), or listen on 127.0.0.1 behind a TLS proxy",
    });
  }
  if (originValue === undefined) return { listen, origin: null };
  let origin: URL | undefined;
  try {
    origin = typeof originValue === 'string' ? new URL(originValue) : undefined;
  } catch {
    origin = undefined;
  }
  if (
    !origin ||
    (origin.protocol !== 'http:' && origin.protocol !== 'https:') ||
    origin.origin !== String(originValue).replace(/\/$/, '')
  ) {
    throw new BrokerConfigError('adminOrigin', 'adminOrigin must be an origin: http(s)://host[:port], no path', {
      fix: 'set it to the URL operators open the console at, as their browser shows it, e.g. https://broker.example.com:8443',
    });
  }
  return { listen, origin: origin.origin };
}

export function parseListen(value: string, key = 'listen'): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+):(\d{1,5})$/.exec(value);
  const port = Number(m?.[2]);
  if (!m || port > 65535) throw new BrokerConfigError(key, `${key} must be host:port (port 0 picks one), got "${value}"`);
  return { host: (m[1] ?? '').replace(/^\[|\]$/g, ''), port };
}

export function parseHttpUrl(key: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new BrokerConfigError(key, `${key} is not a URL: "${value}"`);
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    throw new BrokerConfigError(key, `${key} must be https (http only on loopback), got ${url.protocol}`);
  }
  return value;
}
