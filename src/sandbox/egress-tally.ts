/**
 * Bounded bookkeeping for one run's egress proxy: token buckets for the rate caps, and the tally that
 * decides which attempts are reported one by one and which are only counted. Per kind of attempt
 * (decision, method, code; for allowed ones also host:port) the first few go out individually; the
 * rest are summed and flushed as one aggregate per kind ("denied 12,000 × CONNECT to invalid names")
 * each `flush()` — on a timer, when the tool call changes and at the end. Memory is bounded by the
 * number of kinds, which is bounded (codes × methods, plus at most MAX_ALLOW_KEYS host:ports).
 */
import type { EgressAttempt, EgressCode, EgressStats, EgressSummary } from '../domain/sandbox';
import { shown } from './egress-target';

/** A token bucket: `rate` tokens a second, holding at most `burst`. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(private readonly rate: number, private readonly burst: number, private readonly now: () => number) {
    this.tokens = burst;
    this.last = now();
  }

  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.rate);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** How many attempts of one kind are reported one by one before the rest are only counted. */
const INDIVIDUAL: Partial<Record<EgressCode, number>> & { default: number } = {
  default: 5, allowed: 20, cap_connections: 1, cap_rate: 1, cap_requests: 1, cap_bytes_out: 1, cap_bytes_in: 1,
  wildcard_rate: 3, wildcard_names: 1,
};
const MAX_ALLOW_KEYS = 200;

const CODE_WORDS: Record<EgressCode, string> = {
  allowed: 'allowed', invalid_target: 'to malformed targets', invalid_name: 'to invalid names', ip_literal: 'to IP address literals',
  not_allowed: 'to names not on the allowlist', port_not_allowed: 'to ports not allowed', forbidden_address: 'to names resolving to forbidden addresses',
  resolve_failed: 'to names that did not resolve', wildcard_rate: 'over the wildcard resolution rate', wildcard_names: 'over the wildcard distinct-name cap',
  host_mismatch: 'with a Host that differs from the URL', framing: 'with ambiguous or malformed HTTP framing', upgrade_refused: 'asking for a protocol upgrade',
  cap_connections: 'over the concurrent-connection cap', cap_rate: 'over the new-connection rate cap', cap_requests: 'over the request rate cap',
  cap_bytes_out: 'over the outgoing byte cap', cap_bytes_in: 'over the incoming byte cap', unreachable: 'to unreachable upstreams',
  unpredicted: 'from calls the gate predicted no network use for',
  upstream_refused: 'refused by the upstream proxy', upstream_unreachable: 'while the upstream proxy was unreachable',
};

interface Pending {
  callId: string | null;
  method: string;
  decision: 'allow' | 'deny';
  code: EgressCode;
  count: number;
  sample: string;
}

export type TallyOut = { kind: 'attempt'; attempt: EgressAttempt & { callId: string | null } } | Extract<EgressSummary, { kind: 'aggregate' }>;

export class EgressTally {
  readonly stats: EgressStats = {
    connections: 0, requests: 0, allowed: 0, denied: 0, bytesOut: 0, bytesIn: 0, peakConnections: 0,
    byCode: {}, wildcardNames: {}, wildcardRefused: 0, resolutions: 0,
  };
  private readonly seen = new Map<string, number>();
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly out: (m: TallyOut) => void) {}

  /** One attempt: reported now if it is among the first of its kind, else counted for the next flush. */
  record(callId: string | null, a: Omit<EgressAttempt, 'callId'> & { code: EgressCode }): void {
    this.stats.byCode[a.code] = (this.stats.byCode[a.code] ?? 0) + 1;
    if (a.decision === 'allow') this.stats.allowed += 1;
    else this.stats.denied += 1;
    const key = this.keyOf(a);
    const n = (this.seen.get(key) ?? 0) + 1;
    this.seen.set(key, n);
    const host = shown(a.host);
    if (n <= (INDIVIDUAL[a.code] ?? INDIVIDUAL.default)) {
      this.out({ kind: 'attempt', attempt: { ...a, host, reason: a.reason.slice(0, 600), callId } });
      return;
    }
    const pk = `${callId ?? ''}\u0000${key}`;
    const p = this.pending.get(pk);
    if (p) p.count += 1;
    else this.pending.set(pk, { callId, method: a.method, decision: a.decision, code: a.code, count: 1, sample: host });
  }

  /** Sends one aggregate per kind counted since the last flush. */
  flush(): void {
    for (const p of this.pending.values()) {
      const verb = p.decision === 'allow' ? 'allowed' : 'denied';
      const what = p.code === 'allowed' ? `to ${p.sample}` : CODE_WORDS[p.code];
      this.out({ kind: 'aggregate', ...p, reason: `${verb} ${p.count.toLocaleString('en-US')} more × ${p.method} ${what} (e.g. ${p.sample})` });
    }
    this.pending.clear();
  }

  private keyOf(a: { decision: string; method: string; code: EgressCode; host: string; port: number }): string {
    if (a.code !== 'allowed') return `${a.decision}|${a.method}|${a.code}`;
    const k = `allow|${a.method}|${a.host}:${a.port}`;
    if (this.seen.has(k) || this.seen.size < MAX_ALLOW_KEYS) return k;
    return `allow|${a.method}|other`;
  }
}
