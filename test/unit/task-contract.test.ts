/** The task contract: Markdown and JSON forms, their errors, and the message the model gets. */
import { InvalidInputError } from '../../src/domain/errors';
import { RunSpec } from '../../src/domain/run-spec';
import {
  TaskContractJson,
  contractForSpec,
  contractFromJson,
  doneChecks,
  doneCriteria,
  parseTaskMarkdown,
  renderContractForModel,
} from '../../src/domain/task-contract';

const TOOLS = ['bash', 'read_file', 'write_file', 'edit_file', 'list_files'] as const;

function parseError(text: string): InvalidInputError {
  try {
    parseTaskMarkdown(text, TOOLS);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return err as InvalidInputError;
  }
  throw new Error('expected parseTaskMarkdown to throw');
}

const FULL = [
  '# Task',
  'Fix the failing test in `src/sum.js`.',
  '',
  'Keep the change small.',
  '',
  '# Allowed tools',
  '- `bash`',
  '* read_file',
  '- edit_file',
  '',
  '# Cannot do',
  '- change the tests',
  '- add dependencies,',
  '  even dev ones',
  '',
  '# Done means',
  '- check: npm test',
  '- check: `node -e "require(\'./src/sum\')"`',
  '- the fix is explained in one paragraph',
].join('\n');

