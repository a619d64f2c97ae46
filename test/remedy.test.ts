// Remedies: an error below the CLI says which syncauth command fixes it, and the command is written where the
// hint is shown. `error.hint` reads `syncauth …` (a library caller's), `hintFor` as the person ran syncauth.
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { reportError } from '../src/cli/output.js';
import { classifyFailure } from '../src/daemon/classify.js';
import { recordInvocation } from '../src/profile/name.js';
import { reauthorizeHint as reauthorizeProfile } from '../src/sync/access-token.js';
import { SyncauthError, ValidationError } from '../src/errors.js';
import { registerSecrets } from '../src/redact.js';
import * as root from '../src/index.js';
import { parseAuthorizationResponse } from '../src/oauth/authorize.js';
import { OAuthError, REAUTHORIZE_HINT, reauthorizeHint } from '../src/oauth/errors.js';
import { checkGrantedScopes } from '../src/oauth/scopes.js';
import {
  plainCommandLine,
  reauthorizeRemedyHint,
  remedyArguments,
  remedyCommand,
  remedyHint,
  renderHint,
  type CommandLine,
} from '../src/remedy.js';

const npx: CommandLine = (rest) => `npx --yes ./syncauth-0.1.0.tgz ${rest}`;

describe('a remedy', () => {
  it('names the subcommand that carries it out', () => {
    expect(remedyArguments({ action: 'reauthorize' })).toBe('setup');
    expect(remedyArguments({ action: 'reauthorize', profile: 'docs' })).toBe('setup --profile docs');
    expect(remedyArguments({ action: 'run', command: 'source check c-1' })).toBe('source check c-1');
  });

  it('is written `syncauth …` unless a command line is given', () => {
    expect(remedyCommand({ action: 'reauthorize', profile: 'docs' })).toBe('syncauth setup --profile docs');
    expect(plainCommandLine('status')).toBe('syncauth status');
    expect(remedyCommand({ action: 'run', command: 'jobs list --workflow w-1' }, npx)).toBe('npx --yes ./syncauth-0.1.0.tgz jobs list --workflow w-1');
  });

  it('a hint reads its words around the command, as each command line writes it; plain words read the same everywhere', () => {
    const hint = remedyHint({ action: 'run', command: 'source check c-1' }, (command) => `see \`${command}\` later`);
    expect(renderHint(hint)).toBe('see `syncauth source check c-1` later');
    expect(renderHint(hint, npx)).toBe('see `npx --yes ./syncauth-0.1.0.tgz source check c-1` later');
    expect(renderHint('check the app key', npx)).toBe('check the app key');
    expect(renderHint(reauthorizeRemedyHint('docs'), npx)).toBe('run `npx --yes ./syncauth-0.1.0.tgz setup --profile docs` to authorize again');
  });
});

describe('an error with a remedy', () => {
  it('carries the remedy; its hint reads `syncauth …`, and as the person ran syncauth through hintFor', () => {
    const error = new SyncauthError('X', 'failed', { hint: reauthorizeRemedyHint('docs') });
    expect(error.remedy).toEqual({ action: 'reauthorize', profile: 'docs' });
    expect(error.hint).toBe('run `syncauth setup --profile docs` to authorize again');
    expect(error.hintFor(npx)).toBe('run `npx --yes ./syncauth-0.1.0.tgz setup --profile docs` to authorize again');
    expect(error.hintFor(plainCommandLine)).toBe(error.hint);
  });

  it('without one, its hint is the same with any command line, and it has no remedy', () => {
    const words = new SyncauthError('X', 'failed', { hint: 'check the app key' });
    expect(words.remedy).toBeUndefined();
    expect(words.hintFor(npx)).toBe('check the app key');
    const none = new SyncauthError('X', 'failed');
    expect(none.hint).toBeUndefined();
    expect(none.hintFor(npx)).toBeUndefined();
    expect(none.hintSource).toBeUndefined();
  });

  it('hands its hint on unwritten to an error made from it', () => {
    const first = new OAuthError('OAUTH_INVALID_GRANT', 'gone', { hint: reauthorizeHint() });
    const second = new SyncauthError(first.code, `${first.message}, after 3 tries`, { hint: first.hintSource, cause: first });
    expect(second.remedy).toEqual({ action: 'reauthorize' });
    expect(second.hintFor(npx)).toBe('run `npx --yes ./syncauth-0.1.0.tgz setup` to authorize again');
  });

  it('passes the redaction step with either command line', () => {
    const secret = `sl.remedy-test-${'A'.repeat(40)}`;
    registerSecrets(secret);
    const error = new SyncauthError('X', 'failed', { hint: remedyHint({ action: 'run', command: 'status' }, (command) => `run \`${command}\`; token ${secret}`) });
    expect(error.hint).not.toContain(secret);
    expect(error.hintFor(npx)).not.toContain(secret);
  });

  it('a ValidationError takes one too', () => {
    const error = new ValidationError([{ field: 'profile', message: 'missing' }], { hint: reauthorizeRemedyHint() });
    expect(error.remedy).toEqual({ action: 'reauthorize' });
    expect(error.hintFor(npx)).toBe('run `npx --yes ./syncauth-0.1.0.tgz setup` to authorize again');
  });
});

