/** Reading what a helper process announces on stdout. */
import type { ChildProcess } from 'node:child_process';

/** Resolves with N once the child prints `{"KEY":N}` on stdout; rejects if it exits first (`what` names it). */
export function announcedNumber(child: ChildProcess, key: string, what: string): Promise<number> {
  const re = new RegExp(`\\{"${key}":(\\d+)\\}`);
  return new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = re.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (c) => reject(new Error(`${what} exited (${c}) first`)));
  });
}
