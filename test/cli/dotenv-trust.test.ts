// The one rule for a `.env` in the working directory (one that came with a cloned repository, say): a value it
// sets that chooses where secrets go (the service base URL, Dropbox's authorize, token and API URLs, the API
// key's workspace) is used only when every secret it would direct comes from that same `.env`. Otherwise it is
// passed over, named on stderr with the reason, before anything is sent. Nor may a `.env` say where a token is
// written or served. Each case runs a real command against the emulator, with a `.env` that points at a second
// listener, the trap, which must hear nothing.
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { tempDir } from '../helpers/cli.js';
import { runInProcess, scriptedPrompter } from '../helpers/in-process.js';
import { grantRefreshToken, runCli, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;
let grant: string;
let trap: Server;
let trapUrl: string;
const trapped: { url: string; headers: string; body: string }[] = [];
const ATTACKER_KEY = 'attacker-workspace-key-0123456789';

beforeAll(async () => {
  ob = await startOnboarding({
    apiKey: 'emulator-key-0123456789',
    emulator: { workspaces: [{ name: 'default', apiKeys: ['emulator-key-0123456789'] }, { name: 'attacker', apiKeys: [ATTACKER_KEY] }] },
  });
  grant = await grantRefreshToken(ob);
  trap = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => {
      trapped.push({ url: req.url ?? '', headers: JSON.stringify(req.headers), body });
      res.writeHead(503).end();
    });
  });
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
  trapUrl = `http://127.0.0.1:${(trap.address() as { port: number }).port}`;
});
afterAll(async () => {
  await ob?.emulator.close();
  await new Promise((resolve) => trap?.close(resolve));
});
beforeEach(() => {
  trapped.length = 0;
});

/** A directory holding only a `.env` with these lines, as a cloned repository might. */
function cloneWith(lines: Record<string, string>): string {
  const dir = tempDir('syncauth-clone-');
  writeFileSync(path.join(dir, '.env'), Object.entries(lines).map(([k, v]) => `${k}=${v}`).join('\n'));
  return dir;
}

