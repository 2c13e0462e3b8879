/**
 * An MCP Transport (@modelcontextprotocol/sdk's interface) over a process in the sandbox: JSON-RPC
 * messages as newline-delimited JSON on its stdin and stdout (the MCP stdio transport), the SDK's
 * Client on top. What a server writes is attack surface, so the framing here is bounded:
 *   - a frame (one line) over `maxFrameBytes` is never assembled: the server is stopped at that byte;
 *   - over `maxTotalBytes` of stdout and stderr in all (stderr alone included), the server is stopped;
 *   - messages the server starts (notifications, requests) past `maxServerMessages`, and lines that
 *     are not JSON-RPC past `maxBadLines` (a response to an id corral never sent counts as one), stop it;
 *   - what corral writes to a server that does not read its stdin is bounded (`maxPendingStdinBytes`).
 * Parsing is the SDK's own (deserializeMessage: JSON.parse and its JSON-RPC schema). A stop is a
 * `failure` the connection reports with the tool error; the SDK sees the transport close, so every
 * pending request ends at once.
 */
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { deserializeMessage, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxProcess } from '../domain/sandbox';

export interface TransportLimits {
  maxFrameBytes: number;
  maxTotalBytes: number;
  maxServerMessages: number;
  maxBadLines: number;
  maxPendingStdinBytes: number;
}

export interface TransportStats {
  frames: number;
  bytesIn: number;
  /** The most bytes of an unfinished frame held at once. */
  maxBufferedBytes: number;
  serverMessages: number;
  badLines: number;
}

type Spawn = (onStdout: (chunk: Buffer) => void, onStderr: (totalBytes: number) => void) => Promise<SandboxProcess>;

export class ExecTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private proc: SandboxProcess | undefined;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private closed = false;
  /** Ids of requests corral sent that have no response yet. */
  private readonly outstanding = new Set<string | number>();
  /** Why corral stopped the server (a limit it broke); null while it has broken none. */
  failure: string | null = null;
  /** How the process ended, once it has. */
  exit: { exitCode: number | null; reason?: string } | null = null;
  readonly stats: TransportStats = { frames: 0, bytesIn: 0, maxBufferedBytes: 0, serverMessages: 0, badLines: 0 };

  constructor(private readonly spawn: Spawn, private readonly limits: TransportLimits) {}

  get process(): SandboxProcess | undefined {
    return this.proc;
  }

  async start(): Promise<void> {
    this.proc = await this.spawn((chunk) => this.onStdout(chunk), (stderrBytes) => this.onStderr(stderrBytes));
    void this.proc.exited.then((e) => {
      this.exit = e;
      this.closed = true;
      this.onclose?.();
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    const p = this.proc;
    if (!p || this.closed || this.failure) return Promise.reject(new Error(this.failure ?? 'the MCP server is not running'));
    const line = serializeMessage(message);
    if (p.pendingBytes + Buffer.byteLength(line) > this.limits.maxPendingStdinBytes) {
      this.stop(`it stopped reading its input (${p.pendingBytes} bytes waiting)`);
      return Promise.reject(new Error(this.failure!));
    }
    if ('method' in message && 'id' in message) this.outstanding.add(message.id);
    p.write(line);
    return Promise.resolve();
  }

  async close(): Promise<void> {
    await this.proc?.kill('closed by corral');
  }

  /** Stops the server for breaking a limit (once); the SDK then sees the transport close. */
  stop(why: string): void {
    if (this.failure) return;
    this.failure = why;
    this.chunks = [];
    this.buffered = 0;
    this.onerror?.(new Error(why));
    void this.proc?.kill(why);
  }

  /** stderr is kept head and tail by the process; only its total counts here (a flood of it alone stops the server too). */
  private onStderr(stderrBytes: number): void {
    if (!this.failure && this.stats.bytesIn + stderrBytes > this.limits.maxTotalBytes) this.stop(`it wrote more than ${mib(this.limits.maxTotalBytes)} in all`);
  }

  private onStdout(chunk: Buffer): void {
    if (this.failure) return;
    this.stats.bytesIn += chunk.length;
    if (this.stats.bytesIn + (this.proc?.stderrBytes ?? 0) > this.limits.maxTotalBytes) {
      return this.stop(`it wrote more than ${mib(this.limits.maxTotalBytes)} in all`);
    }
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      if (this.buffered + piece.length > this.limits.maxFrameBytes) return this.tooLarge();
      const line = this.chunks.length ? Buffer.concat([...this.chunks, piece]) : piece;
      this.chunks = [];
      this.buffered = 0;
      start = nl + 1;
      this.frame(line);
      if (this.failure) return;
    }
    const rest = chunk.subarray(start);
    if (rest.length === 0) return;
    if (this.buffered + rest.length > this.limits.maxFrameBytes) return this.tooLarge();
    this.chunks.push(Buffer.from(rest));
    this.buffered += rest.length;
    this.stats.maxBufferedBytes = Math.max(this.stats.maxBufferedBytes, this.buffered);
  }

  private tooLarge(): void {
    this.stats.maxBufferedBytes = Math.max(this.stats.maxBufferedBytes, this.buffered);
    this.stop(`it sent a message larger than ${mib(this.limits.maxFrameBytes)} (the limit of one message)`);
  }

  private frame(buf: Buffer): void {
    const text = buf.toString('utf8').replace(/\r$/, '');
    if (text.trim() === '') return;
    this.stats.frames += 1;
    let msg: JSONRPCMessage;
    try {
      msg = deserializeMessage(text);
    } catch {
      return this.bad(`a line that is not a JSON-RPC message (${text.length} characters)`);
    }
    if ('method' in msg) {
      // a notification or a request of its own: bounded in number (the SDK answers requests corral does not serve with an error)
      if (++this.stats.serverMessages > this.limits.maxServerMessages) return this.stop(`it sent more than ${this.limits.maxServerMessages} messages of its own`);
    } else {
      const id = 'id' in msg ? msg.id : undefined;
      if (id === undefined || !this.outstanding.delete(id)) return this.bad(`a response to a request corral did not send (id ${JSON.stringify(id)?.slice(0, 40)})`);
    }
    this.onmessage?.(msg);
  }

  private bad(what: string): void {
    this.stats.badLines += 1;
    if (this.stats.badLines > this.limits.maxBadLines) return this.stop(`it wrote more than ${this.limits.maxBadLines} lines that are not MCP messages to its output (the last: ${what})`);
    this.onerror?.(new Error(`the MCP server wrote ${what}; ignored`));
  }
}

function mib(n: number): string {
  return n >= 1024 * 1024 ? `${Math.round((n / 1048576) * 10) / 10} MiB` : `${Math.round(n / 1024)} KiB`;
}
