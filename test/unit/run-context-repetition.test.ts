/** RepetitionTracker: a note at the 3rd identical call in a row and every repeat after; a different call resets. */
import { RepetitionTracker, canonicalArgs } from '../../src/run/repetition';

describe('RepetitionTracker', () => {
  it('fires at exactly the third identical call, and again at each further repeat', () => {
    const t = new RepetitionTracker();
    expect(t.observe('bash', '{"command":"npm test"}')).toBeNull();
    expect(t.observe('bash', '{"command":"npm test"}')).toBeNull();
    expect(t.observe('bash', '{"command":"npm test"}')).toBe(
      'Note: you have made this exact bash call 3 times in a row, and repeating it is unlikely to give a different result; change your approach instead of repeating it.',
    );
    expect(t.observe('bash', '{"command":"npm test"}')).toContain('4 times in a row');
  });

  it('treats key order and spacing as the same call', () => {
    const t = new RepetitionTracker();
    expect(t.observe('read_file', '{"path":"a.ts","maxBytes":100}')).toBeNull();
    expect(t.observe('read_file', '{ "maxBytes": 100, "path": "a.ts" }')).toBeNull();
    expect(t.observe('read_file', '{"path":"a.ts",\n"maxBytes":100}')).toContain('3 times');
    expect(canonicalArgs('{"b":{"y":1,"x":[{"d":1,"c":2}]},"a":0}')).toBe('{"a":0,"b":{"x":[{"c":2,"d":1}],"y":1}}');
    expect(canonicalArgs('  ')).toBe('{}');
    expect(canonicalArgs(' not json ')).toBe('not json');
  });

  it('resets on a different call: other args or another tool', () => {
    const t = new RepetitionTracker();
    t.observe('bash', '{"command":"ls"}');
    t.observe('bash', '{"command":"ls"}');
    expect(t.observe('bash', '{"command":"ls -la"}')).toBeNull();
    expect(t.observe('bash', '{"command":"ls"}')).toBeNull();
    expect(t.observe('bash', '{"command":"ls"}')).toBeNull();
    expect(t.observe('list_files', '{"command":"ls"}')).toBeNull();
    expect(t.observe('bash', '{"command":"ls"}')).toBeNull();
    expect(t.observe('bash', '{"command":"ls"}')).toBeNull();
    expect(t.observe('bash', '{"command":"ls"}')).toContain('3 times in a row');
  });

  it('compares invalid JSON as text, and honours a custom threshold', () => {
    const t = new RepetitionTracker({ threshold: 2 });
    expect(t.observe('bash', '{oops')).toBeNull();
    expect(t.observe('bash', ' {oops ')).toContain('2 times in a row');
    expect(t.observe('bash', '{oops2')).toBeNull();
  });
});
