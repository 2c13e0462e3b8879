/**
 * The operator's site rules as a run's egress proxy applies them (egress-proxy.ts): which addresses a
 * name may connect to (the forbidden table, minus the operator's internal hosts, each only into its
 * own ranges), whether a connection goes direct or through the upstream proxy (NO_PROXY), and the
 * refusal texts an agent and a user can act on. The exceptions come from config only (egress-site.ts
 * in domain/); nothing a run sends can add one.
 */
import { internalMatcher, noProxyMatcher, type EgressSite, type UpstreamProxy } from '../domain/egress-site';
import type { ForbiddenRange } from './egress-address';

export type Route = 'direct' | 'upstream';

export class SiteRules {
  readonly upstream: UpstreamProxy | null;
  private readonly internal: ReturnType<typeof internalMatcher>;
  private readonly direct: ReturnType<typeof noProxyMatcher>;
  private readonly ranges: Map<string, string[]>;

  constructor(site: EgressSite, private readonly forbidden: (address: string) => ForbiddenRange | null) {
    this.upstream = site.upstream;
    this.internal = internalMatcher(site.internal);
    this.direct = noProxyMatcher(site.noProxy);
    this.ranges = new Map(site.internal.map((h) => [h.name, h.ranges]));
  }

  /** Whether the operator named `host` as an internal host (its name may sit under a private-use domain). */
  isInternal(host: string): boolean {
    return this.internal.names.has(host);
  }

  /** Why `host` may not connect to `address` (a sentence for the agent and the log), or null when it may. */
  addressProblem(host: string, address: string): string | null {
    const r = this.forbidden(address);
    if (!r || this.internal.rangeFor(host, address) !== null) return null;
    // "a private-use address (10.0.0.0/8)"; a range already named as an address reads as it is ("this host's own address (eth0)")
    const kind = /address/.test(r.name) ? `${r.name} (${r.cidr})` : `${/^[aeiou]/i.test(r.name) ? 'an' : 'a'} ${r.name} address (${r.cidr})`;
    const allowed = this.ranges.get(host);
    if (allowed) return `the proxy refused ${host}: it resolves to ${address}, ${kind}, outside the ranges the operator allows for it (CORRAL_EGRESS_INTERNAL_HOSTS: ${allowed.join(', ')})`;
    return `the proxy refused ${host}: it resolves to ${address}, ${kind}; an operator can allow it with CORRAL_EGRESS_INTERNAL_HOSTS=${host}=${address} (a run's allowlist cannot)`;
  }

  /** How a checked connection leaves: through the upstream proxy unless there is none or NO_PROXY names it. */
  route(host: string, port: number, addresses: readonly string[]): Route {
    return this.upstream && !this.direct(host, port, addresses) ? 'upstream' : 'direct';
  }

  /** The upstream proxy as shown in a refusal (host:port; never its credentials). */
  upstreamShown(): string {
    const u = this.upstream;
    return u ? `${u.host.includes(':') ? `[${u.host}]` : u.host}:${u.port}` : '';
  }
}
