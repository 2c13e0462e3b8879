/**
 * PolicyError: a policy file that is malformed or whose rule examples fail. Startup stops on it.
 * The message always names the file, and where known the rule and line: `policies/x.yaml:12 rule "ls": …`.
 */
import { CorralError, type CorralErrorOptions } from '../domain/errors';

export class PolicyError extends CorralError {
  constructor(
    message: string,
    readonly file: string,
    readonly rule?: string,
    readonly line?: number,
    options?: CorralErrorOptions,
  ) {
    super('policy_invalid', message, { file, ...(rule ? { rule } : {}), ...(line ? { line } : {}) }, options);
  }
}
