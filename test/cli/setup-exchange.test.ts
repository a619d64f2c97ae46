// The code exchange, where a first use most often stumbles after the browser step: a bad pasted code is asked
// for again (3 tries in all), a refused app secret can be typed again at a terminal and the same code exchanged
// without a new browser round, and the browser's success page appears only once the exchange succeeded.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI } from '../helpers/cli.js';
import {
  copyCodeLikeAPerson, filesUnder, newHome, onboardingEnv, readProfileState, spawnCli, startOnboarding, storedSecrets,
  AUTHORIZE_URL_PATTERN, type Onboarding,
} from '../helpers/onboarding.js';
import { waitFor } from '../helpers/wait.js';

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

const tokenRequests = () => ob.emulator.state.requests.filter((r) => r.route === 'token').length;
const WRONG_SECRET = 'wrongSecret0000x';

describe('paste mode: a bad code is asked for again, 3 tries in all', () => {
  it('a mistyped code, then the right one: setup completes', async () => {
    const home = newHome();
    const proc = spawnCli(['setup', '--yes', '--no-browser', '--json', '--connector-name', 'retry-paste'], { env: onboardingEnv(ob, home), cwd: home.dir });
    const url = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    const code = await copyCodeLikeAPerson(url);
    proc.write('not-the-code-123\n');
    await proc.waitForStderr(/try again \(2 tries left\)/);
    proc.write(`${code}\n`);
    proc.end();
    const result = await proc.result;
    expect(result.stderr).toMatch(/Dropbox refused the authorization code/);
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    expect((await storedSecrets(home, 'default')).refresh_token).toBeTruthy();
  });

  it('an access token pasted first is explained, and the code after it is taken', async () => {
    const home = newHome();
    const proc = spawnCli(['setup', '--yes', '--no-browser', '--json', '--connector-name', 'retry-token'], { env: onboardingEnv(ob, home), cwd: home.dir });
    const url = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    const code = await copyCodeLikeAPerson(url);
    const before = tokenRequests();
    proc.write(`sl.u.AbCdEf${'x'.repeat(40)}\n${code}\n`);
    proc.end();
    const result = await proc.result;
    expect(result.stderr).toMatch(/that looks like an access token/);
    expect(result.stderr).not.toContain('AbCdEf');
    expect(result.code).toBe(0);
    // The token was never sent anywhere: one exchange, the real code's.
    expect(tokenRequests() - before).toBe(1);
  });

  it('three bad codes end setup, nothing stored, and a fourth line is not read', async () => {
    const home = newHome();
    const before = tokenRequests();
    const proc = spawnCli(['setup', '--yes', '--no-browser'], { env: onboardingEnv(ob, home), cwd: home.dir });
    await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    proc.write('bad-one-1\nbad-two-2\nbad-three-3\nbad-four-4\n');
    proc.end();
    const result = await proc.result;
    expect(result.stderr).toMatch(/error: Dropbox refused the authorization code/);
    expect(result.stderr).toMatch(/after 3 tries/);
    expect(result.code).not.toBe(0);
    expect(tokenRequests() - before).toBe(3);
    expect(filesUnder(home.configDir)).toEqual([]);
  });
});

describe('loopback mode: the browser page tells the outcome of the exchange', () => {
  it('a refused app secret (--yes): the browser shows a failure page that says what to do, without the secret; exit non-zero, nothing stored', async () => {
    const home = newHome();
    const proc = spawnCli(['setup', '--yes', '--no-open'], { env: onboardingEnv(ob, home, { SYNCAUTH_APP_SECRET: WRONG_SECRET }), cwd: home.dir });
    const url = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    const callback = await fetchCallbackPage(url);
    const result = await proc.result;
    expect(callback.status).toBe(400);
    expect(callback.html).toMatch(/syncauth could not finish the authorization/);
    expect(callback.html).toMatch(/app secret/);
    expect(callback.html).not.toContain(WRONG_SECRET);
    expect(callback.html).not.toContain(ob.app.appSecret);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/error: Dropbox refused the app credentials/);
    expect(filesUnder(home.configDir)).toEqual([]);
  });

  it('a successful exchange: the success page, served only after the token endpoint answered', async () => {
    const home = newHome();
    // A slow token endpoint: a page sent before the exchange would arrive long before it.
    ob.emulator.setFaults([{ route: 'token', latencyMs: 1_500, times: 1 }]);
    try {
      const proc = spawnCli(['setup', '--yes', '--no-open', '--connector-name', 'page-after'], { env: onboardingEnv(ob, home), cwd: home.dir });
      const url = await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
      const started = performance.now();
      const callback = await fetchCallbackPage(url);
      const waited = performance.now() - started;
      const result = await proc.result;
      expect(callback.status).toBe(200);
      expect(callback.html).toMatch(/syncauth is authorized/);
      expect(waited).toBeGreaterThanOrEqual(1_400);
      expect(result.code).toBe(0);
    } finally {
      ob.emulator.setFaults([]);
    }
  });
});

/** The browser's side of Allow, returning the page the loopback callback answered with. */
async function fetchCallbackPage(authorizeUrl: string): Promise<{ status: number; html: string }> {
  const page = await fetch(authorizeUrl, { redirect: 'manual' });
  const location = page.headers.get('location');
  if (!location) throw new Error(`the authorize page answered ${page.status} without a redirect`);
  const callback = await fetch(location);
  return { status: callback.status, html: await callback.text() };
}

describe('a refused app secret at a terminal: typed again, the same code exchanged, no new browser round', () => {
  it('asks for the app secret again and completes with the secret typed', async () => {
    const home = newHome();
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir, TERM: 'dumb' };
    for (const [key, value] of Object.entries(onboardingEnv(ob, home, { SYNCAUTH_APP_SECRET: WRONG_SECRET }))) if (value !== undefined) env[key] = value;
    // `script` gives the CLI a terminal, as a person's shell would.
    const child = spawn('script', ['-qfec', `${process.execPath} ${CLI} setup --no-open --no-workflow --connector-name typed-secret`, '/dev/null'], { cwd: home.dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    try {
      const url = await waitFor('the authorize URL', () => AUTHORIZE_URL_PATTERN.exec(out)?.[1], 15_000);
      const grantsBefore = ob.emulator.state.grants.size;
      const page = await fetchCallbackPage(url);
      expect(page.html).toMatch(/app secret/);
      // The explanation, then the hidden-input prompt (◆) asking for the secret.
      await waitFor('the question for the app secret', () => {
        const said = out.indexOf('no new browser round is needed');
        return said >= 0 && out.indexOf('◆', said) > said ? true : undefined;
      }, 15_000);
      expect(out).toMatch(/✗ Dropbox refused the app credentials/);
      child.stdin.write(`${ob.app.appSecret}\r`);
      const code = await exited;
      expect(out).toMatch(/source connector typed-secret created/);
      expect(code).toBe(0);
      // One grant, from the same code: no second browser round.
      expect(ob.emulator.state.grants.size - grantsBefore).toBe(1);
      expect(out).not.toContain(ob.app.appSecret);
      expect((await storedSecrets(home, 'default')).app_secret).toBe(ob.app.appSecret);
      expect(readProfileState(home, 'default')?.connectorId).toBeTruthy();
    } catch (error) {
      throw new Error(`${(error as Error).message}\nterminal:\n${out}`, { cause: error });
    } finally {
      clearTimeout(timer);
      child.kill('SIGKILL');
    }
  });
});
