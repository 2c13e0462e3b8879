/**
 * Bearer tokens → tenants. Tokens come from CORRAL_API_TOKENS ("tenant=token,tenant2:ci=token2") and/or
 * CORRAL_API_TOKENS_FILE (one tenant[:name]=token per line, # comments); a tenant may have several tokens
 * (rotation). A token's name (`:name`, else `key-` and the first 8 hex digits of its SHA-256) is
 * part of the caller's principal (domain/principal.ts): approvals record who answered. Only SHA-256 digests of the tokens are kept, and a presented token is compared with
 * every one of them with crypto.timingSafeEqual over equal-length digests, so neither its content nor
 * which tenant it matched shows in the time taken. No token ever appears in an error or a log line.
 * Without any token configured, auth is off and every request is the default tenant.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { InvalidInputError } from '../domain/errors';
import { AUTH_OFF_PRINCIPAL, TENANT_NAME, type Principal } from '../domain/principal';
import { DEFAULT_TENANT } from '../queue/run-store';

export { TENANT_NAME } from '../domain/principal';
/** Shorter tokens are refused at start-up: they can be guessed. */
export const MIN_TOKEN_LENGTH = 16;

interface Entry {
  tenant: string;
  /** The token's name (never the token). */
  name: string;
  digest: Buffer;
}

export type AuthResult = { ok: true; tenant: string; principal: Principal } | { ok: false; reason: 'missing' | 'malformed' | 'invalid' };

export class TenantAuth {
  private constructor(private readonly entries: readonly Entry[]) {}

  /** Auth off: everything is the default tenant. */
  static off(): TenantAuth {
    return new TenantAuth([]);
  }

  /**
   * From the two sources (either may be absent). Throws InvalidInputError naming the variable for a
   * malformed entry, a bad tenant name, a short token, or one token given to two tenants.
   */
  static fromSources(sources: { tokens?: string; file?: { path: string; text: string } }): TenantAuth {
    const entries: Array<Entry & { source: string }> = [];
    if (sources.tokens) entries.push(...parseEntries(sources.tokens.split(','), 'CORRAL_API_TOKENS', (i) => `entry ${i + 1}`));
    if (sources.file) entries.push(...parseEntries(sources.file.text.split('\n'), 'CORRAL_API_TOKENS_FILE', (i) => `${sources.file!.path} line ${i + 1}`));
    const owner = new Map<string, string>();
    for (const e of entries) {
      const hex = e.digest.toString('hex');
      const prior = owner.get(hex);
      if (prior !== undefined && prior !== e.tenant) {
        throw new InvalidInputError(`${e.source}: the same token is given to tenants "${prior}" and "${e.tenant}"; each tenant needs its own`, e.source.split(' ')[0]);
      }
      owner.set(hex, e.tenant);
    }
    const names = new Map<string, string>();
    for (const e of entries) {
      const key = `${e.tenant}/${e.name}`;
      const hex = e.digest.toString('hex');
      if (names.has(key) && names.get(key) !== hex) throw new InvalidInputError(`${e.source}: tenant "${e.tenant}" has two tokens named "${e.name}"; name each one differently`, e.source.split(' ')[0]);
      names.set(key, hex);
    }
    return new TenantAuth(entries.map(({ tenant, name, digest }) => ({ tenant, name, digest })));
  }

  get enabled(): boolean {
    return this.entries.length > 0;
  }

  /** The configured tenant names (for the start-up log; never the tokens). */
  tenants(): string[] {
    return [...new Set(this.entries.map((e) => e.tenant))].sort();
  }

  /** Resolves an Authorization header to a tenant. */
  authenticate(header: string | undefined): AuthResult {
    if (!this.enabled) return { ok: true, tenant: DEFAULT_TENANT, principal: AUTH_OFF_PRINCIPAL };
    if (!header) return { ok: false, reason: 'missing' };
    const m = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
    if (!m) return { ok: false, reason: 'malformed' };
    const presented = digest(m[1]!);
    let found: Entry | null = null;
    // Compare with every entry, always: the time does not depend on which (if any) matches.
    for (const e of this.entries) {
      if (timingSafeEqual(presented, e.digest) && found === null) found = e;
    }
    return found === null ? { ok: false, reason: 'invalid' } : { ok: true, tenant: found.tenant, principal: { kind: 'token', tenant: found.tenant, token: found.name } };
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function parseEntries(lines: string[], variable: string, where: (i: number) => string): Array<Entry & { source: string }> {
  const out: Array<Entry & { source: string }> = [];
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    const source = `${variable} ${where(i)}`;
    if (eq <= 0) throw new InvalidInputError(`${source}: expected tenant=token or tenant:name=token`, variable);
    const who = line.slice(0, eq).trim();
    const colon = who.indexOf(':');
    const tenant = colon < 0 ? who : who.slice(0, colon);
    const named = colon < 0 ? undefined : who.slice(colon + 1);
    const token = line.slice(eq + 1).trim();
    if (!TENANT_NAME.test(tenant)) throw new InvalidInputError(`${source}: tenant "${tenant.slice(0, 80)}" must be letters, digits, ".", "_" or "-" (at most 64)`, variable);
    if (named !== undefined && !TENANT_NAME.test(named)) throw new InvalidInputError(`${source}: the token name "${named.slice(0, 80)}" of tenant "${tenant}" must be letters, digits, ".", "_" or "-" (at most 64)`, variable);
    if (token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
      throw new InvalidInputError(`${source}: the token of tenant "${tenant}" must be at least ${MIN_TOKEN_LENGTH} characters without spaces`, variable);
    }
    const d = digest(token);
    out.push({ tenant, name: named ?? `key-${d.toString('hex').slice(0, 8)}`, digest: d, source });
  });
  return out;
}

/** The tenants and tokens of the configuration (reads CORRAL_API_TOKENS_FILE when set). */
export function loadTenantAuth(config: { CORRAL_API_TOKENS?: string | undefined; CORRAL_API_TOKENS_FILE?: string | undefined }): TenantAuth {
  let file: { path: string; text: string } | undefined;
  if (config.CORRAL_API_TOKENS_FILE) {
    const path = config.CORRAL_API_TOKENS_FILE;
    try {
      file = { path, text: readFileSync(path, 'utf8') };
    } catch (err) {
      throw new InvalidInputError(`CORRAL_API_TOKENS_FILE: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, 'CORRAL_API_TOKENS_FILE', undefined, { cause: err });
    }
  }
  return TenantAuth.fromSources({ ...(config.CORRAL_API_TOKENS ? { tokens: config.CORRAL_API_TOKENS } : {}), ...(file ? { file } : {}) });
}
