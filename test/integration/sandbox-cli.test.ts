/** `corral sandbox exec` end to end: one JSON object, non-root, no capabilities, exit 0 whatever the command's exit; 2 on bad flags. */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

jest.setTimeout(60_000);
const run = promisify(execFile);
const corral = join(__dirname, '..', '..', 'bin', 'corral');

test('prints the exec result as JSON, non-root with an empty capability set', async () => {
  const { stdout } = await run(corral, ['sandbox', 'exec', '--timeout-s', '20', '--', 'bash', '-c', "id -u; grep CapEff /proc/self/status; exit 3"]);
  const r = JSON.parse(stdout) as Record<string, unknown>;
  expect(r).toMatchObject({ exitCode: 3, stdout: '10001\nCapEff:\t0000000000000000\n', timedOut: false, oomKilled: false, truncated: false });
});

test('bad flags exit 2 with a message', async () => {
  const err = await run(corral, ['sandbox', 'exec', '--memory-mb', '999999', '--', 'true']).catch((e: { code: number; stderr: string }) => e);
  expect(err).toMatchObject({ code: 2, stderr: expect.stringMatching(/limits\.memoryMb is 999999 MB, above this server's maximum/) });
});
