// What setup checks before the browser opens (with --no-browser: before the URL is shown): the service and its
// API key, the workflow, the store, and the app key and redirect URI where Dropbox's authorize page tells
// without the person. Each failure names the setting, says how to fix it, exits with its code, stores
// nothing, and sends nothing to the token endpoint.
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  copyCodeLikeAPerson, dirsUnder, filesUnder, freePort, newHome, onboardingEnv, runCli, spawnCli, startOnboarding, AUTHORIZE_URL_PATTERN,
  type Home, type Onboarding,
} from '../helpers/onboarding.js';

const WORKFLOW = '6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f';
// Were a check missing, setup would wait for a browser that never comes: a short timeout keeps that failure quick.
const ARGS = ['setup', '--yes', '--no-open', '--timeout', '5'];

let ob: Onboarding;
const servers: Server[] = [];

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => {
  await ob.emulator.close();
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

function requestsFor(route: string) {
  return ob.emulator.state.requests.filter((r) => r.route === route);
}

/** Nothing stored, no URL shown, nothing sent to the token endpoint. */
function expectNothingDone(home: Home, result: { stdout: string; stderr: string }, tokenRequestsBefore: number) {
  expect(result.stdout).toBe('');
  expect(result.stderr).not.toMatch(AUTHORIZE_URL_PATTERN);
  expect(filesUnder(home.configDir)).toEqual([]);
  expect(requestsFor('token').length).toBe(tokenRequestsBefore);
}

/** A stand-in for Dropbox's authorize host that answers every request with `status` and `body`. */
async function fakeAuthorizeHost(status: number, body: string): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(status, { 'content-type': 'text/html' }).end(body);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return `http://127.0.0.1:${port}/oauth2/authorize`;
}

