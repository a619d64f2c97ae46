// The logger's field-name redaction, field by field: whatever object a caller logs, a value under a secret's
// name comes out as [redacted], wherever it sits. The values here are never registered with src/redact.ts, so
// the value scan of each line cannot hide a field the names missed.
import { describe, expect, it } from 'vitest';
import { REDACTED, createLogger } from '../../src/log.js';

// The names the logger promises to censor (src/log.ts); a name dropped there fails here.
const SECRET_FIELDS = [
  'authorization', 'cookie', 'refresh_token', 'access_token', 'token', 'app_secret', 'app_key', 'api_key',
  'client_secret', 'code_verifier', 'refreshToken', 'accessToken', 'appSecret', 'appKey', 'apiKey',
  'clientSecret', 'storeKey', 'store_key', 'password', 'secret', 'secrets', 'grant',
];
const SECRET_HEADERS = ['authorization', 'cookie', 'set-cookie', 'service-api-key', 'unstructured-api-key', 'proxy-authorization'];
const CONTAINERS = ['config', 'form', 'body'];
const EXTRA_HEADER = 'X-Workspace-Key';

let serial = 0;
/** A value no other test registers, unique per call, so each leak names its field. */
const canary = (where: string) => `LOGCANARY-${where}-${(serial += 1)}-q8Zr`;

