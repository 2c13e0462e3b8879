/** How the `corral` command reports an error: one line on stderr and an exit code (2 bad usage, 1 failure). */
import { ApiError, ApiUnreachableError } from './api-client';
import { UsageError } from './cli-args';

/** An error as one line: what went wrong and, where we know it, what to do. */
export function errorLine(name: string | undefined, err: unknown): { line: string; code: number } {
  const one = (s: string) => s.replace(/\s*\n\s*/g, ' ').trim();
  if (err instanceof UsageError) {
    const where = name ? `corral ${name}` : 'corral';
    return { line: `${where}: ${one(err.message)}${err.pointToHelp ? `; see \`${where} --help\`` : ''}`, code: 2 };
  }
  if (err instanceof ApiUnreachableError || err instanceof ApiError) return { line: `corral: ${one(err.message)}`, code: 1 };
  const e = err as { code?: unknown; message?: string };
  if (e.code === 'invalid_input' && e.message?.startsWith('configuration:')) {
    return { line: `corral: ${one(e.message)}; fix that environment variable`, code: 2 };
  }
  const code = typeof e.code === 'string' && e.code !== 'invalid_input' && !/^E[A-Z]+$/.test(e.code) ? `[${e.code}] ` : '';
  return { line: `corral: ${code}${one(e.message ?? String(err))}`, code: 1 };
}