/** Everything a `.env` could point at the trap. */
const trapEndpoints = () => ({
  SYNCAUTH_BASE_URL: trapUrl,
  SYNCAUTH_AUTHORIZE_URL: `${trapUrl}/oauth2/authorize`,
  SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token`,
  SYNCAUTH_DROPBOX_API_URL: trapUrl,
});

/** A profile made only of environment variables, as in a container: no state, no stored secrets. */
const envOnly = (cwd: string, extra: Record<string, string> = {}) => ({
  SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config'),
  SYNCAUTH_STORE: 'env',
  SYNCAUTH_APP_KEY: ob.app.appKey,
  SYNCAUTH_APP_SECRET: ob.app.appSecret,
  SYNCAUTH_REFRESH_TOKEN: grant,
  SYNCAUTH_API_KEY: ob.apiKey,
  // The daemon's log goes to the process's stdout, which in-process is the test runner's.
  SYNCAUTH_LOG_LEVEL: 'silent',
  ...extra,
});

const secrets = () => [ob.app.appKey, ob.app.appSecret, grant, ob.apiKey];

function expectTrapHeardNothing(): void {
  for (const request of trapped) for (const secret of secrets()) expect(request.headers + request.body).not.toContain(secret);
  expect(trapped).toEqual([]);
}

const ignoredBecauseOfEnv = (variable: string, secretsNamed: string) =>
  `note: ${variable} in .env is ignored: ${secretsNamed} from the environment, and a .env may direct only its own secrets`;
const GRANT_FROM_ENV = 'SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET and SYNCAUTH_REFRESH_TOKEN come';

describe('an environment-only profile: a .env endpoint never receives its secrets', () => {
  it('token: the token URL and the Dropbox API URL of the .env are passed over and named, nothing reaches them', async () => {
    const cwd = cloneWith(trapEndpoints());
    const result = await runInProcess(['token'], { cwd, env: envOnly(cwd) });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(`${ignoredBecauseOfEnv('SYNCAUTH_TOKEN_URL', GRANT_FROM_ENV)} (to use it, set SYNCAUTH_TOKEN_URL in the environment or pass --token-url)`);
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_DROPBOX_API_URL', GRANT_FROM_ENV));
    expect(result.stderr).not.toContain('.env set SYNCAUTH_TOKEN_URL');
    // The built-in endpoint is what it tried instead (out of reach from the test machine).
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
  });

  it('exec: the same, and the child never runs (spawned: exec reads its own argv)', async () => {
    const cwd = cloneWith(trapEndpoints());
    const marker = path.join(cwd, 'ran');
    const result = await runCli(['exec', '--', 'touch', marker], { cwd, env: envOnly(cwd) });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_TOKEN_URL', GRANT_FROM_ENV));
    expect(result.code).not.toBe(0);
    expect(existsSync(marker)).toBe(false);
  });

  it('daemon --once: neither the token URL nor the service base URL of the .env hears from it', async () => {
    const cwd = cloneWith(trapEndpoints());
    const result = await runInProcess(['daemon', '--once'], { cwd, env: envOnly(cwd) });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_TOKEN_URL', GRANT_FROM_ENV));
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_BASE_URL', `SYNCAUTH_API_KEY, ${GRANT_FROM_ENV}`));
  });

  it('daemon --once with the Dropbox endpoints in the environment: it renews there, and the .env base URL never gets the API key', async () => {
    const cwd = cloneWith({ SYNCAUTH_BASE_URL: trapUrl });
    const tokenFile = path.join(cwd, 'token');
    const env = envOnly(cwd, {
      SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: ob.emulator.apiUrl, SYNCAUTH_REMOTE_URL: 'dropbox://data', SYNCAUTH_TOKEN_FILE: tokenFile,
    });
    const result = await runInProcess(['daemon', '--once'], { cwd, env });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_BASE_URL', `SYNCAUTH_API_KEY, ${GRANT_FROM_ENV}`));
    expect(statSync(tokenFile).size).toBeGreaterThan(0);
  });

  it('doctor: the API key is never checked against the .env base URL', async () => {
    const cwd = cloneWith({ SYNCAUTH_BASE_URL: trapUrl });
    const result = await runInProcess(['doctor'], { cwd, env: envOnly(cwd) });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_BASE_URL', `SYNCAUTH_API_KEY, ${GRANT_FROM_ENV}`));
  });

  it('source list: a service command with the API key in the environment finds no base URL rather than the .env one', async () => {
    const cwd = cloneWith({ SYNCAUTH_BASE_URL: trapUrl });
    const result = await runInProcess(['source', 'list'], { cwd, env: envOnly(cwd) });
    expectTrapHeardNothing();
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_BASE_URL', `SYNCAUTH_API_KEY, ${GRANT_FROM_ENV}`));
    expect(result.stderr).toContain("the service's base URL is not set");
  });

  it("a .env API key does not pick the workspace an environment's grant goes to", async () => {
    const cwd = cloneWith({ SYNCAUTH_API_KEY: ATTACKER_KEY });
    const { SYNCAUTH_API_KEY: _key, ...env } = envOnly(cwd, {
      SYNCAUTH_BASE_URL: ob.emulator.url, SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: ob.emulator.apiUrl, SYNCAUTH_REMOTE_URL: 'dropbox://data',
    });
    const result = await runInProcess(['daemon', '--once'], { cwd, env });
    expect([...(ob.emulator.state.workspaces.get('attacker')?.sources.values() ?? [])]).toEqual([]);
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_API_KEY', GRANT_FROM_ENV));
    expect(result.stderr).not.toContain(ATTACKER_KEY);
  });
});

describe('authorize and setup', () => {
  it('authorize --no-browser: the app secret and the code go to the built-in endpoints, not the .env ones', async () => {
    const cwd = cloneWith(trapEndpoints());
    const { SYNCAUTH_REFRESH_TOKEN: _grant, ...env } = envOnly(cwd);
    const result = await runInProcess(['authorize', '--no-browser', '--timeout', '5'], { cwd, env, stdin: 'pasted-code\n' });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_AUTHORIZE_URL', 'SYNCAUTH_APP_KEY and SYNCAUTH_APP_SECRET come'));
    expect(result.stderr).toContain(ignoredBecauseOfEnv('SYNCAUTH_TOKEN_URL', 'SYNCAUTH_APP_KEY and SYNCAUTH_APP_SECRET come'));
    expect(result.stderr).toContain('https://www.dropbox.com/oauth2/authorize?');
    expect(result.stderr).not.toContain(trapUrl);
    expect(result.stdout).toBe('');
  });

  it('authorize at a terminal: secrets typed at the prompt never go to a .env endpoint either', async () => {
    const cwd = cloneWith({ SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token`, SYNCAUTH_AUTHORIZE_URL: `${trapUrl}/oauth2/authorize` });
    const prompter = scriptedPrompter([ob.app.appKey, ob.app.appSecret, 'pasted-code']);
    const result = await runInProcess(['authorize', '--no-browser', '--no-open', '--timeout', '5'], { cwd, env: { SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config') }, prompter });
    expectTrapHeardNothing();
    expect(result.stderr).toContain('note: SYNCAUTH_TOKEN_URL in .env is ignored: SYNCAUTH_APP_KEY and SYNCAUTH_APP_SECRET would be asked for, not read from the .env');
  });

  it('a first setup --yes records no endpoint from the .env, and sends nothing there', async () => {
    const cwd = cloneWith({ SYNCAUTH_AUTHORIZE_URL: `${trapUrl}/oauth2/authorize`, SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token` });
    const env = envOnly(cwd, {
      SYNCAUTH_PROFILE: 'fresh', SYNCAUTH_BASE_URL: ob.emulator.url, SYNCAUTH_DROPBOX_API_URL: ob.emulator.apiUrl, SYNCAUTH_REMOTE_URL: 'dropbox://data',
    });
    const refused = await runInProcess(['setup', '--yes', '--no-check'], { cwd, env });
    expectTrapHeardNothing();
    expect(refused.stderr).toContain(
      'note: SYNCAUTH_TOKEN_URL in .env is ignored: setup records the endpoints it uses, and takes them only from flags, the environment or the defaults',
    );
    expect(refused.code).not.toBe(0);
    expect(await openProfileStore(env.SYNCAUTH_CONFIG_DIR).read('fresh')).toBeUndefined();

    // With the token URL in the environment setup succeeds, and records the default authorize URL, not the .env's.
    const done = await runInProcess(['setup', '--yes', '--no-check'], { cwd, env: { ...env, SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl } });
    expect(done.code, done.stderr).toBe(0);
    expectTrapHeardNothing();
    const state = await openProfileStore(env.SYNCAUTH_CONFIG_DIR).read('fresh');
    expect(state?.authorizeUrl).toBe('https://www.dropbox.com/oauth2/authorize');
    expect(state?.tokenUrl).toBe(ob.emulator.tokenUrl);
  });
});

describe('where the secrets come from decides', () => {
  it('a .env that holds the secrets as well as the endpoints is used as it is', async () => {
    const cwd = cloneWith({
      SYNCAUTH_APP_KEY: ob.app.appKey, SYNCAUTH_APP_SECRET: ob.app.appSecret, SYNCAUTH_REFRESH_TOKEN: grant,
      SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: ob.emulator.apiUrl,
    });
    const result = await runInProcess(['token'], { cwd, env: { SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config'), SYNCAUTH_STORE: 'env' } });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^\S+\n$/);
    expect(result.stderr).toBe(
      'note: .env set SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_REFRESH_TOKEN, SYNCAUTH_TOKEN_URL, SYNCAUTH_DROPBOX_API_URL\n',
    );
  });

  it("a profile whose store holds secrets but that has no recorded endpoints: the .env's are passed over too", async () => {
    const cwd = cloneWith({
      SYNCAUTH_APP_KEY: 'planted-app-key', SYNCAUTH_APP_SECRET: 'planted-app-secret', SYNCAUTH_REFRESH_TOKEN: 'planted-refresh-token',
      SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token`,
    });
    const configDir = path.join(cwd, 'config');
    const storeKey = 'a-store-key-of-enough-length-0123456789';
    await openSecretStore({ kind: 'file', configDir, storeKey }).set('orphan', { app_key: ob.app.appKey, app_secret: ob.app.appSecret, refresh_token: grant });
    const result = await runInProcess(['token'], { cwd, env: { SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: storeKey, SYNCAUTH_PROFILE: 'orphan' } });
    expectTrapHeardNothing();
    expect(result.stderr).toContain(
      'note: SYNCAUTH_TOKEN_URL in .env is ignored: the secrets come from profile "orphan"\'s file store, and a .env may direct only its own secrets',
    );
  });
});

describe('where a token goes is never a .env setting', () => {
  it('the token file mode and group, the socket and the coordinator are ignored and named', async () => {
    const cwd = cloneWith({
      SYNCAUTH_TOKEN_FILE_MODE: '0644', SYNCAUTH_TOKEN_FILE_GROUP: 'nogroup', SYNCAUTH_SOCKET: path.join(tempDir(), 'planted.sock'),
      SYNCAUTH_REDIS_URL: 'redis://127.0.0.1:1',
    });
    const tokenFile = path.join(cwd, 'token');
    const env = envOnly(cwd, { SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl, SYNCAUTH_DROPBOX_API_URL: ob.emulator.apiUrl, SYNCAUTH_TOKEN_FILE: tokenFile });
    const { SYNCAUTH_API_KEY: _key, ...withoutService } = env;
    const result = await runInProcess(['daemon', '--once'], { cwd, env: withoutService });
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'note: .env may not set SYNCAUTH_TOKEN_FILE_MODE, SYNCAUTH_TOKEN_FILE_GROUP, SYNCAUTH_SOCKET, SYNCAUTH_REDIS_URL; ignored (set them in the environment instead)',
    );
  });
});
