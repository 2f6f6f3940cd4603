/** An operator's `--source CIDR` (DESIGN §3.1): an address block, or one address, as a test of a request's source. */
import { BlockList, isIP } from 'node:net';
import { plainAddress } from './source.js';

/** The test, or undefined when `text` is not `address[/prefix]` (IPv4 prefix ≤ 32, IPv6 ≤ 128). */
export function parseCidr(text: string): ((address: string) => boolean) | undefined {
  const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(text.trim());
  if (!m) return undefined;
  const address = plainAddress(m[1] ?? '');
  const family = isIP(address);
  if (family === 0) return undefined;
  const prefix = m[2] === undefined ? (family === 4 ? 32 : 128) : Number(m[2]);
  if (prefix > (family === 4 ? 32 : 128)) return undefined;
  const block = new BlockList();
  const type = family === 4 ? 'ipv4' : 'ipv6';
  block.addSubnet(address, prefix, type);
  return (source) => {
    const plain = plainAddress(source);
    const f = isIP(plain);
    return f !== 0 && block.check(plain, f === 4 ? 'ipv4' : 'ipv6');
  };
}
