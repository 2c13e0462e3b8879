/**
 * MCP servers as an environment declares them and a run names them: every class of bad declaration
 * stops start-up naming `file:LINE` and the field (a credential in `env`, both or neither of command
 * and url, a bad server name, a default remote server its environment's egress cannot reach); the
 * shipped node environment's servers load; tool names parse only as `mcp__SERVER__TOOL`; a task's
 * allowed tools take a server's tools (or `mcp__SERVER__*`) only for servers the run starts.
 */
import { loadConfig } from '../../src/config';
import { contractForSpec } from '../../src/domain/task-contract';
import { knownToolName, mcpToolName, parseMcpToolName, toolAllowed } from '../../src/domain/mcp';
import { EnvironmentError, loadEnvironments, parseEnvironment } from '../../src/environments/load-environments';
import { resolve } from 'node:path';

const config = loadConfig({ CORRAL_SANDBOX_IMAGES: 'corral/sandbox-node:latest' });
const env = (mcp: string, egress = '[]') => `version: 1
description: test
image: corral/sandbox-node:latest
egress: ${egress}
mcp:
${mcp}`;

function refusal(text: string): string {
  try {
    parseEnvironment(text, 'envs/x.yaml', 'x', config);
  } catch (err) {
    if (err instanceof EnvironmentError) return err.message;
    throw err;
  }
  throw new Error('the file was accepted');
}

test('the shipped node environment declares server-filesystem and server-everything, started only when a run names them', () => {
  const node = loadEnvironments(resolve(__dirname, '../../environments'), loadConfig({})).get('node')!;
  expect(node.mcp.files).toMatchObject({ command: 'mcp-server-filesystem', args: ['/workspace'], default: false, tools: { read_text_file: 'allow', '*': 'ask' } });
  expect(node.mcp.everything).toMatchObject({ command: 'mcp-server-everything', default: false });
});

test.each([
  ['a credential in env', '  t:\n    command: srv\n    env: { TRACKER_API_TOKEN: s3cr3t-value }\n', /mcp\.t\.env\.TRACKER_API_TOKEN: looks like a credential/],
  ['a password in env', '  t:\n    command: srv\n    env: { DB_PASSWORD: hunter2 }\n', /mcp\.t\.env\.DB_PASSWORD: looks like a credential/],
  ['a variable corral sets', '  t:\n    command: srv\n    env: { HTTPS_PROXY: "http://x" }\n', /mcp\.t\.env\.HTTPS_PROXY: is set by corral itself/],
  ['both command and url', '  t:\n    command: srv\n    url: https://t.example/mcp\n', /mcp\.t\.command: give either/],
  ['neither', '  t:\n    args: [x]\n', /mcp\.t\.command: give either/],
  ['a server name with _', '  my_tracker:\n    command: srv\n', /mcp\.my_tracker: must be a server name/],
  ['a url with credentials', '  t:\n    url: https://user:pw@t.example/mcp\n    default: false\n', /mcp\.t\.url: must not carry credentials/],
  ['a url that is not http', '  t:\n    url: file:///etc/passwd\n    default: false\n', /mcp\.t\.url: must be an http\(s\) URL/],
  ['a tool glob with spaces', '  t:\n    command: srv\n    tools: { "rm -rf": allow }\n', /mcp\.t\.tools\.rm -rf: must be a tool name or a glob/],
  ['a decision that is not one', '  t:\n    command: srv\n    tools: { search: yes }\n', /mcp\.t\.tools\.search/],
])('refused: %s', (_what, mcp, want) => {
  expect(refusal(env(mcp))).toMatch(/^envs\/x\.yaml:\d+: /);
  expect(refusal(env(mcp))).toMatch(want);
});

test('a remote server started by default must be reachable with the agent\'s egress; a placeholder is not a credential', () => {
  expect(refusal(env('  t:\n    url: https://tracker.example/mcp\n'))).toMatch(/mcp\.t\.url: a remote server started by default must be reachable .* add tracker\.example to egress/);
  const ok = parseEnvironment(env('  t:\n    url: https://tracker.example/mcp\n    env: { TRACKER_TOKEN: "corral-placeholder:TRACKER" }\n', '[tracker.example]'), 'envs/x.yaml', 'x', config);
  expect(ok.mcp.t).toMatchObject({ url: 'https://tracker.example/mcp', default: true });
});

test('tool names: mcp__SERVER__TOOL only; the first __ after the prefix ends the server', () => {
  expect(parseMcpToolName(mcpToolName('files', 'read_text_file'))).toEqual({ server: 'files', tool: 'read_text_file' });
  expect(parseMcpToolName('mcp__files__a__b')).toEqual({ server: 'files', tool: 'a__b' });
  for (const bad of ['bash', 'mcp__', 'mcp____x', 'mcp__Files__x', 'mcp__files__', 'mcp__fi_les__x']) expect(parseMcpToolName(bad)).toBeNull();
  const allowed = new Set(['bash', 'mcp__files__*', 'mcp__t__search']);
  expect(toolAllowed(allowed, 'mcp__files__write_file')).toBe(true);
  expect(toolAllowed(allowed, 'mcp__t__search')).toBe(true);
  expect(toolAllowed(allowed, 'mcp__t__close')).toBe(false);
  expect(toolAllowed(allowed, 'mcp__filesx__read')).toBe(false);
});

test('a task\'s allowed tools may name the tools of servers the run starts, and no others', () => {
  const known = ['bash', 'read_file'];
  expect(knownToolName('mcp__files__*', known, ['files'])).toBe(true);
  expect(knownToolName('mcp__files__read_text_file', known, ['files'])).toBe(true);
  expect(knownToolName('mcp__everything__echo', known, ['files'])).toBe(false);
  const c = contractForSpec({ task: '# Task\nread\n\n# Allowed tools\n- bash\n- mcp__files__read_text_file\n' }, known, ['files']);
  expect(c.allowedTools).toEqual(['bash', 'mcp__files__read_text_file']);
  expect(() => contractForSpec({ task: 'x', contract: { task: 'x', allowedTools: ['mcp__tracker__search'] } }, known, ['files']))
    .toThrow(/contract\.allowedTools\.0: unknown tool "mcp__tracker__search" \(known: bash, read_file, and mcp__SERVER__TOOL or mcp__SERVER__\* of this run's MCP servers: files\)/);
});
