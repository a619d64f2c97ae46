// Every error family's kind, the exit code and daemon decision the one table gives each kind, and what the
// daemon decides about each family. The classifyFailure expectations were written from the class-and-code
// matching it did before errors carried a kind, and the exit codes from the CLI's before, so that moving the
// decision onto the errors cannot change what the daemon does or how the CLI exits.
import { describe, expect, it } from 'vitest';
import { SecretStoreError, SECRET_STORE_ERROR_CODES } from '../../src/credentials/errors.js';
import { ERROR_KIND_OUTCOMES, ExitCode, SyncauthError, ValidationError, type ErrorKind } from '../../src/errors.js';
import * as root from '../../src/index.js';
import { classifyFailure, type Failure } from '../../src/daemon/classify.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { InterruptedError } from '../../src/cli/interrupt.js';
import { OAuthError, OAUTH_ERROR_KINDS, type OAuthErrorCode } from '../../src/oauth/errors.js';
import { ProfileStoreError } from '../../src/profile/errors.js';
import { TemplateError } from '../../src/publish/template.js';
import { errorFromResponse, ServiceError, withHint, type RequestContext } from '../../src/service/errors.js';

const COORDINATOR_HINT = 'check that Redis is running and reachable at --redis-url; reconciles resume by themselves once it is (renewals never stopped)';

function errno(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code, syscall: 'connect', errno: -104 });
}

