/**
 * Line output with an optional footer that stays at the bottom of a terminal and is redrawn in place
 * (cursor up, clear to the end of the screen). Without a TTY there is no footer and no escape code:
 * every line is written once.
 *
 * partial() writes text that does not end a line (a model answer as it streams in): while such a
 * line is open the footer is not drawn, and the next print() ends the line first.
 *
 * Lines and partial text carry what models, sandboxes and tenants wrote: every control character in
 * them (escape sequences, carriage returns, bidi controls) is shown as \u{…} here, at the one place
 * the watch view writes to the terminal; the footer's own cursor codes are added after that.
 */

/**
 * Text made safe for a terminal: newlines and tabs stay; other control characters (C0, DEL, C1),
 * bidi controls and line separators are shown as \u{…} instead of being written. Idempotent.
 */
export function visible(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\u2028\u2029]/g, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);
}

export interface LineSink {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export class LiveOutput {
  private footerRows = 0;
  private footerLines: string[] = [];
  /** A partial line is open (text written without its newline yet). */
  private open = false;

  constructor(
    private readonly out: LineSink,
    /** Keep a footer; default: when `out` is a TTY. */
    readonly live: boolean = !!out.isTTY,
  ) {}

  /** Writes lines above the footer and, when given, replaces the footer — in one write. */
  print(raw: readonly string[], rawFooter?: readonly string[]): void {
    const lines = raw.map(visible);
    const footer = rawFooter?.map(visible);
    if (this.open) {
      if (!lines.length) {
        if (footer) this.footerLines = [...footer];
        return;
      }
      this.out.write('\n');
      this.open = false;
    }
    if (!this.live) {
      if (lines.length) this.out.write(lines.map((l) => `${l}\n`).join(''));
      return;
    }
    const next = footer ?? this.footerLines;
    const same = next.length === this.footerLines.length && next.every((l, i) => l === this.footerLines[i]);
    if (!lines.length && same) return;
    this.out.write(`${this.erase()}${lines.map((l) => `${l}\n`).join('')}${this.draw(next)}`);
    this.footerLines = [...next];
  }

  /** Writes text without ending the line (the footer is taken away until the line ends). */
  partial(raw: string): void {
    if (!raw) return;
    const text = visible(raw);
    this.out.write(`${this.open ? '' : this.erase()}${text}`);
    this.open = true;
  }

  /** Replaces the footer (live mode only). */
  setFooter(lines: readonly string[]): void {
    this.print([], lines);
  }

  /** Removes the footer (before the final lines, or when stopping). */
  clearFooter(): void {
    this.print([], []);
  }

  private erase(): string {
    if (!this.footerRows) return '';
    const s = `\x1b[${this.footerRows}A\r\x1b[J`;
    this.footerRows = 0;
    return s;
  }

  private draw(lines: readonly string[]): string {
    const width = Math.max(20, (this.out.columns || 100) - 1);
    this.footerRows = lines.length;
    return lines.map((l) => `${[...l].length > width ? `${[...l].slice(0, width - 1).join('')}…` : l}\n`).join('');
  }
}
