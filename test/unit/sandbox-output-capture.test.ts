/** OutputCapture keeps head and tail, counts all, marks the cut, and stays bounded. */
import { OutputCapture } from '../../src/sandbox/output-capture';

test('small output is kept whole', () => {
  const c = OutputCapture.forLimit(100, 'stdout');
  c.push(Buffer.from('hello '));
  c.push(Buffer.from('world'));
  expect(c.text()).toBe('hello world');
  expect(c.truncated).toBe(false);
  expect(c.total).toBe(11);
});

test('a flood keeps head and tail and marks the cut', () => {
  const c = OutputCapture.forLimit(20, 'stdout');
  c.push(Buffer.from('HEAD-'));
  for (let i = 0; i < 10_000; i++) c.push(Buffer.from('middle-'));
  c.push(Buffer.from('-TAIL'));
  const t = c.text();
  expect(t.startsWith('HEAD-')).toBe(true);
  expect(t.endsWith('-TAIL')).toBe(true);
  expect(t).toMatch(/corral cut \d+ bytes of stdout/);
  expect(c.truncated).toBe(true);
  expect(c.total).toBe(10 + 70_000);
  expect(Buffer.byteLength(t.replace(/\n\[\.\.\. corral cut.*\.\.\.\]\n/, ''))).toBe(20);
});

test('memory stays bounded under many small chunks', () => {
  const c = OutputCapture.forLimit(1000, 'stderr');
  for (let i = 0; i < 200_000; i++) c.push(Buffer.from('y\n'));
  expect(c.text().length).toBeLessThan(1200);
});

test('head-only capture keeps exactly the head', () => {
  const c = new OutputCapture(4, 0, 'stdout');
  c.push(Buffer.from('abcdefgh'));
  expect(c.headBuffer().toString()).toBe('abcd');
  expect(c.truncated).toBe(true);
});
