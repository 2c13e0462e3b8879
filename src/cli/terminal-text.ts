/**
 * Text from runs (tasks, model output, commands, reports) shown on a terminal: control characters
 * (C0 but tab and newline, DEL, C1) and bidirectional-text controls are shown as visible escapes
 * (`\x1b`, `\u202e`), so what a task or a model wrote can neither move the cursor, recolour, retitle
 * or clear the terminal, nor reorder what is shown. `corral report -o FILE` writes the report as it is.
 */

// eslint-disable-next-line no-control-regex
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const n = c.codePointAt(0)!;
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/** One line for a terminal: terminalSafe, and line breaks inside it shown as ⏎. */
export function terminalLine(text: string): string {
  return terminalSafe(text.replace(/\r?\n/g, ' ⏎ '));
}