const cases: { name: string; error: unknown; failure: Failure }[] = [
  { name: 'coordinator unavailable', error: new CoordinatorUnavailableError('redis is down'),
    failure: { kind: 'coordinator', code: 'COORDINATOR_UNAVAILABLE', message: 'redis is down', hint: COORDINATOR_HINT } },

  { name: 'OAuth invalid grant', error: new OAuthError('OAUTH_INVALID_GRANT', 'grant revoked', { hint: 'run setup', retryAfterMs: 5 }),
    failure: { kind: 'terminal', code: 'OAUTH_INVALID_GRANT', message: 'grant revoked', hint: 'run setup' } },
  { name: 'OAuth invalid access token', error: new OAuthError('OAUTH_INVALID_ACCESS_TOKEN', 'token invalid'),
    failure: { kind: 'terminal', code: 'OAUTH_INVALID_ACCESS_TOKEN', message: 'token invalid' } },
  { name: 'OAuth invalid client', error: new OAuthError('OAUTH_INVALID_CLIENT', 'bad app secret', { retryAfterMs: 9 }),
    failure: { kind: 'configuration', code: 'OAUTH_INVALID_CLIENT', message: 'bad app secret' } },
  { name: 'OAuth rate limited, with Retry-After', error: new OAuthError('OAUTH_RATE_LIMITED', 'slow down', { retryAfterMs: 30_000 }),
    failure: { kind: 'rate_limited', code: 'OAUTH_RATE_LIMITED', message: 'slow down', retryAfterMs: 30_000 } },
  { name: 'OAuth rate limited, no Retry-After', error: new OAuthError('OAUTH_RATE_LIMITED', 'slow down'),
    failure: { kind: 'rate_limited', code: 'OAUTH_RATE_LIMITED', message: 'slow down' } },
  { name: 'OAuth server error', error: new OAuthError('OAUTH_SERVER_ERROR', 'dropbox 503', { retryAfterMs: 2_000 }),
    failure: { kind: 'transient', code: 'OAUTH_SERVER_ERROR', message: 'dropbox 503', retryAfterMs: 2_000 } },
  { name: 'OAuth timeout', error: new OAuthError('OAUTH_TIMEOUT', 'no answer'),
    failure: { kind: 'transient', code: 'OAUTH_TIMEOUT', message: 'no answer' } },
  { name: 'OAuth denied', error: new OAuthError('OAUTH_ABORTED', 'stopped', { retryAfterMs: 7 }),
    failure: { kind: 'transient', code: 'OAUTH_ABORTED', message: 'stopped', retryAfterMs: 7 } },
  { name: 'OAuth protocol', error: new OAuthError('OAUTH_BAD_RESPONSE', 'not json'),
    failure: { kind: 'transient', code: 'OAUTH_BAD_RESPONSE', message: 'not json' } },
  { name: 'OAuth kind set by the throw site', error: new OAuthError('OAUTH_SERVER_ERROR', 'bad key', { kind: 'configuration', retryAfterMs: 3 }),
    failure: { kind: 'configuration', code: 'OAUTH_SERVER_ERROR', message: 'bad key' } },
  { name: 'OAuth terminal set by the throw site', error: new OAuthError('OAUTH_HTTP_ERROR', 'gone', { kind: 'terminal' }),
    failure: { kind: 'terminal', code: 'OAUTH_HTTP_ERROR', message: 'gone' } },

  { name: 'validation', error: new ValidationError([{ field: 'config.port', message: 'is not a port' }], { hint: 'use 1-65535' }),
    failure: { kind: 'configuration', code: 'SYNCAUTH_INVALID_INPUT', message: 'config.port: is not a port', hint: 'use 1-65535' } },

  { name: 'profile lock timeout', error: new ProfileStoreError('PROFILE_LOCK_TIMEOUT', 'lock busy', { path: '/x/lock' }),
    failure: { kind: 'transient', code: 'PROFILE_LOCK_TIMEOUT', message: 'lock busy' } },
  { name: 'profile corrupt', error: new ProfileStoreError('PROFILE_CORRUPT', 'bad json', { path: '/x/state.json' }),
    failure: { kind: 'configuration', code: 'PROFILE_CORRUPT', message: 'bad json' } },
  { name: 'profile mismatch', error: new ProfileStoreError('PROFILE_MISMATCH', 'other profile', { path: '/x/state.json' }),
    failure: { kind: 'configuration', code: 'PROFILE_MISMATCH', message: 'other profile' } },

  ...(['STORE_READ_ONLY', 'STORE_KEY_MISSING', 'STORE_LOCKED', 'STORE_CORRUPT'] as const).map((code) => ({
    name: `secret store ${code}`, error: new SecretStoreError(code, `store: ${code}`),
    failure: { kind: 'configuration', code, message: `store: ${code}` } as Failure,
  })),
  ...(['KEYCHAIN_UNAVAILABLE', 'KEYCHAIN_TIMEOUT', 'STORE_LOCK_TIMEOUT'] as const).map((code) => ({
    name: `secret store ${code}`, error: new SecretStoreError(code, `store: ${code}`),
    failure: { kind: 'transient', code, message: `store: ${code}` } as Failure,
  })),

  { name: 'service 429 with Retry-After', error: new ServiceError('SERVICE_RATE_LIMITED', 'too many', { status: 429, retryAfterMs: 60_000, hint: 'wait' }),
    failure: { kind: 'rate_limited', code: 'SERVICE_RATE_LIMITED', message: 'too many', hint: 'wait', retryAfterMs: 60_000 } },
  { name: 'service 429 without Retry-After', error: new ServiceError('SERVICE_RATE_LIMITED', 'too many', { status: 429 }),
    failure: { kind: 'rate_limited', code: 'SERVICE_RATE_LIMITED', message: 'too many' } },
  { name: 'service 503 with Retry-After', error: new ServiceError('SERVICE_UNAVAILABLE', 'down', { status: 503, retryAfterMs: 4_000 }),
    failure: { kind: 'transient', code: 'SERVICE_UNAVAILABLE', message: 'down', retryAfterMs: 4_000 } },
  { name: 'service 500', error: new ServiceError('SERVICE_UNAVAILABLE', 'broke', { status: 500 }),
    failure: { kind: 'transient', code: 'SERVICE_UNAVAILABLE', message: 'broke' } },
  { name: 'service config refused with a 500', error: new ServiceError('SERVICE_CONFIG_REFUSED', 'refused', { status: 500 }),
    failure: { kind: 'transient', code: 'SERVICE_CONFIG_REFUSED', message: 'refused' } },
  { name: 'service network failure (no status)', error: new ServiceError('SERVICE_NETWORK', 'ECONNREFUSED'),
    failure: { kind: 'transient', code: 'SERVICE_NETWORK', message: 'ECONNREFUSED' } },
  { name: 'service 408', error: new ServiceError('SERVICE_HTTP_ERROR', 'timeout', { status: 408, retryAfterMs: 1 }),
    failure: { kind: 'transient', code: 'SERVICE_HTTP_ERROR', message: 'timeout', retryAfterMs: 1 } },
  { name: 'service redirect (bad response)', error: new ServiceError('SERVICE_BAD_RESPONSE', 'redirected', { status: 302 }),
    failure: { kind: 'transient', code: 'SERVICE_BAD_RESPONSE', message: 'redirected' } },
  { name: 'service 200 that is not what was promised', error: new ServiceError('SERVICE_BAD_RESPONSE', 'not json', { status: 200 }),
    failure: { kind: 'transient', code: 'SERVICE_BAD_RESPONSE', message: 'not json' } },
  ...([
    ['SERVICE_BAD_REQUEST', 400], ['SERVICE_UNAUTHORIZED', 401], ['SERVICE_FORBIDDEN', 403], ['SERVICE_NOT_FOUND', 404],
    ['SERVICE_METHOD_NOT_ALLOWED', 405], ['SERVICE_CONFLICT', 409], ['SERVICE_CONFIG_REFUSED', 412],
    ['SERVICE_INVALID_REQUEST', 422], ['SERVICE_HTTP_ERROR', 418],
  ] as const).map(([code, status]) => ({
    name: `service ${status}`, error: new ServiceError(code, `refused ${status}`, { status, retryAfterMs: 10 }),
    failure: { kind: 'configuration', code, message: `refused ${status}` } as Failure,
  })),

  { name: 'plain SyncauthError', error: new SyncauthError('RECONCILE_TIMEOUT', 'took too long'),
    failure: { kind: 'transient', code: 'RECONCILE_TIMEOUT', message: 'took too long' } },
  { name: 'plain SyncauthError with exit code 4', error: new SyncauthError('SYNCAUTH_NOT_AUTHORIZED', 'no grant', { exitCode: 4, hint: 'run setup' }),
    failure: { kind: 'transient', code: 'SYNCAUTH_NOT_AUTHORIZED', message: 'no grant', hint: 'run setup' } },
  { name: 'plain SyncauthError with exit code 2', error: new SyncauthError('SYNCAUTH_ENDPOINT_MISMATCH', 'other endpoint', { exitCode: 2 }),
    failure: { kind: 'transient', code: 'SYNCAUTH_ENDPOINT_MISMATCH', message: 'other endpoint' } },
  { name: 'template error', error: new TemplateError('unknown field {{ x }}'),
    failure: { kind: 'transient', code: 'TEMPLATE_INVALID', message: 'unknown field {{ x }}', hint: expect.stringContaining('a template may use {{ access_token }}') } },
  { name: 'interrupted', error: new InterruptedError('stopped by SIGINT'),
    failure: { kind: 'transient', code: 'SYNCAUTH_INTERRUPTED', message: 'stopped by SIGINT' } },
  { name: 'Node system error', error: errno('ECONNRESET', 'socket hang up'),
    failure: { kind: 'transient', code: 'ECONNRESET', message: 'socket hang up' } },
  { name: 'plain Error', error: new Error('boom'),
    failure: { kind: 'transient', code: 'UNEXPECTED', message: 'boom' } },
  { name: 'Error with a numeric code', error: Object.assign(new Error('odd'), { code: 42 }),
    failure: { kind: 'transient', code: 'UNEXPECTED', message: 'odd' } },
  { name: 'a thrown string', error: 'just text',
    failure: { kind: 'transient', code: 'UNEXPECTED', message: 'just text' } },
  { name: 'a thrown object that only looks like an error', error: { kind: 'terminal', code: 'OAUTH_INVALID_GRANT', message: 'fake' },
    failure: { kind: 'transient', code: 'UNEXPECTED', message: '[object Object]' } },
];

