/**
 * Bounded capture of one output stream: keeps the first `head` and the last `tail` bytes, counts
 * everything, and renders the cut as a marker line. Memory stays O(head + tail) however much the
 * process writes — an output flood cannot grow the worker.
 */
export class OutputCapture {
  private readonly headChunks: Buffer[] = [];
  private headLen = 0;
  private tailChunks: Buffer[] = [];
  private tailLen = 0;
  /** Bytes the process wrote in total. */
  total = 0;

  constructor(
    private readonly head: number,
    private readonly tail: number,
    private readonly streamName: string,
  ) {}

  static forLimit(maxBytes: number, streamName: string): OutputCapture {
    const head = Math.ceil(maxBytes / 2);
    return new OutputCapture(head, Math.max(0, maxBytes - head), streamName);
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    let rest = chunk;
    if (this.headLen < this.head) {
      const take = Math.min(this.head - this.headLen, rest.length);
      this.headChunks.push(Buffer.from(rest.subarray(0, take)));
      this.headLen += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0 || this.tail === 0) return;
    if (rest.length >= this.tail) {
      this.tailChunks = [Buffer.from(rest.subarray(rest.length - this.tail))];
      this.tailLen = this.tail;
      return;
    }
    this.tailChunks.push(Buffer.from(rest));
    this.tailLen += rest.length;
    while (this.tailLen - (this.tailChunks[0]?.length ?? 0) >= this.tail) {
      this.tailLen -= this.tailChunks.shift()!.length;
    }
  }

  get truncated(): boolean {
    return this.total > this.headLen + this.tailLen;
  }

  /** The kept bytes (no marker); for callers that parse output themselves. */
  headBuffer(): Buffer {
    return Buffer.concat(this.headChunks, this.headLen);
  }

  text(): string {
    const head = this.headBuffer();
    let tail = Buffer.concat(this.tailChunks, this.tailLen);
    if (!this.truncated) return Buffer.concat([head, tail]).toString('utf8');
    if (tail.length > this.tail) tail = tail.subarray(tail.length - this.tail);
    const cut = this.total - head.length - tail.length;
    return `${head.toString('utf8')}\n[... corral cut ${cut} bytes of ${this.streamName} here; ${this.total} bytes in total ...]\n${tail.toString('utf8')}`;
  }
}
