/**
 * Test-only overrides for a run's egress proxy: DNS servers to ask instead of the host's resolver,
 * and exact addresses exempt from the forbidden-address table (tests run their upstreams on
 * loopback, which real traffic may never reach). Nothing in config.ts leads here and main.ts never
 * passes hooks: only a test that calls `egressTestHooks()` and hands the result to a
 * DockerSandboxProvider gets them.
 */
const BRAND: unique symbol = Symbol('corral.egressTestHooks');

export interface EgressTestHooks {
  readonly [BRAND]: true;
  /** "host:port" DNS servers the proxy asks (A and AAAA) instead of getaddrinfo. */
  readonly dnsServers: readonly string[];
  /** Exact addresses (e.g. "127.0.0.1") the proxy may connect to despite the forbidden table. */
  readonly exempt: readonly string[];
}

export function egressTestHooks(o: { dnsServers: string[]; exempt: string[] }): EgressTestHooks {
  return Object.freeze({ [BRAND]: true as const, dnsServers: [...o.dnsServers], exempt: [...o.exempt] });
}

export function isEgressTestHooks(v: unknown): v is EgressTestHooks {
  return typeof v === 'object' && v !== null && (v as Record<symbol, unknown>)[BRAND] === true;
}