describe('parseTaskMarkdown', () => {
  it('a text without level-1 headings is a plain task', () => {
    const text = '  Count the lines of README.md.\n\n## Notes\nUse wc.\n#not-a-heading\n';
    expect(parseTaskMarkdown(text, TOOLS)).toEqual({
      task: 'Count the lines of README.md.\n\n## Notes\nUse wc.\n#not-a-heading',
      allowedTools: null,
      cannotDo: [],
      doneMeans: [],
    });
  });

  it('a "# comment" inside a fenced code block is task text, not a section', () => {
    const text = 'Run this:\n```bash\n# Install\nnpm ci\n```\n';
    expect(parseTaskMarkdown(text, TOOLS).task).toBe('Run this:\n```bash\n# Install\nnpm ci\n```');
    const sectioned = '# Task\nRun this:\n~~~\n# Constraints\n~~~\n# Cannot do\n- push';
    expect(parseTaskMarkdown(sectioned, TOOLS)).toMatchObject({ task: 'Run this:\n~~~\n# Constraints\n~~~', cannotDo: ['push'] });
  });

  it('parses all four sections: task text, tools (backticks stripped), cannot-do (continuations joined), checks vs criteria', () => {
    expect(parseTaskMarkdown(FULL, TOOLS)).toEqual({
      task: 'Fix the failing test in `src/sum.js`.\n\nKeep the change small.',
      allowedTools: ['bash', 'read_file', 'edit_file'],
      cannotDo: ['change the tests', 'add dependencies, even dev ones'],
      doneMeans: [
        { kind: 'check', command: 'npm test' },
        { kind: 'check', command: 'node -e "require(\'./src/sum\')"' },
        { kind: 'criterion', text: 'the fix is explained in one paragraph' },
      ],
    });
  });

  it('section names are case-insensitive and trimmed; sections may come in any order; CRLF is fine', () => {
    const text = '#   done MEANS  \r\n- Check: make\r\n#  TASK #\r\nbuild it\r\n# allowed   tools\r\n- bash\r\n- bash\r\n';
    expect(parseTaskMarkdown(text, TOOLS)).toEqual({
      task: 'build it', allowedTools: ['bash'], cannotDo: [], doneMeans: [{ kind: 'check', command: 'make' }],
    });
  });

  it('an unknown section is an error naming its line and the known sections', () => {
    const err = parseError('# Task\nDo it.\n\n# Cannot do\n- x\n\n# Constraints\n- y');
    expect(err.message).toBe('task: line 7: unknown section "# Constraints" (known: Task, Allowed tools, Cannot do, Done means)');
    expect(err.field).toBe('task');
    expect(err.code).toBe('invalid_input');
  });

  it('an unknown tool is an error naming its line and listing the known tools', () => {
    const err = parseError('# Task\nDo it.\n# Allowed tools\n- bash\n- `web_search`');
    expect(err.message).toBe('task: line 5: unknown tool "web_search" (known: bash, read_file, write_file, edit_file, list_files)');
  });

  it('an empty task is an error, plain or sectioned', () => {
    expect(parseError('   \n\n').message).toBe('task: the task is empty');
    expect(parseError('# Task\n\n# Done means\n- check: true').message).toBe('task: line 1: "# Task" is empty');
  });

  it('a missing # Task section is an error', () => {
    expect(parseError('# Cannot do\n- push').message).toMatch(/^task: no "# Task" section/);
  });

  it('a duplicate section is an error naming both lines', () => {
    expect(parseError('# Task\na\n# Cannot do\n- x\n# cannot do\n- y').message)
      .toBe('task: line 5: section "# Cannot do" appears twice (first on line 3)');
  });

  it('text before the first section, prose in a list section, empty lists and bare "check:" are errors', () => {
    expect(parseError('Hello\n# Task\na').message).toBe('task: line 1: text before the first section; put it under "# Task"');
    expect(parseError('# Task\na\n# Cannot do\nno pushing').message)
      .toBe('task: line 4: "# Cannot do" takes a list: start each item with "- " or "* " (got "no pushing")');
    expect(parseError('# Task\na\n# Allowed tools\n').message).toMatch(/^task: line 3: "# Allowed tools" lists no tools \(omit the section/);
    expect(parseError('# Task\na\n# Done means\n- check:   ').message).toBe('task: line 4: "check:" needs a shell command after it');
  });
});

describe('JSON form', () => {
  it('contractFromJson: checks vs criteria, tool names checked, defaults', () => {
    expect(contractFromJson({ task: ' Fix it ', allowedTools: ['`bash`', 'read_file'], doneMeans: ['check: npm test', 'explained'] }, TOOLS)).toEqual({
      task: 'Fix it',
      allowedTools: ['bash', 'read_file'],
      cannotDo: [],
      doneMeans: [{ kind: 'check', command: 'npm test' }, { kind: 'criterion', text: 'explained' }],
    });
    expect(contractFromJson({ task: 'x' }, TOOLS)).toEqual({ task: 'x', allowedTools: null, cannotDo: [], doneMeans: [] });
  });

  it('contractFromJson errors name the field under contract.', () => {
    const attempt = (json: unknown) => {
      try {
        contractFromJson(json, TOOLS);
      } catch (err) {
        return err as InvalidInputError;
      }
      throw new Error('expected an error');
    };
    const unknownTool = attempt({ task: 'x', allowedTools: ['bash', 'curl'] });
    expect(unknownTool.message).toBe('contract.allowedTools.1: unknown tool "curl" (known: bash, read_file, write_file, edit_file, list_files)');
    expect(unknownTool.field).toBe('contract.allowedTools.1');
    expect(attempt({ task: '  ' })).toMatchObject({ field: 'contract.task', message: 'contract.task: must not be empty' });
    expect(attempt({ task: 'x', extra: 1 }).field).toBe('contract.extra');
    expect(attempt({ task: 'x', extra: 1 }).message).toMatch(/extra/);
    expect(attempt({ task: 'x', doneMeans: ['check: '] })).toMatchObject({ field: 'contract.doneMeans.0' });
    expect(attempt({ task: 'x', allowedTools: [] }).message).toMatch(/omit it to allow all/);
  });

  it('RunSpec takes an optional contract, checking only its shape', () => {
    const spec = RunSpec.parse({ task: 'Fix it', contract: { task: 'Fix it', allowedTools: ['no_such_tool'], doneMeans: ['check: make'] } });
    expect(spec.contract).toEqual({ task: 'Fix it', allowedTools: ['no_such_tool'], doneMeans: ['check: make'] });
    expect(RunSpec.parse({ task: 'x' }).contract).toBeUndefined();
    expect(RunSpec.safeParse({ task: 'x', contract: { task: 'x', oops: true } }).success).toBe(false);
    expect(TaskContractJson.safeParse({ task: 'x', doneMeans: ['check:'] }).success).toBe(false);
  });

  it('contractForSpec: the contract wins over sections in task; without one, task is parsed', () => {
    const withContract = contractForSpec({ task: '# Task\nignored\n# Cannot do\n- y', contract: { task: 'from json', cannotDo: ['x'] } }, TOOLS);
    expect(withContract).toEqual({ task: 'from json', allowedTools: null, cannotDo: ['x'], doneMeans: [] });
    expect(contractForSpec({ task: '# Task\na\n# Cannot do\n- y' }, TOOLS).cannotDo).toEqual(['y']);
  });
});

describe('renderContractForModel', () => {
  it('the task, then "You must not:", then "Done means:" with checks explained', () => {
    const c = parseTaskMarkdown(FULL, TOOLS);
    expect(renderContractForModel(c)).toBe([
      'Fix the failing test in `src/sum.js`.',
      '',
      'Keep the change small.',
      '',
      'You must not:',
      '- change the tests',
      '- add dependencies, even dev ones',
      '',
      'Done means:',
      '- `npm test` must exit 0 — it will be run when you say you are done',
      '- `node -e "require(\'./src/sum\')"` must exit 0 — it will be run when you say you are done',
      '- the fix is explained in one paragraph',
    ].join('\n'));
    expect(doneChecks(c)).toEqual(['npm test', 'node -e "require(\'./src/sum\')"']);
    expect(doneCriteria(c)).toEqual(['the fix is explained in one paragraph']);
  });

  it('a plain task renders as itself', () => {
    expect(renderContractForModel(parseTaskMarkdown('List the files.', TOOLS))).toBe('List the files.');
  });
});
