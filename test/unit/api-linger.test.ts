/**
 * The courtesy read after an early answer (lingerAfterAnswer) ends the connection when its bytes or
 * time run out. A request that did not come over a real socket (Fastify's inject gives a mock socket
 * with no destroy) must then be destroyed itself: a TypeError thrown from that timer would end the
 * process serving every tenant.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PassThrough } from 'node:stream';
import { lingerAfterAnswer, LINGER_MS } from '../../src/api/request-guards';

function injected(): { raw: IncomingMessage & PassThrough; res: ServerResponse } {
  // What light-my-request hands a route: a stream request whose socket is a plain object.
  const raw = Object.assign(new PassThrough(), { complete: false, socket: { remoteAddress: '127.0.0.1' } }) as unknown as IncomingMessage & PassThrough;
  const res = Object.assign(new EventEmitter(), { headersSent: false, setHeader: () => undefined }) as unknown as ServerResponse;
  return { raw, res };
}

afterEach(() => jest.useRealTimers());

test('past LINGER_MS, a request without a real socket is destroyed, and nothing throws', () => {
  jest.useFakeTimers();
  const { raw, res } = injected();
  lingerAfterAnswer(raw, res, 'acme-linger-time');
  res.emit('finish');
  expect(raw.destroyed).toBe(false);
  expect(() => jest.advanceTimersByTime(LINGER_MS + 1)).not.toThrow();
  expect(raw.destroyed).toBe(true);
});

test('a flooding tenant (no courtesy read) without a real socket is destroyed at once, and nothing throws', () => {
  let last: ReturnType<typeof injected> | undefined;
  for (let i = 0; i < 20; i++) {
    last = injected();
    lingerAfterAnswer(last.raw, last.res, 'acme-linger-flood');
    expect(() => last!.res.emit('finish')).not.toThrow();
  }
  expect(last!.raw.destroyed).toBe(true);
});
