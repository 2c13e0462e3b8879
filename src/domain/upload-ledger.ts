/**
 * The port uploads are counted through against the tenants' quotas: workspaces/workspace-uploads.ts
 * uses it, queue/upload-quota.ts implements it on Redis.
 */

/** A ledger's answer: go on, or which cap refused and how (413: one upload alone is over; 429: try later). */
export type LedgerVerdict = { ok: true } | { ok: false; status: 413 | 429; limit: string; max: number; retryAfterS: number; message: string };

/**
 * Where uploads are counted against the tenants' quotas (queue/upload-quota.ts on Redis): bytes
 * received per hour, and bytes kept — reserved while an upload is written, kept under its id until
 * it expires or is removed.
 */
export interface UploadLedger {
  charge(tenant: string, bytes: number): Promise<LedgerVerdict>;
  /** Sets the pending upload `ref`'s reservation to `bytes` (it lapses after holdMs unless committed). */
  reserve(tenant: string, ref: string, bytes: number, holdMs: number): Promise<LedgerVerdict>;
  commit(tenant: string, ref: string, id: string, bytes: number, ttlMs: number): Promise<void>;
  abandon(tenant: string, ref: string): Promise<void>;
  touch(tenant: string, id: string, ttlMs: number): Promise<void>;
  remove(tenant: string, id: string): Promise<void>;
}
