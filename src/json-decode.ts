// FastAPI reports a malformed JSON body as 422 `{"loc": ["body", <pos>], "type": "json_invalid"}`, where
// pos and the message come from Python's `json` module. V8's JSON.parse errors carry neither in a stable
// form, so this scanner walks the text the way CPython's json/decoder.py does and reports the same
// position (in code points) and message (those of the C accelerator, which servers run).

export interface JsonDecodeFailure {
  /** Position in code points, as Python counts. */
  pos: number;
  msg: string;
}

class DecodeError extends Error {
  constructor(readonly msg: string, readonly at: number) {
    super(msg);
  }
}

const WS = new Set([' ', '\t', '\n', '\r']);
const NUMBER = /(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?/y;

/** Parses like `json.loads`; returns the value, or the failure Python would report. */
export function decodeJson(text: string): { ok: true; value: unknown } | { ok: false; failure: JsonDecodeFailure } {
  try {
    const value: unknown = JSON.parse(text);
    return { ok: true, value };
  } catch {
    // fall through to locate the error
  }
  try {
    let end = skipWs(text, 0);
    end = scanValue(text, end);
    end = skipWs(text, end);
    if (end !== text.length) throw new DecodeError('Extra data', end);
    // Unreachable while the scanner is no more lenient than JSON.parse; kept so a failure is always reported.
    throw new DecodeError('Expecting value', 0);
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    return { ok: false, failure: { pos: Array.from(text.slice(0, e.at)).length, msg: e.msg } };
  }
}

function skipWs(s: string, i: number): number {
  while (i < s.length && WS.has(s[i] as string)) i++;
  return i;
}

function scanValue(s: string, i: number): number {
  const c = s[i];
  if (c === '"') return scanString(s, i + 1);
  if (c === '{') return scanObject(s, i + 1);
  if (c === '[') return scanArray(s, i + 1);
  // Python also takes NaN and Infinity; JSON.parse cannot, so they are reported where they stand.
  for (const word of ['null', 'true', 'false']) {
    if (s.startsWith(word, i)) return i + word.length;
  }
  NUMBER.lastIndex = i;
  const m = NUMBER.exec(s);
  if (m) return i + m[0].length;
  throw new DecodeError('Expecting value', i);
}

function scanString(s: string, i: number): number {
  const begin = i - 1;
  for (;;) {
    if (i >= s.length) throw new DecodeError('Unterminated string starting at', begin);
    const c = s[i] as string;
    if (c === '"') return i + 1;
    if (c === '\\') {
      const esc = s[i + 1];
      if (esc === undefined) throw new DecodeError('Unterminated string starting at', begin);
      if (esc === 'u') {
        if (!/^[0-9a-fA-F]{4}$/.test(s.slice(i + 2, i + 6))) throw new DecodeError('Invalid \\uXXXX escape', i + 1);
        i += 6;
        continue;
      }
      if (!'"\\/bfnrt'.includes(esc)) throw new DecodeError('Invalid \\escape', i);
      i += 2;
      continue;
    }
    if (c.charCodeAt(0) < 0x20) throw new DecodeError('Invalid control character at', i);
    i++;
  }
}

function scanObject(s: string, i: number): number {
  i = skipWs(s, i);
  if (s[i] === '}') return i + 1;
  if (s[i] !== '"') throw new DecodeError('Expecting property name enclosed in double quotes', i);
  for (;;) {
    i = scanString(s, i + 1);
    i = skipWs(s, i);
    if (s[i] !== ':') throw new DecodeError("Expecting ':' delimiter", i);
    i = skipWs(s, i + 1);
    i = scanValue(s, i);
    i = skipWs(s, i);
    const next = s[i];
    if (next === '}') return i + 1;
    if (next !== ',') throw new DecodeError("Expecting ',' delimiter", i);
    i = skipWs(s, i + 1);
    if (s[i] !== '"') throw new DecodeError('Expecting property name enclosed in double quotes', i);
  }
}

function scanArray(s: string, i: number): number {
  i = skipWs(s, i);
  if (s[i] === ']') return i + 1;
  for (;;) {
    i = scanValue(s, i);
    i = skipWs(s, i);
    const next = s[i];
    if (next === ']') return i + 1;
    if (next !== ',') throw new DecodeError("Expecting ',' delimiter", i);
    i = skipWs(s, i + 1);
  }
}
