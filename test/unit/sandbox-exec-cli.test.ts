/** `corral sandbox exec` flag parsing: bad flags are exit-2 messages, the command follows `--`. */
import { parseSandboxExecArgs } from '../../src/cli/sandbox-exec';

test('parses flags and the command after --', () => {
  expect(parseSandboxExecArgs(['exec', '--allow-domain', 'Example.COM', '--allow-domain=*.pypi.org', '--timeout-s', '5', '--memory-mb=256', '--', 'bash', '-c', 'id -u'])).toEqual({
    allow: ['example.com', '*.pypi.org'],
    timeoutS: 5,
    memoryMb: 256,
    argv: ['bash', '-c', 'id -u'],
  });
});

test.each([
  [['run', '--', 'true'], /unknown sandbox subcommand/],
  [['exec', 'true'], /after "--"/],
  [['exec', '--'], /after "--"/],
  [['exec', '--bogus', '--', 'true'], /unknown flag/],
  [['exec', '--timeout-s', 'soon', '--', 'true'], /positive integer/],
  [['exec', '--memory-mb', '-5', '--', 'true'], /positive integer/],
  [['exec', '--allow-domain', '*', '--', 'true'], /never "\*" alone/],
  [['exec', '--isolation', 'kata', '--', 'true'], /--isolation must be runc or gvisor, got "kata"/],
  [['exec', '--allow-domain', '*.com', '--', 'true'], /public suffix/],
])('%j is refused', (argv, msg) => {
  expect(parseSandboxExecArgs(argv)).toMatch(msg);
});
