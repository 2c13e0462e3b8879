/**
 * Repetition detection: notices when the model makes the same tool call over and over, so the loop
 * can add a note to the tool result telling it to change approach.
 *
 *   new RepetitionTracker({ threshold? = 3 })
 *   tracker.observe(tool, argsJson): string | null
 *     Call once per tool call, in order. Two calls are the same when the tool name and the canonical
 *     arguments match (JSON re-serialised with sorted keys, so key order and spacing do not matter;
 *     arguments that are not valid JSON are compared as trimmed text). Returns a note for the model
 *     at the threshold-th identical call in a row and at every further repeat; null otherwise. A
 *     different call starts a new streak.
 */

export interface RepetitionTrackerOptions {
  /** Identical calls in a row that trigger the note; default 3. */
  threshold?: number;
  /** A streak carried over a suspension (state() of an earlier tracker). */
  from?: { lastKey: string | null; streak: number };
}

export class RepetitionTracker {
  private readonly threshold: number;
  private lastKey: string | null = null;
  private streak = 0;

  constructor(opts: RepetitionTrackerOptions = {}) {
    this.threshold = Math.max(2, Math.floor(opts.threshold ?? 3));
    if (opts.from) {
      this.lastKey = opts.from.lastKey;
      this.streak = opts.from.streak;
    }
  }

  /** The current streak, to carry over a suspension. */
  state(): { lastKey: string | null; streak: number } {
    return { lastKey: this.lastKey, streak: this.streak };
  }

  observe(tool: string, argsJson: string): string | null {
    const key = `${tool}\u0000${canonicalArgs(argsJson)}`;
    if (key === this.lastKey) this.streak += 1;
    else {
      this.lastKey = key;
      this.streak = 1;
    }
    if (this.streak < this.threshold) return null;
    return `Note: you have made this exact ${tool} call ${this.streak} times in a row, and repeating it is unlikely to give a different result; change your approach instead of repeating it.`;
  }
}

/** JSON with object keys sorted at every depth; invalid JSON as its trimmed text. */
export function canonicalArgs(argsJson: string): string {
  const text = argsJson.trim();
  if (text === '') return '{}';
  try {
    return JSON.stringify(sortKeys(JSON.parse(text)));
  } catch {
    return text;
  }
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    // No prototype, so a "__proto__" key stays an ordinary key.
    const out = Object.create(null) as Record<string, unknown>;
    for (const k of Object.keys(value).sort()) out[k] = sortKeys((value as Record<string, unknown>)[k]);
    return out;
  }
  return value;
}
