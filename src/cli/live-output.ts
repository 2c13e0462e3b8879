/**
 * Line output with an optional footer that stays at the bottom of a terminal and is redrawn in place
 * (cursor up, clear to the end of the screen). Without a TTY there is no footer and no escape code:
 * every line is written once.
 *
 * partial() writes text that does not end a line (a model answer as it streams in): while such a
 * line is open the footer is not drawn, and the next print() ends the line first.
 */

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
  print(lines: readonly string[], footer?: readonly string[]): void {
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
  partial(text: string): void {
    if (!text) return;
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
