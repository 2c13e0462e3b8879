/**
 * Who did something through the API, as authenticated — never what a request body says: a tenant's
 * named token (`tenant:name=token` in CORRAL_API_TOKENS; an unnamed one is `key-` and the first 8 hex
 * digits of its SHA-256), or the operator when auth is off (then nobody is authenticated, and anyone
 * who can reach the API acts as the operator). Approvals record it; a free-text note may go beside it.
 */
/** A tenant's name (CORRAL_API_TOKENS, a queue job's `tenant`). */
export const TENANT_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export type Principal = { kind: 'token'; tenant: string; token: string } | { kind: 'operator'; name: string };

/** What logs, reports and the model read: `acme/ci-bot`, or `operator (auth off)`. */
export function principalText(p: Principal): string {
  return p.kind === 'token' ? `${p.tenant}/${p.token}` : `operator (${p.name})`;
}

/** The principal of every request while auth is off. */
export const AUTH_OFF_PRINCIPAL: Principal = { kind: 'operator', name: 'auth off' };
