/**
 * `corral sandbox exec` end to end: one JSON object, non-root, no capabilities, exit 0 whatever the
 * command's exit; 2 on bad flags; under gVisor (CORRAL_SANDBOX_RUNTIME=runsc) dmesg shows gVisor's boot,
 * and a memory bomb that ends the whole sandbox is reported at once as oomKilled (exit 1), not as a timeout.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

jest.setTimeout(60_000);
const run = promisify(execFile);
const corral = join(__dirname, '..', '..', 'bin', 'corral');

test('prints the exec result as JSON, non-root with an empty capability set', async () => {
  const { stdout } = await run(corral, ['sandbox', 'exec', '--timeout-s', '20', '--', 'bash', '-c', "id -un; grep CapEff /proc/self/status; exit 3"]);
  const r = JSON.parse(stdout) as Record<string, unknown>;
  expect(r).toMatchObject({ exitCode: 3, stdout: 'agent\nCapEff:\t0000000000000000\n', timedOut: false, oomKilled: false, truncated: false });
});

test('bad flags exit 2 with a message', async () => {
  const err = await run(corral, ['sandbox', 'exec', '--memory-mb', '999999', '--', 'true']).catch((e: { code: number; stderr: string }) => e);
  expect(err).toMatchObject({ code: 2, stderr: expect.stringMatching(/limits\.memoryMb is 999999 MB, above this server's maximum/) });
});

test('CORRAL_SANDBOX_RUNTIME=runsc: dmesg shows gVisor', async () => {
  const { stdout } = await run(corral, ['sandbox', 'exec', '--', 'dmesg'], { env: { ...process.env, CORRAL_SANDBOX_RUNTIME: 'runsc' } });
  expect((JSON.parse(stdout) as { stdout: string }).stdout).toMatch(/Starting gVisor/);
});

test('under gVisor a memory bomb ends the sandbox: reported at once as oomKilled, exit 1, not a timeout', async () => {
  const t0 = Date.now();
  const err = await run(corral, ['sandbox', 'exec', '--isolation', 'gvisor', '--memory-mb', '256', '--timeout-s', '60', '--', 'python3', '-c', 'a=[]\nwhile True: a.append(b"x" * (32*1024*1024))'])
    .catch((e: { code: number; stdout: string; stderr: string }) => e);
  expect(Date.now() - t0).toBeLessThan(30_000);
  expect(err).toMatchObject({ code: 1, stderr: expect.stringMatching(/\[sandbox_failed\] the sandbox \w+ died: out of memory/) });
  expect(JSON.parse((err as { stdout: string }).stdout)).toMatchObject({ oomKilled: true, timedOut: false, sandboxDied: 'died' });
});
