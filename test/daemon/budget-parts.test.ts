// What the token-endpoint budget's series are read from, on their own: the outcome a token request counts as,
// and the account pauses' counts (paused now, begun here or from another replica's record).
import { describe, expect, it } from 'vitest';
import { AccountPauses, type PauseBackend } from '../../src/daemon/account-pause.js';
import { tokenRequestOutcome } from '../../src/daemon/metrics.js';
import { ValidationError } from '../../src/errors.js';
import { OAuthError } from '../../src/oauth/index.js';
import { captureLog, fakeClock, type Clock } from './helpers.js';

const MINUTE = 60_000;

describe('the parts the budget series are read from', () => {
  it('tokenRequestOutcome: tokens, a 429, a refused grant, a refused app, a 5xx; nothing sent is not counted', () => {
    expect(tokenRequestOutcome()).toBe('ok');
    expect(tokenRequestOutcome(new OAuthError('OAUTH_RATE_LIMITED', 'slow down'))).toBe('rate_limited');
    expect(tokenRequestOutcome(new OAuthError('OAUTH_INVALID_GRANT', 'revoked'))).toBe('reauthorization_needed');
    expect(tokenRequestOutcome(new OAuthError('OAUTH_INVALID_CLIENT', 'bad app'))).toBe('configuration_error');
    expect(tokenRequestOutcome(new OAuthError('OAUTH_SERVER_ERROR', '503'))).toBe('failed');
    expect(tokenRequestOutcome(new OAuthError('OAUTH_TIMEOUT', 'no answer'))).toBe('failed');
    expect(tokenRequestOutcome(new ValidationError([{ field: 'refreshToken', message: 'must not be empty' }]))).toBeUndefined();
  });

  it('AccountPauses.stats: accounts paused now, pauses begun here or from a record, an extension or an own record read back not counted again', async () => {
    const clock: Clock = fakeClock();
    const records = new Map<string, number>();
    const backend: PauseBackend = {
      readPause: (account) => Promise.resolve((records.get(account) ?? 0) > clock.now() ? records.get(account) : undefined),
      writePause: (account, until) => {
        records.set(account, Math.max(until, records.get(account) ?? 0));
        return Promise.resolve();
      },
    };
    const pauses = new AccountPauses({ backend, now: clock.now, log: captureLog().logger });
    await pauses.pause('dbid:one', clock.now() + 10 * MINUTE, 'p');
    // Longer, while paused: the same pause, extended.
    await pauses.pause('dbid:one', clock.now() + 20 * MINUTE, 'p');
    // Its own record read back.
    await pauses.pausedUntil('dbid:one');
    // Another replica's record for another account.
    records.set('dbid:two', clock.now() + 5 * MINUTE);
    await pauses.pausedUntil('dbid:two');
    await pauses.pausedUntil('dbid:two');
    expect(pauses.stats()).toEqual({ paused: 2, begun: { here: 1, fleet: 1 } });
    clock.advance(6 * MINUTE);
    expect(pauses.stats()).toEqual({ paused: 1, begun: { here: 1, fleet: 1 } });
    clock.advance(15 * MINUTE);
    expect(pauses.stats()).toEqual({ paused: 0, begun: { here: 1, fleet: 1 } });
    // A new 429 after the end: a new pause.
    await pauses.pause('dbid:one', clock.now() + MINUTE, 'p');
    expect(pauses.stats()).toEqual({ paused: 1, begun: { here: 2, fleet: 1 } });
  });
});
