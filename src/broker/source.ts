/**
 * The source of a request (DESIGN §3.7), which limits and the audit count by: the connection's peer; when
 * the peer is a trusted proxy, the rightmost `X-Forwarded-For` address that is not itself one. A header
 * that is not a list of addresses counts as none (the peer), so a proxy's mangled header cannot pick a
 * source. An IPv4-mapped IPv6 address is its IPv4 address.
 */
import { isIP } from 'node:net';

/** `::ffff:a.b.c.d` as `a.b.c.d`; any other address as it is. */
export function plainAddress(address: string): string {
  return address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
}

export function requestSource(peer: string, forwardedFor: string | string[] | undefined, trusted: ReadonlySet<string>): string {
  const from = plainAddress(peer);
  if (!trusted.has(from) || forwardedFor === undefined) return from;
  const chain = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',').map((s) => plainAddress(s.trim()));
  if (chain.some((hop) => isIP(hop) === 0)) return from;
  for (let i = chain.length - 1; i >= 0; i--) {
    const hop = chain[i] as string;
    if (!trusted.has(hop)) return hop;
  }
  return from;
}
