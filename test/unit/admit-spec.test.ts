/**
 * Admission (issue 14, defect 6): one admitSpec() for the API, the worker and replays. Each check it
 * makes refuses with the field named; what the schema lets through and the sandbox would refuse
 * ("." names) is refused at the schema.
 */
import { loadConfig } from '../../src/config';
import { admitSpec } from '../../src/domain/admit-spec';
import { InvalidInputError } from '../../src/domain/errors';
import { RunSpec } from '../../src/domain/run-spec';
import { entriesFromFiles, packTar } from '../../src/sandbox/archive';
import { toolsFor } from '../../src/tools/registry';
import { makeTar } from '../support/make-tar';

const config = loadConfig({ CORRAL_MAX_BUDGET_LLM_CALLS: '50', CORRAL_MAX_MEMORY_MB: '1024', CORRAL_EGRESS_WILDCARDS: 'false' });
const ctx = { config, policyNames: ['default', 'strict'], toolNames: toolsFor(config).map((t) => t.name) };

async function refusal(spec: Record<string, unknown>, label = ''): Promise<InvalidInputError> {
  const err = await admitSpec(RunSpec.parse(spec), { ...ctx, label }).then(() => null, (e: unknown) => e);
  if (!(err instanceof InvalidInputError)) throw new Error(`expected a refusal, got ${String(err)}`);
  return err;
}

test.each([
  ['an unknown policy', { task: 'x', policy: 'retired' }, 'policy', /unknown policy "retired" \(this server has: default, strict\)/],
  ['a budget over the server ceiling', { task: 'x', budgets: { llmCalls: 51 } }, 'budgets.llmCalls', /above this server's maximum of 50/],
  ['memory over the server maximum', { task: 'x', limits: { memoryMb: 2048 } }, 'limits.memoryMb', /above this server's maximum/],
  ['a wildcard where wildcards are off', { task: 'x', egress: { allow: ['*.example.test'] } }, 'egress.allow.0', /wildcard entries are turned off/],
  ['a contract naming a tool this server lacks', { task: '# Task\nx\n\n# Allowed tools\n- curl\n' }, 'task', /unknown tool "curl"/],
])('%s is refused, naming %s', async (_name, spec, field, message) => {
  const err = await refusal(spec);
  expect(err.field).toBe(field);
  expect(err.message).toMatch(message);
});

test('tar entries are held to the names inline files must have; the label is put before the message', async () => {
  for (const name of ['a/\u202etxt.exe', 'b\u0085c', 'x/'.repeat(2) + 'y'.repeat(256)]) {
    const tarBase64 = (await makeTar([{ name, body: 'x' }])).toString('base64');
    const err = await refusal({ task: 'x', workspace: { tarBase64 } }, 'body: ');
    expect(err.field).toBe('workspace.tarBase64');
    expect(err.message).toMatch(/^body: workspace\.tarBase64: /);
  }
});

test('a spec that passes comes back with its limits and contract', async () => {
  const tarBase64 = (await packTar(entriesFromFiles({ 'src/a.py': 'print(1)\n' }))).toString('base64');
  const ok = await admitSpec(RunSpec.parse({ task: '# Task\nfix it\n\n# Done means\n- check: true\n', workspace: { tarBase64 } }), ctx);
  expect(ok.limits.memoryMb).toBeLessThanOrEqual(1024);
  expect(ok.contract.doneMeans).toHaveLength(1);
});

test.each(['.', './a.txt', 'a/./b.txt', 'a/.', 'a//b', '../x'])('the file name %j is refused by the schema, before any check or worker', (name) => {
  const r = RunSpec.safeParse({ task: 'x', workspace: { files: { [name]: 'x' } } });
  expect(r.success).toBe(false);
  expect(r.error!.issues[0]!.path).toEqual(['workspace', 'files', name]);
});
