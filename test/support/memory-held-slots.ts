/**
 * HeldSlots' port in one process, for unit tests without Redis: the same caps, verdicts and messages
 * (queue/held-slots.ts writes them), counted in maps.
 */
import type { HeldCaps, HeldKind, HeldSlots, HeldVerdict } from '../../src/queue/held-slots';
import { heldRefusal } from '../../src/queue/held-slots';

export class MemoryHeldSlots implements Pick<HeldSlots, 'take' | 'held' | 'refusals' | 'countRefusal'> {
  private readonly holders = new Map<HeldKind, Map<string, number>>();
  private readonly refused = new Map<string, number>();

  async take(kind: HeldKind, tenant: string, caps: HeldCaps): Promise<HeldVerdict> {
    const m = this.holders.get(kind) ?? new Map<string, number>();
    this.holders.set(kind, m);
    const total = [...m.values()].reduce((a, b) => a + b, 0);
    const scope = (m.get(tenant) ?? 0) >= caps.perTenant ? 'per_tenant' : total >= caps.global ? 'global' : null;
    if (scope) {
      this.refused.set(`${kind}_${scope}`, (this.refused.get(`${kind}_${scope}`) ?? 0) + 1);
      return heldRefusal(kind, scope, tenant, caps);
    }
    m.set(tenant, (m.get(tenant) ?? 0) + 1);
    let released = false;
    return {
      ok: true,
      release: async () => {
        if (released) return;
        released = true;
        m.set(tenant, (m.get(tenant) ?? 1) - 1);
      },
    };
  }

  async held(kind: HeldKind, tenant?: string): Promise<{ byTenant: Record<string, number>; total: number }> {
    const m = this.holders.get(kind) ?? new Map<string, number>();
    const byTenant = Object.fromEntries([...m].filter(([t, n]) => n > 0 && (tenant === undefined || t === tenant)));
    return { byTenant: tenant === undefined ? byTenant : { [tenant]: m.get(tenant) ?? 0 }, total: [...m.values()].reduce((a, b) => a + b, 0) };
  }

  async countRefusal(cap: string): Promise<void> {
    this.refused.set(cap, (this.refused.get(cap) ?? 0) + 1);
  }

  async refusals(): Promise<Record<string, number>> {
    return Object.fromEntries(this.refused);
  }
}
