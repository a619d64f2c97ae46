// While the browser callback does not come, say once what usually goes wrong, with the redirect URI to register.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { authorizeInteractively } from '../../src/cli/authorization.js';
import { resolveSettings } from '../../src/config.js';
import { freePort } from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';

async function waitWithoutCallback(hintAfterMs: number, watchMs: number) {
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  const settings = resolveSettings({ env: { SYNCAUTH_REDIRECT_URI: redirectUri, SYNCAUTH_AUTHORIZE_URL: 'http://127.0.0.1:9/oauth2/authorize' } }).values;
  const stderr = new PassThrough();
  let err = '';
  stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const controller = new AbortController();
  const waiting = authorizeInteractively({
    settings, appKey: 'appkey123', appSecret: 'appsecret456', paste: false, openBrowser: false, timeoutMs: 60_000,
    io: { stdout: new PassThrough(), stderr }, stdin: new PassThrough(), signal: controller.signal, hintAfterMs,
  });
  const outcome = waiting.then(() => 'resolved', (error: unknown) => (error as { code?: string }).code);
  await waitFor('the wait for the browser to begin', () => (err.includes('Waiting for Dropbox') ? true : undefined), 5_000);
  await new Promise((resolve) => setTimeout(resolve, watchMs));
  const before = err;
  controller.abort();
  return { redirectUri, printed: () => err, before, outcome: await outcome };
}

describe('authorizeInteractively, loopback mode', () => {
  it('says once, after the delay, what usually goes wrong and the exact redirect URI to register', async () => {
    const run = await waitWithoutCallback(100, 600);
    expect(run.outcome).toBe('OAUTH_ABORTED');
    const hints = run.before.split('Still no answer from the browser').length - 1;
    expect(hints).toBe(1);
    expect(run.before).toMatch(/signed in to a different Dropbox account/);
    expect(run.before).toMatch(/different app/);
    expect(run.before).toContain(`Redirect URIs: add exactly ${run.redirectUri}`);
    expect(run.printed()).not.toContain('appsecret456');
  });

  it('says nothing of the sort before the delay', async () => {
    const run = await waitWithoutCallback(60_000, 200);
    expect(run.outcome).toBe('OAUTH_ABORTED');
    expect(run.before).not.toContain('Still no answer from the browser');
  });
});
