/** JSON records read back from Redis, checked against their schema. */
import type { z } from 'zod';
import { CorralError } from '../domain/errors';

/** The record as its schema says; a corrupt one is an internal error naming it (`what`) and what is wrong, never a cast. */
export function parseStored<S extends z.ZodType>(schema: S, raw: string, what: string): z.infer<S> {
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new CorralError('internal', `${what} is corrupt: not JSON`);
  }
  const r = schema.safeParse(json);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new CorralError('internal', `${what} is corrupt: ${issue?.path.join('.') || '(record)'}: ${issue?.message}`);
  }
  return r.data;
}
