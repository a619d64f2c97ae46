// FastAPI's error shapes: `{"detail": "..."}` for HTTP errors and `{"detail": [{loc, msg, type, ctx?}]}`
// (HTTPValidationError) for 422, with pydantic v2's error types and messages.
//
// FastAPI also echoes each item's `input`. It is left out here: for a connector config the input is the
// whole object, secrets included, and a 422 should never carry a secret back into a client's logs.
import type { Response } from 'express';
import type { z } from 'zod';

export type Loc = (string | number)[];

export interface DetailItem {
  loc: Loc;
  msg: string;
  type: string;
  ctx?: Record<string, unknown>;
}

export function sendDetail(res: Response, status: number, detail: string): void {
  res.status(status).json({ detail });
}

export function sendValidation(res: Response, items: DetailItem[]): void {
  res.status(422).json({ detail: items });
}

export function missing(loc: Loc): DetailItem {
  return { loc, msg: 'Field required', type: 'missing' };
}

/** Pydantic's rendering of the allowed values: `'a', 'b' or 'c'`. */
export function expectedList(values: readonly unknown[]): string {
  const quoted = values.map((v) => `'${String(v)}'`);
  if (quoted.length <= 1) return quoted.join('');
  return `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1] ?? ''}`;
}

/** Enum-typed fields (a `$ref` to an Enum in the OpenAPI document) fail with type `enum`. */
export function enumError(loc: Loc, values: readonly unknown[]): DetailItem {
  const expected = expectedList(values);
  return { loc, msg: `Input should be ${expected}`, type: 'enum', ctx: { expected } };
}

/** Inline `Literal[...]` fields (the schedule) fail with type `literal_error`. */
export function literalError(loc: Loc, values: readonly unknown[]): DetailItem {
  const expected = expectedList(values);
  return { loc, msg: `Input should be ${expected}`, type: 'literal_error', ctx: { expected } };
}

const UUID_HYPHENATED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const UUID_SIMPLE = /^[0-9a-f]{32}$/i;

/** Parses a uuid the way pydantic accepts it (hyphenated or 32 hex digits); returns the canonical form. */
export function parseUuid(value: string): string | null {
  if (UUID_HYPHENATED.test(value)) return value.toLowerCase();
  if (UUID_SIMPLE.test(value)) {
    const h = value.toLowerCase();
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  return null;
}

export function uuidError(loc: Loc, value: string): DetailItem {
  // The wording of the Rust `uuid` crate that pydantic-core reports through.
  const chars = Array.from(value);
  const badAt = chars.findIndex((c) => !/[0-9a-f-]/i.test(c));
  let reason: string;
  if (badAt >= 0) {
    reason = `invalid character: expected an optional prefix of \`urn:uuid:\` followed by [0-9a-fA-F-], found \`${chars[badAt] ?? ''}\` at ${badAt + 1}`;
  } else if (value.includes('-')) {
    const groups = value.split('-');
    const wanted = [8, 4, 4, 4, 12];
    const wrong = groups.findIndex((g, i) => g.length !== wanted[i]);
    reason = groups.length !== 5
      ? `invalid group count: expected 5, found ${groups.length}`
      : `invalid group length in group ${wrong}: expected ${wanted[wrong] ?? 0}, found ${groups[wrong]?.length ?? 0}`;
  } else {
    reason = `invalid length: expected length 32 for simple format, found ${chars.length}`;
  }
  return { loc, msg: `Input should be a valid UUID, ${reason}`, type: 'uuid_parsing', ctx: { error: reason } };
}

/** The model could not even start: the body is not an object. */
export function notAnObject(loc: Loc): DetailItem {
  return { loc, msg: 'Input should be a valid dictionary or object to extract fields from', type: 'model_attributes_type' };
}

/** Maps zod issues onto pydantic's error items, prefixing each path with `prefix` (e.g. `['body']`). */
export function zodToDetail(
  error: z.ZodError,
  input: unknown,
  prefix: Loc,
  literalFields: ReadonlySet<string> = new Set(),
): DetailItem[] {
  const items: DetailItem[] = [];
  for (const issue of error.issues) {
    const path = issue.path.filter((p): p is string | number => typeof p !== 'symbol');
    const loc = [...prefix, ...path];
    // zod reports an absent enum field as a bad value; pydantic calls every absent required field missing.
    if ((issue.code === 'invalid_type' || issue.code === 'invalid_value') && valueAt(input, path) === undefined) {
      items.push(missing(loc));
      continue;
    }
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const key of issue.keys) items.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
        break;
      case 'invalid_type':
        items.push(typeError(loc, issue.expected));
        break;
      case 'invalid_value': {
        const last = path[path.length - 1];
        const literal = typeof last === 'string' && literalFields.has(last);
        items.push(literal ? literalError(loc, issue.values) : enumError(loc, issue.values));
        break;
      }
      case 'invalid_format':
        if (issue.format === 'uuid') items.push(uuidError(loc, String(valueAt(input, path))));
        else items.push({ loc, msg: `Value error, ${issue.message}`, type: 'value_error' });
        break;
      case 'too_small':
        if (issue.origin === 'string') {
          const min = Number(issue.minimum);
          items.push({
            loc,
            msg: `String should have at least ${min} character${min === 1 ? '' : 's'}`,
            type: 'string_too_short',
            ctx: { min_length: min },
          });
        } else {
          items.push({ loc, msg: `Value error, ${issue.message}`, type: 'value_error' });
        }
        break;
      default:
        items.push({ loc, msg: `Value error, ${issue.message}`, type: 'value_error' });
    }
  }
  return items;
}

function typeError(loc: Loc, expected: string): DetailItem {
  switch (expected) {
    case 'string':
      return { loc, msg: 'Input should be a valid string', type: 'string_type' };
    case 'boolean':
      return { loc, msg: 'Input should be a valid boolean', type: 'bool_type' };
    case 'array':
      return { loc, msg: 'Input should be a valid list', type: 'list_type' };
    case 'record':
      return { loc, msg: 'Input should be a valid dictionary', type: 'dict_type' };
    case 'object':
      return notAnObject(loc);
    default:
      return { loc, msg: `Input should be a valid ${expected}`, type: `${expected}_type` };
  }
}

export function valueAt(input: unknown, path: readonly (string | number)[]): unknown {
  let cur: unknown = input;
  for (const key of path) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[key];
  }
  return cur;
}

/** `config.hosts[0].name` -> `['config', 'hosts', 0, 'name']`. */
export function fieldPath(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of field.split('.')) {
    const m = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) {
      out.push(part);
      continue;
    }
    if (m[1]) out.push(m[1]);
    for (const idx of (m[2] ?? '').matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
  }
  return out;
}
