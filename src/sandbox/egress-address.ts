/**
 * Address rules for egress. One table of forbidden ranges — every block of IANA's IPv4 and IPv6
 * special-purpose address registries, multicast, everything outside IPv6 global unicast (2000::/3),
 * IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
 * 6to4 (2002::/16) and Teredo (2001::/32) — plus the host's own interface addresses. A sandbox may
 * never connect to an address in it; `forbiddenRange` names the block that refused it.
 * IP literals in names are recognised by domain/egress-rules.ts (re-exported here).
 */
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

export interface ForbiddenRange {
  cidr: string;
  name: string;
}

/** The table. Order matters only for the name given in a refusal: the first match is named. */
export const FORBIDDEN_RANGES: readonly ForbiddenRange[] = [
  // IPv4 special-purpose address registry (IANA), every entry.
  { cidr: '0.0.0.0/8', name: '"this network"' },
  { cidr: '10.0.0.0/8', name: 'private-use' },
  { cidr: '100.64.0.0/10', name: 'shared address space (CGNAT)' },
  { cidr: '127.0.0.0/8', name: 'loopback' },
  { cidr: '169.254.0.0/16', name: 'link-local (cloud metadata)' },
  { cidr: '172.16.0.0/12', name: 'private-use' },
  { cidr: '192.0.0.0/24', name: 'IETF protocol assignments' },
  { cidr: '192.0.2.0/24', name: 'documentation (TEST-NET-1)' },
  { cidr: '192.31.196.0/24', name: 'AS112-v4' },
  { cidr: '192.52.193.0/24', name: 'AMT' },
  { cidr: '192.88.99.0/24', name: 'deprecated 6to4 relay anycast' },
  { cidr: '192.168.0.0/16', name: 'private-use' },
  { cidr: '192.175.48.0/24', name: 'direct delegation AS112 service' },
  { cidr: '198.18.0.0/15', name: 'benchmarking' },
  { cidr: '198.51.100.0/24', name: 'documentation (TEST-NET-2)' },
  { cidr: '203.0.113.0/24', name: 'documentation (TEST-NET-3)' },
  { cidr: '224.0.0.0/4', name: 'multicast' },
  { cidr: '240.0.0.0/4', name: 'reserved' },
  { cidr: '255.255.255.255/32', name: 'limited broadcast' },
  // IPv6 special-purpose address registry (IANA), every entry, before the broad blocks that hold them.
  { cidr: '::1/128', name: 'loopback' },
  { cidr: '::/128', name: 'unspecified' },
  { cidr: '::ffff:0:0/96', name: 'IPv4-mapped' },
  { cidr: '::ffff:0:0:0/96', name: 'IPv4-translated' },
  { cidr: '::/96', name: 'IPv4-compatible (deprecated)' },
  { cidr: '64:ff9b::/96', name: 'NAT64 (IPv4-IPv6 translation)' },
  { cidr: '64:ff9b:1::/48', name: 'NAT64 (local-use IPv4/IPv6 translation)' },
  { cidr: '100::/64', name: 'discard-only' },
  { cidr: '100:0:0:1::/64', name: 'dummy IPv6 prefix' },
  { cidr: '2001::/32', name: 'Teredo' },
  { cidr: '2001::/23', name: 'IETF protocol assignments' },
  { cidr: '2001:db8::/32', name: 'documentation' },
  { cidr: '2002::/16', name: '6to4' },
  { cidr: '2620:4f:8000::/48', name: 'direct delegation AS112 service' },
  { cidr: '3fff::/20', name: 'documentation' },
  { cidr: '5f00::/16', name: 'segment routing (SRv6) SIDs' },
  { cidr: 'fc00::/7', name: 'unique-local' },
  { cidr: 'fe80::/10', name: 'link-local' },
  { cidr: 'fec0::/10', name: 'site-local (deprecated)' },
  { cidr: 'ff00::/8', name: 'multicast' },
  // Everything that is not IPv6 global unicast (2000::/3) is reserved, local or multicast.
  { cidr: '::/3', name: 'outside IPv6 global unicast (reserved)' },
  { cidr: '4000::/2', name: 'outside IPv6 global unicast (reserved)' },
  { cidr: '8000::/1', name: 'outside IPv6 global unicast (reserved, local or multicast)' },
];

interface CompiledRange extends ForbiddenRange {
  family: 'ipv4' | 'ipv6';
  list: BlockList;
}

function compile(r: ForbiddenRange): CompiledRange {
  const [net, bits] = r.cidr.split('/') as [string, string];
  const family = isIP(net) === 6 ? 'ipv6' : 'ipv4';
  const list = new BlockList();
  list.addSubnet(net, Number(bits), family);
  return { ...r, family, list };
}

const TABLE: readonly CompiledRange[] = FORBIDDEN_RANGES.map(compile);

/** Addresses of this host's own interfaces (every family), each as a /32 or /128 range. */
export function hostAddressRanges(): ForbiddenRange[] {
  const out: ForbiddenRange[] = [];
  for (const [name, list] of Object.entries(networkInterfaces())) {
    for (const i of list ?? []) {
      const address = i.address.replace(/%.*$/, '');
      out.push({ cidr: `${address}/${i.family === 'IPv6' ? 128 : 32}`, name: `this host's own address (${name})` });
    }
  }
  return out;
}

/**
 * Compiles the table plus `extra` ranges (the host's addresses) into one predicate. `exempt` lists
 * exact addresses that pass anyway: only tests construct it (see egress-test-hooks.ts), never config.
 */
export function forbiddenRangeChecker(extra: readonly ForbiddenRange[] = [], exempt: readonly string[] = []): (address: string) => ForbiddenRange | null {
  const table = [...TABLE, ...extra.map(compile)];
  const exemptSet = new Set(exempt.map((a) => a.toLowerCase()));
  return (address) => {
    const a = address.toLowerCase();
    if (exemptSet.has(a)) return null;
    const family = isIP(a);
    // A zone id (fe80::1%eth0) or anything that is not an address at all is refused outright.
    if (family === 0) return { cidr: a, name: 'not a plain IP address' };
    const fam = family === 4 ? 'ipv4' : 'ipv6';
    // A v6 rule never names a v4 address (BlockList would match v4 against ::ffff:0:0/96): families stay apart.
    for (const r of table) if (r.family === fam && r.list.check(a, fam)) return r;
    return null;
  };
}

/** The table alone (no host addresses, no exemption). */
export const forbiddenRange = forbiddenRangeChecker();

/** true for every address a sandbox must never reach (the table alone). */
export function isForbiddenAddress(address: string): boolean {
  return forbiddenRange(address) !== null;
}

export { ipLiteral } from '../domain/egress-rules';
