/**
 * The operator's rules on a run's egress allowlist beyond its schema (run-spec.ts): with
 * CORRAL_EGRESS_WILDCARDS=false no entry may be a wildcard. Refused with InvalidInputError naming
 * `egress.allow.<i>` (the API turns it into a 400, the worker fails the job). Pure, so the API and
 * the worker check the same way.
 */
import type { Config } from '../config';
import { InvalidInputError } from '../domain/errors';

export function checkEgressAllow(allow: readonly string[], config: Pick<Config, 'CORRAL_EGRESS_WILDCARDS'>): void {
  if (config.CORRAL_EGRESS_WILDCARDS) return;
  const i = allow.findIndex((a) => a.startsWith('*.'));
  if (i >= 0) {
    throw new InvalidInputError(`egress.allow.${i}: "${allow[i]}": wildcard entries are turned off on this server (CORRAL_EGRESS_WILDCARDS=false); list each name`, `egress.allow.${i}`);
  }
}
