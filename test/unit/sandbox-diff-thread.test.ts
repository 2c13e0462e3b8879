/** The export's diff thread: diffs come from another thread, and a thread that dies mid-diff costs only that file's line diff. */
import { randomBytes } from 'node:crypto';
import { DiffThread } from '../../src/sandbox/diff-thread';
import { diffFile, sideOf } from '../../src/sandbox/workspace-diff';

jest.setTimeout(30_000);

const a = sideOf(Buffer.from('one\ntwo\nthree\n'), 0o644);
const b = sideOf(Buffer.from('one\n2\nthree\n'), 0o644);

test('a diff in the thread equals the one on the main thread, and says which thread made it', async () => {
  const t = new DiffThread();
  try {
    expect(await t.diff('x.txt', a, b)).toEqual(diffFile('x.txt', a, b));
    expect(t.stats).toMatchObject({ inThread: 1, givenUp: 0 });
    expect(t.stats.threadId).toBeGreaterThan(0);
  } finally {
    await t.close();
  }
});

test('a binary change\'s git binary patch is made in the thread too, the same as on the main thread', async () => {
  const t = new DiffThread();
  try {
    const x = sideOf(Buffer.concat([Buffer.from([0, 1, 2]), randomBytes(4096)]), 0o644);
    const y = sideOf(Buffer.concat([Buffer.from([0, 1, 2]), randomBytes(4096)]), 0o644);
    const s = await t.diff('bin.dat', x, y);
    expect(s).toEqual(diffFile('bin.dat', x, y));
    expect(s?.text).toContain('GIT binary patch');
    expect(t.stats).toMatchObject({ inThread: 1, givenUp: 0 });
  } finally {
    await t.close();
  }
});

test('a thread that dies during a diff: that file becomes one hunk replacing the whole text (still applies); the next diff gets a fresh thread', async () => {
  const t = new DiffThread();
  try {
    await t.diff('warm.txt', a, b);
    const first = (t as unknown as { worker: { terminate(): Promise<number> } }).worker;
    // two 1 MiB texts with nothing in common: a diff that takes its whole budget, so the thread dies inside it
    const big = (tag: string) => sideOf(Buffer.from(Array.from({ length: 26_000 }, (_, i) => `${tag} ${i} ${randomBytes(12).toString('hex')}`).join('\n')), 0o644);
    const pending = t.diff('x.txt', big('a'), big('b'));
    void first.terminate();
    const s = await pending;
    expect(s?.change).toMatchObject({ path: 'x.txt', change: 'modified', added: 26_000, removed: 26_000 });
    expect(s?.change.binary).toBeUndefined();
    expect(s?.text).toContain('--- a/x.txt\n+++ b/x.txt\n@@ -1,26000 +1,26000 @@\n');
    expect(await t.diff('y.txt', a, b)).toEqual(diffFile('y.txt', a, b));
    expect(t.stats.givenUp).toBe(1);
  } finally {
    await t.close();
  }
});