describe('classifyFailure', () => {
  it.each(cases)('$name', ({ error, failure }) => {
    expect(classifyFailure(error)).toStrictEqual(failure);
  });
});

describe('the table of kinds', () => {
  // gh's convention: 4 means "authorize again", 2 "your input was refused", 1 any other failure.
  const expected: Record<ErrorKind, { exitCode: number; daemon: string }> = {
    terminal: { exitCode: 4, daemon: 'terminal' },
    configuration: { exitCode: 1, daemon: 'configuration' },
    bad_input: { exitCode: 2, daemon: 'configuration' },
    rate_limited: { exitCode: 1, daemon: 'rate_limited' },
    transient: { exitCode: 1, daemon: 'transient' },
    coordinator: { exitCode: 1, daemon: 'coordinator' },
    denied: { exitCode: 1, daemon: 'transient' },
    protocol: { exitCode: 1, daemon: 'transient' },
    interrupted: { exitCode: 1, daemon: 'transient' },
    unclassified: { exitCode: 1, daemon: 'transient' },
  };

  it('gives every kind its exit code and the daemon its decision', () => {
    expect(ERROR_KIND_OUTCOMES).toStrictEqual(expected);
  });

  it.each(Object.keys(expected) as ErrorKind[])('an error of kind %s exits and is classified as the table says', (kind) => {
    const error = new SyncauthError('SOME_CODE', 'failed', { kind, retryAfterMs: 1_500 });
    expect(error.kind).toBe(kind);
    expect(error.exitCode).toBe(expected[kind].exitCode);
    const failure = classifyFailure(error);
    expect(failure.kind).toBe(expected[kind].daemon);
    // Only a failure the daemon retries keeps the wait the other side asked for.
    expect(failure.retryAfterMs).toBe(['rate_limited', 'transient'].includes(expected[kind].daemon) ? 1_500 : undefined);
  });

  it('leaves an error no family classified unclassified, exit 1, unless the throw site says otherwise', () => {
    const plain = new SyncauthError('SYNCAUTH_DOCTOR_FAILED', '2 of 9 checks failed');
    expect([plain.kind, plain.exitCode, plain.retryAfterMs]).toStrictEqual(['unclassified', 1, undefined]);
    const usage = new SyncauthError('SYNCAUTH_CONFIRMATION_REQUIRED', 'refusing to delete', { exitCode: ExitCode.usage });
    expect([usage.kind, usage.exitCode]).toStrictEqual(['unclassified', 2]);
    const chosen = new SyncauthError('SYNCAUTH_NO_CODE', 'no access code was given', { kind: 'bad_input' });
    expect([chosen.kind, chosen.exitCode]).toStrictEqual(['bad_input', 2]);
  });

  it('is exported from the package root with the error classes', () => {
    expect(root.ERROR_KIND_OUTCOMES).toBe(ERROR_KIND_OUTCOMES);
    expect(root.SyncauthError).toBe(SyncauthError);
    expect(new root.ServiceError('SERVICE_NETWORK', 'down')).toBeInstanceOf(root.SyncauthError);
    expect(new root.OAuthError('OAUTH_INVALID_GRANT', 'gone').kind).toBe('terminal');
  });
});