describe("Dropbox's errors name the command without knowing how syncauth was run", () => {
  it('a refusal to authorize: run setup again and click Allow', () => {
    let caught: unknown;
    try {
      parseAuthorizationResponse(new URLSearchParams('error=access_denied&state=S1'), 'S1');
    } catch (error) {
      caught = error;
    }
    const error = caught as OAuthError;
    expect(error.code).toBe('OAUTH_ACCESS_DENIED');
    expect(error.remedy).toEqual({ action: 'reauthorize' });
    expect(error.hint).toBe('run `syncauth setup` again and click Allow');
    expect(error.hintFor(npx)).toBe('run `npx --yes ./syncauth-0.1.0.tgz setup` again and click Allow');
  });

  it('the reauthorize hint reads as REAUTHORIZE_HINT with plain syncauth', () => {
    expect(new OAuthError('OAUTH_INVALID_GRANT', 'gone', { hint: reauthorizeHint() }).hint).toBe(REAUTHORIZE_HINT);
  });

  it('missing permissions name setup as the caller writes it', () => {
    expect(checkGrantedScopes([], 'read').message).toContain('authorize again with `syncauth setup`');
    expect(checkGrantedScopes([], 'read', npx).message).toContain('authorize again with `npx --yes ./syncauth-0.1.0.tgz setup`');
  });
});

describe('the profile a failure is about, named by the code that knows it', () => {
  it('a revoked grant met while getting a profile\'s token: setup --profile NAME', async () => {
    const failed = reauthorizeProfile('docs', () => Promise.reject(new OAuthError('OAUTH_INVALID_GRANT', 'gone', { hint: reauthorizeHint() })));
    const error = (await failed.catch((caught: unknown) => caught)) as SyncauthError;
    expect(error.remedy).toEqual({ action: 'reauthorize', profile: 'docs' });
    expect(error.hint).toBe('run `syncauth setup --profile docs` to authorize again');
    expect(error.hintFor(npx)).toBe('run `npx --yes ./syncauth-0.1.0.tgz setup --profile docs` to authorize again');
  });
});

describe('the package root', () => {
  it('errors carry remedies for library callers too', () => {
    expect(new root.OAuthError('OAUTH_INVALID_GRANT', 'gone', { hint: reauthorizeHint() }).remedy).toEqual({ action: 'reauthorize' });
  });
});

describe('where a hint is shown, its command is written as the person ran syncauth', () => {
  afterEach(() => recordInvocation({ argv: ['node', 'syncauth'], env: {}, cwd: '/' }));
  const revoked = () => new OAuthError('OAUTH_INVALID_GRANT', 'Dropbox no longer accepts the refresh token', { hint: reauthorizeHint() });

  it("the CLI's error output", () => {
    recordInvocation({ argv: ['node', '/opt/tools/sa'], env: {}, cwd: '/srv' });
    const stderr = new PassThrough();
    let text = '';
    stderr.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; });
    expect(reportError({ stdout: new PassThrough(), stderr }, revoked())).toBe(4);
    expect(text).toContain('hint: run `node /opt/tools/sa setup` to authorize again');
  });

  it("the daemon's failures (its logs)", () => {
    recordInvocation({ argv: ['node', '/opt/tools/sa'], env: {}, cwd: '/srv' });
    expect(classifyFailure(revoked()).hint).toBe('run `node /opt/tools/sa setup` to authorize again');
  });

  it('with nothing recorded (a library, a test in-process) as `syncauth`, as error.hint reads', () => {
    expect(classifyFailure(revoked()).hint).toBe(revoked().hint);
  });
});
