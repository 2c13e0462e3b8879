/**
 * The minimum body rate (watchBodyRate) judges the client, never the API: a window in which the
 * client sent too little ends the request, but a window whose tick came late (this process's loop was
 * stalled and could not read the socket either) is not held against it. Fake timers and clock.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { watchBodyRate } from '../../src/api/request-guards';

const WINDOW = 10_000;
function request(): { raw: IncomingMessage; socket: { bytesRead: number } } {
  const socket = { bytesRead: 0 };
  const raw = Object.assign(new EventEmitter(), { socket, readableLength: 0, isPaused: () => false }) as unknown as IncomingMessage;
  return { raw, socket };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('a client that sends less than the minimum in a window is slow', () => {
  const { raw, socket } = request();
  const slow = jest.fn();
  watchBodyRate(raw, 1000, slow, WINDOW);
  socket.bytesRead += 20_000;
  jest.advanceTimersByTime(WINDOW);
  expect(slow).not.toHaveBeenCalled();
  socket.bytesRead += 9_999;
  jest.advanceTimersByTime(WINDOW);
  expect(slow).toHaveBeenCalledWith(9_999);
});

test('a window whose tick came late (the loop was stalled) is not held against the client', () => {
  const { raw } = request();
  const slow = jest.fn();
  watchBodyRate(raw, 1000, slow, WINDOW);
  // The loop is held for 20 s (the clock moves, no timer runs), then the tick comes.
  jest.setSystemTime(Date.now() + 2 * WINDOW);
  jest.advanceTimersByTime(WINDOW);
  expect(slow).not.toHaveBeenCalled();
  // The next window, on time and still empty, is the client's.
  jest.advanceTimersByTime(WINDOW);
  expect(slow).toHaveBeenCalledWith(0);
});