describe('each family sets its kind', () => {
  // What the CLI exited with for each OAuth code before kinds: 4 for a grant to authorize again, else 1.
  it.each(Object.keys(OAUTH_ERROR_KINDS) as OAuthErrorCode[])('OAuthError %s', (code) => {
    const error = new OAuthError(code, 'failed');
    const kind = OAUTH_ERROR_KINDS[code];
    expect(error.kind).toBe(kind);
    expect(error.exitCode).toBe(kind === 'terminal' ? 4 : 1);
  });

  it('OAuthError: a throw site may set the kind, and the exit code follows it', () => {
    const revoked = new OAuthError('OAUTH_HTTP_ERROR', 'gone', { kind: 'terminal' });
    expect([revoked.kind, revoked.exitCode]).toStrictEqual(['terminal', 4]);
    const misconfigured = new OAuthError('OAUTH_INVALID_GRANT', 'redirect_uri mismatch', { kind: 'configuration' });
    expect([misconfigured.kind, misconfigured.exitCode]).toStrictEqual(['configuration', 1]);
    expect(new OAuthError('OAUTH_RATE_LIMITED', 'slow down', { retryAfterMs: 30_000 }).retryAfterMs).toBe(30_000);
  });

  const context: RequestContext = {
    method: 'PUT', route: '/api/v1/sources/{source_id}', path: '/api/v1/sources/s-1', action: 'update source connector s-1',
    resource: { kind: 'source', id: 's-1' }, apiKeyHeader: 'unstructured-api-key', secrets: [],
  };
  const answer = (status: number, json: unknown = { detail: 'no' }, retryAfterMs?: number) =>
    errorFromResponse({ status, json, text: JSON.stringify(json), retryAfterMs, location: undefined }, context);

  // Exit codes as the CLI gave them before kinds: 4 for a refused API key, 2 for input the service refused.
  it.each([
    { status: 302, code: 'SERVICE_BAD_RESPONSE', kind: 'transient', exitCode: 1 },
    { status: 400, code: 'SERVICE_BAD_REQUEST', kind: 'configuration', exitCode: 2 },
    { status: 401, code: 'SERVICE_UNAUTHORIZED', kind: 'configuration', exitCode: 4 },
    { status: 403, code: 'SERVICE_FORBIDDEN', kind: 'configuration', exitCode: 1 },
    { status: 404, code: 'SERVICE_NOT_FOUND', kind: 'configuration', exitCode: 1 },
    { status: 405, code: 'SERVICE_METHOD_NOT_ALLOWED', kind: 'configuration', exitCode: 1 },
    { status: 408, code: 'SERVICE_HTTP_ERROR', kind: 'transient', exitCode: 1 },
    { status: 409, code: 'SERVICE_CONFLICT', kind: 'configuration', exitCode: 1 },
    { status: 412, code: 'SERVICE_CONFIG_REFUSED', kind: 'configuration', exitCode: 2 },
    { status: 418, code: 'SERVICE_HTTP_ERROR', kind: 'configuration', exitCode: 1 },
    { status: 422, code: 'SERVICE_INVALID_REQUEST', kind: 'configuration', exitCode: 2 },
    { status: 429, code: 'SERVICE_RATE_LIMITED', kind: 'rate_limited', exitCode: 1 },
    { status: 500, code: 'SERVICE_UNAVAILABLE', kind: 'transient', exitCode: 1 },
    { status: 503, code: 'SERVICE_UNAVAILABLE', kind: 'transient', exitCode: 1 },
  ])('ServiceError from a $status answer: $kind, exit $exitCode', ({ status, code, kind, exitCode }) => {
    const error = answer(status, { detail: 'no' }, 2_000);
    expect([error.code, error.kind, error.exitCode]).toStrictEqual([code, kind, exitCode]);
  });

  it('ServiceError: kind from the status whatever the code, exit code from the code', () => {
    // A source connector config the service refuses with a 500 is input to fix (exit 2), yet a 500 is retried.
    const refused = errorFromResponse({ status: 500, json: { detail: 'bad config' }, text: '', retryAfterMs: undefined, location: undefined },
      { ...context, creatingSourceType: 'dropbox' });
    expect([refused.code, refused.kind, refused.exitCode]).toStrictEqual(['SERVICE_CONFIG_REFUSED', 'transient', 2]);
    const network = new ServiceError('SERVICE_NETWORK', 'refused the connection');
    expect([network.kind, network.exitCode]).toStrictEqual(['transient', 1]);
    const noJob = new ServiceError('SERVICE_CONFLICT', 'no new job', { status: 200 });
    expect([noJob.kind, noJob.exitCode]).toStrictEqual(['configuration', 1]);
    const notJson = new ServiceError('SERVICE_BAD_RESPONSE', 'not JSON', { status: 200 });
    expect([notJson.kind, notJson.exitCode]).toStrictEqual(['transient', 1]);
  });

  it('ServiceError: a new hint keeps the kind, the exit code and the wait', () => {
    const limited = withHint(answer(429, { detail: 'slow' }, 45_000), 'look before trying again');
    expect([limited.kind, limited.exitCode, limited.retryAfterMs, limited.hint]).toStrictEqual(['rate_limited', 1, 45_000, 'look before trying again']);
    const unauthorized = withHint(answer(401), 'check the key');
    expect([unauthorized.kind, unauthorized.exitCode]).toStrictEqual(['configuration', 4]);
  });

  it.each([
    { code: 'PROFILE_LOCK_TIMEOUT', kind: 'transient' },
    { code: 'PROFILE_CORRUPT', kind: 'configuration' },
    { code: 'PROFILE_MISMATCH', kind: 'configuration' },
  ] as const)('ProfileStoreError $code: $kind, exit 1', ({ code, kind }) => {
    const error = new ProfileStoreError(code, 'failed', { path: '/config/profiles/docs.json' });
    expect([error.kind, error.exitCode]).toStrictEqual([kind, 1]);
  });

  // Exit 2 for a missing key or a write to the read-only environment, as before kinds.
  const storeExpectations = {
    KEYCHAIN_UNAVAILABLE: { kind: 'transient', exitCode: 1 },
    KEYCHAIN_TIMEOUT: { kind: 'transient', exitCode: 1 },
    STORE_LOCKED: { kind: 'configuration', exitCode: 1 },
    STORE_KEY_MISSING: { kind: 'configuration', exitCode: 2 },
    STORE_READ_ONLY: { kind: 'configuration', exitCode: 2 },
    STORE_CORRUPT: { kind: 'configuration', exitCode: 1 },
    STORE_LOCK_TIMEOUT: { kind: 'transient', exitCode: 1 },
  } as const;
  it('covers every secret store code', () => {
    expect(Object.keys(storeExpectations).sort()).toStrictEqual([...SECRET_STORE_ERROR_CODES].sort());
  });
  it.each(Object.entries(storeExpectations))('SecretStoreError %s', (code, { kind, exitCode }) => {
    const error = new SecretStoreError(code as keyof typeof storeExpectations, 'failed');
    expect([error.kind, error.exitCode]).toStrictEqual([kind, exitCode]);
  });

  it('ValidationError: bad_input, exit 2', () => {
    const error = new ValidationError([{ field: 'remote_url', message: 'is not a dropbox:// URL' }]);
    expect([error.kind, error.exitCode]).toStrictEqual(['bad_input', 2]);
  });

  it('CoordinatorUnavailableError: coordinator, exit 1', () => {
    const error = new CoordinatorUnavailableError('redis is down');
    expect([error.kind, error.exitCode]).toStrictEqual(['coordinator', 1]);
  });

  it('InterruptedError: interrupted, exit 1 (the CLI exits with the signal\'s code instead)', () => {
    const error = new InterruptedError('stopped by SIGINT');
    expect([error.kind, error.exitCode]).toStrictEqual(['interrupted', 1]);
  });

  it('TemplateError: unclassified, exit 1', () => {
    const error = new TemplateError('unknown field {{ x }}');
    expect([error.kind, error.exitCode]).toStrictEqual(['unclassified', 1]);
  });
});
