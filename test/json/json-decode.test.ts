import { describe, expect, it } from 'vitest';
import { decodeJson } from '../../src/json-decode.js';

// Expected positions and messages are CPython 3.11's `json.loads` (C scanner), the parser behind FastAPI.
const PYTHON: [string, number, string][] = [
  ['', 0, 'Expecting value'],
  ['   ', 3, 'Expecting value'],
  ['{', 1, 'Expecting property name enclosed in double quotes'],
  ['{"a"', 4, "Expecting ':' delimiter"],
  ['{"a" 1}', 5, "Expecting ':' delimiter"],
  ['{"a": }', 6, 'Expecting value'],
  ['{"a": 1,}', 8, 'Expecting property name enclosed in double quotes'],
  ['{"a": 1 "b": 2}', 8, "Expecting ',' delimiter"],
  ['[1,]', 3, 'Expecting value'],
  ['[1 2]', 3, "Expecting ',' delimiter"],
  ['{a: 1}', 1, 'Expecting property name enclosed in double quotes'],
  ['{"a": "x', 6, 'Unterminated string starting at'],
  ['{"a": "\\q"}', 7, 'Invalid \\escape'],
  ['{"a": "\\u12"}', 8, 'Invalid \\uXXXX escape'],
  ['{"a": "line\nbreak"}', 11, 'Invalid control character at'],
  ['{} x', 3, 'Extra data'],
  ['01', 1, 'Extra data'],
  ['tru', 0, 'Expecting value'],
  ['{"é": ü}', 6, 'Expecting value'],
  ['{"a": [1, {"b": nul}]}', 16, 'Expecting value'],
  ['"\\ud83d\\ude00" 1', 15, 'Extra data'],
  // Python counts code points: the emoji is one, not two UTF-16 units.
  ['{"😀": x}', 6, 'Expecting value'],
];

describe('decodeJson', () => {
  for (const [text, pos, msg] of PYTHON) {
    it(`${JSON.stringify(text)} -> ${pos} ${msg}`, () => {
      expect(decodeJson(text)).toEqual({ ok: false, failure: { pos, msg } });
    });
  }

  it('reports NaN and Infinity, which Python would take but JSON cannot carry, where they stand', () => {
    expect(decodeJson('{"a": NaN}')).toEqual({ ok: false, failure: { pos: 6, msg: 'Expecting value' } });
    expect(decodeJson('[1, -Infinity]')).toEqual({ ok: false, failure: { pos: 4, msg: 'Expecting value' } });
  });

  it('returns the value of valid JSON', () => {
    expect(decodeJson(' {"a": [1, 2.5e3, "x\\n", null, true]} ')).toEqual({ ok: true, value: { a: [1, 2500, 'x\n', null, true] } });
  });
});
