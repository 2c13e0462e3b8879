/** The docker gate's reading of JSON as the engine's Go decoder reads it (go-json.ts, shape.ts). */
import { goFoldEquals, parseGoJson, type JObject } from '../../src/docker-gate/go-json';
import { bool, fieldOf, readObject, str, type Refusal } from '../../src/docker-gate/shape';

test('Go\'s key matching: ASCII case, and only ſ (U+017F) and the Kelvin sign (U+212A) from outside ASCII', () => {
  for (const [name, key] of [['NetworkMode', 'networkmode'], ['NetworkMode', 'NETWORKMODE'], ['NetworkMode', 'Networ\u212aMode'], ['SecurityOpt', '\u017fecurityOpt'],
    ['Ulimits', 'ulimit\u017f'], ['Dns', 'dn\u017f'], ['k', '\u212a'], ['K', '\u212a'], ['S', '\u017f']]) expect(goFoldEquals(name!, key!)).toBe(true);
  for (const [name, key] of [['Image', '\u0130mage'], ['Image', '\u0131mage'], ['NetworkMode', 'NetworkMod'], ['NetworkMode', 'NetworkModee'], ['Network_Mode', 'Network-Mode'],
    ['NetworkMode', 'Net\u0432orkMode'], ['User', 'U\u017fer\u0000'], ['Tty', 'T\u1e6dy'], ['A', '\u00c0'], ['Cmd', 'Cm\u0064\u0307']]) expect(goFoldEquals(name!, key!)).toBe(false);
  // a non-letter must match exactly (Go's asciiEqualFold): '_' is not '\x7f' though they differ in bit 0x20 only
  expect(goFoldEquals('A_B', 'a\x7fb')).toBe(false);
  expect(() => goFoldEquals('Ä', 'ä')).toThrow(/not ASCII/);
});

test('an exact name wins over a folded one; otherwise the first field that folds equal (Go\'s order)', () => {
  expect(fieldOf(['Abc', 'ABC'], 'ABC')).toBe('ABC');
  expect(fieldOf(['Abc', 'ABC'], 'abc')).toBe('Abc');
  expect(fieldOf(['Abc'], 'x')).toBeUndefined();
});

test('parsing keeps every entry (repeats included) and refuses what the engine would read otherwise', () => {
  const v = parseGoJson('{"a":1,"A":2,"a":3,"n":{"x":[true,null,"s"]}}') as JObject;
  expect(v.entries.map(([k]) => k)).toEqual(['a', 'A', 'a', 'n']);
  for (const bad of ['{"a":1}{"b":2}', '\ufeff{}', '{"a":"\\ud800"}', '{"a":1,}', '[1,]', '{"a" 1}', '"\u0001"', '01', '{"a":tru}', `${'['.repeat(70)}${']'.repeat(70)}`]) {
    expect(() => parseGoJson(bad)).toThrow();
  }
  expect(parseGoJson(' {"\\u004eetworkMode": 1e3} ')).toEqual({ kind: 'object', entries: [['NetworkMode', 1000]] });
});

test('an object shape: unknown keys in any spelling, repeats of one field, and non-empty unused fields are refused, each by its rule', () => {
  const shape = { fields: { User: str('exec-user'), Tty: bool('exec-body', { only: false }) }, dropped: { Detach: 'exec-body' }, rule: 'exec-body' };
  const read = (t: string) => readObject(parseGoJson(t), '', shape);
  const rule = (t: string) => {
    try {
      read(t);
      return 'passed';
    } catch (err) {
      return (err as Refusal).rule;
    }
  };
  expect(read('{"u\u017fer":"1:1","TTY":false,"detach":false}')).toEqual({ User: '1:1', Tty: false });
  expect(rule('{"User":"1:1","user":"0:0"}')).toBe('duplicate-field');
  expect(rule('{"User":"1:1","User":"0:0"}')).toBe('duplicate-field');
  expect(rule('{"Users":"1:1"}')).toBe('unknown-field');
  expect(rule('{"Detach":true}')).toBe('exec-body');
  expect(rule('{"Tty":true}')).toBe('exec-body');
});