function capture(): { log: ReturnType<typeof createLogger>; lines: string[]; records: () => Record<string, unknown>[] } {
  const lines: string[] = [];
  const log = createLogger({ level: 'trace', destination: { write: (l: string) => void lines.push(l) }, secretHeaders: [EXTRA_HEADER] });
  return { log, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** `value` at `path` inside `record`, or a marker when the path is not there. */
function at(record: unknown, path: readonly (string | number)[]): unknown {
  let current = record;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return '<missing>';
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

/** An object holding `value` at `path` (numbers make arrays). */
function nest(path: readonly (string | number)[], value: unknown): Record<string, unknown> {
  let inner: unknown = value;
  for (let i = path.length - 1; i >= 0; i -= 1) {
    const key = path[i] as string | number;
    if (typeof key === 'number') {
      const list: unknown[] = [{ other: 'kept' }];
      list[key] = inner;
      inner = list;
    } else inner = { [key]: inner, other: 'kept' };
  }
  return inner as Record<string, unknown>;
}

/** Logs `value` at each path; expects every one censored in place and no trace of the value in the line. */
function expectCensored(paths: readonly (readonly (string | number)[])[]): void {
  const { log, lines, records } = capture();
  const values = paths.map((p) => canary(p.join('.')));
  paths.forEach((p, i) => log.info(nest(p, values[i]), 'logged'));
  expect(lines).toHaveLength(paths.length);
  const leaked = values.filter((v, i) => (lines[i] as string).includes(v));
  expect(leaked).toEqual([]);
  const notInPlace = paths.filter((p, i) => at(records()[i], p) !== REDACTED).map((p) => p.join('.'));
  expect(notInPlace).toEqual([]);
  // Next to it, what is not a secret stays.
  paths.forEach((p, i) => expect(at(records()[i], [...p.slice(0, -1), 'other'])).toBe('kept'));
}

describe('the logger censors by field name', () => {
  it('each secret field at depth 1, 2 and 3', () => {
    expectCensored(SECRET_FIELDS.flatMap((f) => [[f], ['request', f], ['request', 'grant_form', f]]));
  });

  it('each secret field inside arrays, up to depth 3 counting the index', () => {
    expectCensored(SECRET_FIELDS.flatMap((f) => [['items', 0, f], ['items', 2, f]]));
    const { log, lines } = capture();
    const value = canary('list');
    log.info({ profiles: [{ name: 'a' }, { name: 'b', refresh_token: value }] }, 'listed');
    expect(lines[0]).not.toContain(value);
    expect(JSON.parse(lines[0] as string)).toMatchObject({ profiles: [{ name: 'a' }, { name: 'b', refresh_token: REDACTED }] });
  });

  it('configs, forms and bodies whole, at depth 1 and 2', () => {
    expectCensored(CONTAINERS.flatMap((c) => [[c], ['request', c]]));
    const { log, lines } = capture();
    const value = canary('form');
    log.info({ request: { form: { grant_type: 'refresh_token', refresh_token: value } } }, 'sent');
    expect(JSON.parse(lines[0] as string)).toMatchObject({ request: { form: REDACTED } });
  });

  it('each secret header, and the configured one given in any case, at depth 1, 2 and 3', () => {
    const names = [...SECRET_HEADERS, EXTRA_HEADER.toLowerCase()];
    expectCensored(names.flatMap((h) => [['headers', h], ['request', 'headers', h], ['response', 'request', 'headers', h]]));
    const { log, lines } = capture();
    log.info({ headers: { accept: 'application/json', 'content-type': 'text/plain' } }, 'sent');
    expect(JSON.parse(lines[0] as string)).toMatchObject({ headers: { accept: 'application/json', 'content-type': 'text/plain' } });
  });

  it('an authorization code at the top, and leaves our own error codes readable', () => {
    expectCensored([['code']]);
    const { log, records } = capture();
    log.info({ profile: 'docs', err: Object.assign(new Error('refused'), { code: 'OAUTH_INVALID_GRANT' }), status: { code: 'E_LOCKED' } }, 'failed');
    expect(records()[0]).toMatchObject({ profile: 'docs', err: { code: 'OAUTH_INVALID_GRANT', message: 'refused' }, status: { code: 'E_LOCKED' } });
  });

  it('the fields of an error under err, given as a field or as the first argument, with its cause', () => {
    for (const field of SECRET_FIELDS) {
      const { log, lines, records } = capture();
      const own = canary(`err.${field}`);
      const nested = canary(`err.detail.${field}`);
      const body = canary('err.body');
      const inCause = canary(`err.cause.${field}`);
      const cause = Object.assign(new Error('the cause'), { [field]: canary('cause-own') });
      const error = Object.assign(new Error('renewal failed', { cause }), { [field]: own, detail: { [field]: nested }, body: { text: body } });
      // A cause that is no error is printed as a field (set as one: the constructor's `cause` is not enumerable).
      const plainCause = Object.assign(new Error('renewal failed again'), { code: 'E_X', cause: { [field]: inCause, why: 'reasons' } });
      log.error({ err: error, profile: 'docs' }, 'renewal failed');
      log.error(error);
      log.error(plainCause, 'with a plain cause');
      for (const line of lines) for (const v of [own, nested, body, inCause, cause[field as keyof typeof cause] as string]) expect(line).not.toContain(v);
      const [first, second, third] = records();
      for (const record of [first, second]) {
        expect(record).toMatchObject({ err: { type: 'Error', [field]: REDACTED, detail: { [field]: REDACTED }, body: REDACTED } });
        expect(String(at(record, ['err', 'message']))).toBe('renewal failed: the cause');
        expect(String(at(record, ['err', 'stack']))).toContain('caused by: Error: the cause');
      }
      expect(third).toMatchObject({ err: { code: 'E_X', cause: { [field]: REDACTED, why: 'reasons' } }, msg: 'with a plain cause' });
    }
  });

  it('the bindings of a child logger', () => {
    const { log, lines, records } = capture();
    const top = canary('binding');
    const deep = canary('binding.deep');
    log.child({ component: 'redis', password: top, target: { url: 'redis://host', options: { password: deep } } }).info('connected');
    expect(lines[0]).not.toContain(top);
    expect(lines[0]).not.toContain(deep);
    expect(records()[0]).toMatchObject({ component: 'redis', password: REDACTED, target: { url: 'redis://host', options: { password: REDACTED } } });
    // A child's child, and what it logs.
    const inner = canary('grandchild');
    const logged = canary('grandchild.logged');
    log.child({ component: 'cron' }).child({ job: { token: inner } }).warn({ request: { apiKey: logged } }, 'tick');
    expect(lines[1]).not.toContain(inner);
    expect(lines[1]).not.toContain(logged);
    expect(records()[1]).toMatchObject({ component: 'cron', job: { token: REDACTED }, request: { apiKey: REDACTED } });
  });

  it('leaves the object the caller logged as it was', () => {
    const { log } = capture();
    const value = canary('kept');
    const error = Object.assign(new Error('x'), { token: value });
    const logged = { token: value, request: { headers: { authorization: value }, list: [{ secret: value }] }, err: error };
    log.info(logged, 'logged');
    expect(logged).toEqual({ token: value, request: { headers: { authorization: value }, list: [{ secret: value }] }, err: error });
    expect(error.token).toBe(value);
  });
});

describe('the logger censors beyond what fixed paths reached', () => {
  it('header names in any case', () => {
    const { log, lines, records } = capture();
    const values = ['Authorization', 'COOKIE', 'Service-Api-Key', 'X-WORKSPACE-KEY', 'Set-Cookie'].map((h) => [h, canary(h)] as const);
    log.info({ request: { headers: Object.fromEntries(values) } }, 'sent');
    for (const [, v] of values) expect(lines[0]).not.toContain(v);
    expect(at(records()[0], ['request', 'headers', 'Authorization'])).toBe(REDACTED);
  });

  it('secret fields deeper than three levels, in any case, and through a cycle', () => {
    const { log, lines } = capture();
    const deep = canary('deep');
    const upper = canary('upper');
    const cyclic: Record<string, unknown> = { secret: canary('cyclic') };
    cyclic.self = cyclic;
    log.info({ a: { b: { c: { d: [{ refresh_token: deep }] } } }, request: { ACCESS_TOKEN: upper }, loop: cyclic }, 'logged');
    expect(lines).toHaveLength(1);
    for (const v of [deep, upper, cyclic.secret as string]) expect(lines[0]).not.toContain(v);
  });

  it('the errors of an AggregateError', () => {
    const { log, lines } = capture();
    const value = canary('aggregate');
    log.error({ err: new AggregateError([Object.assign(new Error('one'), { token: value })], 'several') }, 'failed');
    expect(lines[0]).toContain('several');
    expect(lines[0]).not.toContain(value);
  });
});
