/**
 * A command's output cannot fake an infrastructure failure (issue 14, defect 4). Whether the runtime
 * failed to start a command is decided from the Engine API (exec inspect: not running, Pid 0), never
 * from what the stream holds — which is also what the command wrote. Each variant of engine-looking
 * text, planted in a file and cat-ed or printed directly, comes back as the command's own output with
 * its own exit code; a command that really cannot start (a missing program, asked of the engine
 * directly) is still a typed sandbox_failed. Both isolation classes.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import type { IsolationClass, LeasedSandbox } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { runExec } from '../../src/sandbox/exec';
import { isolationEnv } from '../support/sandbox-env';

jest.setTimeout(120_000);
const docker = new Docker();
const WORKER = `test-forgery-${randomBytes(3).toString('hex')}`;

const FORGED = [
  'OCI runtime exec failed: exec failed: unable to start container process: error adding pid to cgroups: fork/exec /proc/self/exe: resource temporarily unavailable: unknown',
  'OCI runtime exec failed: exec failed: unable to start container process: exec: "python3": executable file not found in $PATH: unknown',
  'timeout: fork system call failed: Resource temporarily unavailable',
  'Error response from daemon: Container abc is not running',
  'OCI runtime exec failed: ',
];

describe.each(['runc', 'gvisor'] as IsolationClass[])('under %s', (isolation) => {
  let sb: LeasedSandbox;
  beforeAll(async () => {
    const provider = new DockerSandboxProvider({ docker, config: loadConfig(isolationEnv(isolation)) });
    sb = await provider.acquire({
      runId: `run_forge_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 5 * 60_000),
      files: Object.fromEntries(FORGED.map((t, i) => [`planted-${i}.txt`, `${t}\n`])),
      limits: { memoryMb: 256, cpus: 1, pids: 64, workspaceMb: 8, isolation }, egressAllow: [],
    });
  });
  afterAll(async () => {
    await sb?.dispose();
  });

  test.each(FORGED.map((t, i) => [i, t] as const))('planted text %i comes back as output, not a sandbox failure', async (i, text) => {
    const variants = [
      `cat planted-${i}.txt`,
      `cat planted-${i}.txt >&2; exit 3`,
      `printf '%s' "$(cat planted-${i}.txt)"; exit 125`,
      `cat planted-${i}.txt; cat planted-${i}.txt >&2; exit 126`,
    ];
    const expected = [0, 3, 125, 126];
    for (const [k, command] of variants.entries()) {
      const r = await sb.exec({ argv: ['bash', '-c', command], timeoutMs: 10_000 });
      expect({ command, exitCode: r.exitCode, timedOut: r.timedOut }).toEqual({ command, exitCode: expected[k], timedOut: false });
      expect(r.stdout + r.stderr).toContain(text.trim());
    }
  });

  test('a command the runtime really cannot start is still a typed sandbox_failed (decided by the Engine API)', async () => {
    const container = docker.getContainer(sb.id);
    const user = (await container.inspect()).Config.User;
    // runExec wraps every command in the in-container `timeout`; on a PATH without it the runtime
    // cannot start the process at all (exec inspect: Pid 0)
    const err = await runExec(container, { argv: ['bash', '-c', 'true'], timeoutMs: 5000, user, env: ['PATH=/nonexistent'], maxOutputBytes: 4096 }).then(
      () => null,
      (e: { code?: string; message?: string }) => e,
    );
    expect(err).toMatchObject({ code: 'sandbox_failed', message: expect.stringMatching(/could not start the command/) });
  });
});
