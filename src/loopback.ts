/**
 * Whether a host is this machine's loopback — 127.0.0.0/8, ::1 or `localhost` — the one place where plain http
 * is allowed (the agent's baseUrl and brokerUrl, the broker's listeners, `serve`, an operator's `--admin`).
 * Takes a URL's hostname (`[::1]`) or a bare address (`::1`).
 */
import { BlockList, isIP } from 'node:net';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(bare);
  if (family === 0) return bare.toLowerCase() === 'localhost';
  return LOOPBACK.check(bare, family === 4 ? 'ipv4' : 'ipv6');
}
