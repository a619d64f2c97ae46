// What the daemon decides about each error family. The expectations were written from the class-and-code
// matching that classifyFailure did before errors carried a kind, so that moving the decision onto the errors
// themselves cannot change what the daemon does.
import { describe, expect, it } from 'vitest';
import { SecretStoreError } from '../../src/credentials/errors.js';
import { SyncauthError, ValidationError } from '../../src/errors.js';
import { classifyFailure, type Failure } from '../../src/daemon/classify.js';
import { CoordinatorUnavailableError } from '../../src/daemon/coordinator.js';
import { InterruptedError } from '../../src/cli/interrupt.js';
import { OAuthError } from '../../src/oauth/errors.js';
import { ProfileStoreError } from '../../src/profile/errors.js';
import { TemplateError } from '../../src/publish/template.js';
import { ServiceError } from '../../src/service/errors.js';

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