describe('setup checks the service before the browser opens', () => {
  it('an API key the service refuses: exit 4, names SYNCAUTH_API_KEY, no URL shown, nothing stored', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli(ARGS, { env: onboardingEnv(ob, home, { SYNCAUTH_API_KEY: 'not-a-key-of-this-workspace' }), cwd: home.dir });
    expect(result.stderr).toMatch(/error: SYNCAUTH_API_KEY: the service at 127\.0\.0\.1:\d+ refused the API key \(401\)/);
    expect(result.stderr).toMatch(/hint: .*API key/);
    expect(result.stderr).not.toContain('not-a-key-of-this-workspace');
    expect(result.code).toBe(4);
    expectNothingDone(home, result, tokens);
  });

  it('the same with --no-browser: the URL is never shown', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli([...ARGS, '--no-browser'], { env: onboardingEnv(ob, home, { SYNCAUTH_API_KEY: 'not-a-key-of-this-workspace' }), cwd: home.dir, stdin: 'abc\n' });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/SYNCAUTH_API_KEY: the service .* refused the API key/);
    expectNothingDone(home, result, tokens);
  });

  it('with a grant handed in, a refused API key is found before the grant is renewed', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli(ARGS, {
      env: onboardingEnv(ob, home, { SYNCAUTH_API_KEY: 'not-a-key-of-this-workspace', SYNCAUTH_REFRESH_TOKEN: 'given-refresh-token-xyz' }), cwd: home.dir,
    });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/SYNCAUTH_API_KEY: the service .* refused the API key/);
    expectNothingDone(home, result, tokens);
  });

  it('a service nobody answers at: exit 1, names the base URL setting, quickly', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const started = performance.now();
    const result = await runCli(ARGS, { env: onboardingEnv(ob, home, { SYNCAUTH_BASE_URL: `http://127.0.0.1:${await freePort()}` }), cwd: home.dir });
    expect(result.stderr).toMatch(/error: --base-url or SYNCAUTH_BASE_URL: cannot reach the service at 127\.0\.0\.1:\d+/);
    expect(result.stderr).toMatch(/hint: check the URL/);
    expect(result.code).toBe(1);
    expect(performance.now() - started).toBeLessThan(15_000);
    expectNothingDone(home, result, tokens);
  });

  it('a workflow id the service does not know: exit 2, names --workflow-id', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli([...ARGS, '--workflow-id', WORKFLOW], { env: onboardingEnv(ob, home), cwd: home.dir });
    expect(result.stderr).toMatch(new RegExp(`error: --workflow-id or SYNCAUTH_WORKFLOW_ID: no workflow ${WORKFLOW} in this workspace`));
    expect(result.stderr).toMatch(/hint: .*`[^`]* workflow list`|hint: .*--no-workflow|hint: .*leave it out/);
    expect(result.code).toBe(2);
    expectNothingDone(home, result, tokens);
  });
});

describe('setup checks the store before the browser opens', () => {
  it('a new file store with a key shorter than 16 characters: exit 2, the store\'s own wording', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli(ARGS, { env: onboardingEnv(ob, home, { SYNCAUTH_STORE_KEY: 'fifteen-chars15' }), cwd: home.dir });
    expect(result.stderr).toMatch(/error: SYNCAUTH_STORE_KEY: the key for the new store .*secrets\.enc is shorter than 16 characters/);
    expect(result.code).toBe(2);
    expectNothingDone(home, result, tokens);
    expect(dirsUnder(home.configDir).filter((d) => d !== home.configDir)).toEqual([]);
  });

  it('a config dir that cannot be made (a file is in the way): names SYNCAUTH_CONFIG_DIR', async () => {
    const home = newHome();
    const blocker = path.join(home.dir, 'blocker');
    writeFileSync(blocker, 'not a directory');
    const configDir = path.join(blocker, 'config');
    const tokens = requestsFor('token').length;
    const result = await runCli(ARGS, { env: onboardingEnv(ob, home, { SYNCAUTH_CONFIG_DIR: configDir }), cwd: home.dir });
    expect(result.stderr).toMatch(/error: .*blocker is a file, but syncauth needs a directory there \(the config directory, SYNCAUTH_CONFIG_DIR\)/);
    expect(result.stderr).toMatch(/hint: move that file away, or set SYNCAUTH_CONFIG_DIR/);
    expect(result.code).toBe(1);
    expectNothingDone(home, result, tokens);
  });
});

describe('setup asks Dropbox\'s authorize page about the app key and the redirect URI before the browser opens', () => {
  it('an app key Dropbox does not know: exit 2, names SYNCAUTH_APP_KEY, no URL shown', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli(ARGS, { env: onboardingEnv(ob, home, { SYNCAUTH_APP_KEY: 'unknownappkey99' }), cwd: home.dir });
    expect(result.stderr).toMatch(/error: SYNCAUTH_APP_KEY: Dropbox does not know this app key/);
    expect(result.stderr).toMatch(/hint: copy the App key from the app's Settings tab/);
    expect(result.stderr).not.toContain('unknownappkey99');
    expect(result.code).toBe(2);
    expectNothingDone(home, result, tokens);
  });

  it('the same in paste mode (--no-browser)', async () => {
    const home = newHome();
    const tokens = requestsFor('token').length;
    const result = await runCli([...ARGS, '--no-browser'], { env: onboardingEnv(ob, home, { SYNCAUTH_APP_KEY: 'unknownappkey99' }), cwd: home.dir, stdin: 'abc\n' });
    expect(result.stderr).toMatch(/SYNCAUTH_APP_KEY: Dropbox does not know this app key/);
    expect(result.code).toBe(2);
    expectNothingDone(home, result, tokens);
  });

  it('a redirect URI not registered for the app: exit 2, names it and says exactly what to register', async () => {
    const home = newHome();
    const unregistered = `http://127.0.0.1:${await freePort()}/callback`;
    const tokens = requestsFor('token').length;
    const result = await runCli(ARGS, { env: onboardingEnv(ob, home, { SYNCAUTH_REDIRECT_URI: unregistered }), cwd: home.dir });
    expect(result.stderr).toMatch(/error: --redirect-uri or SYNCAUTH_REDIRECT_URI: is not registered for this app/);
    expect(result.stderr).toContain(`add exactly ${unregistered}`);
    expect(result.code).toBe(2);
    expectNothingDone(home, result, tokens);
  });

  it('an authorize page it does not recognise never fails setup: the flow goes on', async () => {
    const home = newHome();
    const fake = await fakeAuthorizeHost(400, '<h1>Error (400)</h1><p>Something else entirely.</p>');
    const proc = spawnCli([...ARGS, '--no-browser', '--json'], { env: onboardingEnv(ob, home, { SYNCAUTH_AUTHORIZE_URL: fake }), cwd: home.dir });
    const shown = await proc.waitForStderr(/\s(http:\/\/127\.0\.0\.1:\d+\/oauth2\/authorize\?\S+)/);
    // The person opens the page on the real host: here, the emulator's.
    const onEmulator = new URL(shown);
    const real = new URL(ob.emulator.authorizeUrl);
    onEmulator.host = real.host;
    proc.write(`${await copyCodeLikeAPerson(onEmulator.toString())}\n`);
    proc.end();
    const result = await proc.result;
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
  });

  it('an authorize host that cannot be reached: the check is skipped, saying so, and the flow goes on', async () => {
    const home = newHome();
    const dead = `http://127.0.0.1:${await freePort()}/oauth2/authorize`;
    const proc = spawnCli([...ARGS, '--no-browser'], { env: onboardingEnv(ob, home, { SYNCAUTH_AUTHORIZE_URL: dead }), cwd: home.dir });
    await proc.waitForStderr(/could not check the app key with Dropbox/);
    await proc.waitForStderr(AUTHORIZE_URL_PATTERN);
    proc.end();
    const result = await proc.result;
    // No code pasted: the flow went on to ask for it.
    expect(result.stderr).toMatch(/no access code was given/);
  });
});
