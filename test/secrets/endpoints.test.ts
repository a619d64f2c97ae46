// A profile's secrets go only to the endpoints recorded with them at setup. A `.env` in the working directory
// (one that came with a cloned repository, say) can neither redirect them nor decide where secrets are kept;
// changing an endpoint takes an explicit act: setup again, or --endpoint-override / SYNCAUTH_ENDPOINT_OVERRIDE=1.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/cli.js';
import {
  newHome, onboardingEnv, readProfileState, runCli, runWithApproval, sources, startOnboarding, storedSecrets, type Home, type Onboarding,
} from '../helpers/onboarding.js';

let ob: Onboarding;
let home: Home;
let trap: Server;
let trapUrl: string;
const trapped: { url: string; headers: Record<string, unknown>; body: string }[] = [];
const ATTACKER_KEY = 'attacker-workspace-key-0123456789';

/** A directory holding only a `.env` with these lines, as a cloned repository might. */
function repoWithDotenv(lines: Record<string, string>): string {
  const dir = tempDir('syncauth-clone-');
  writeFileSync(path.join(dir, '.env'), Object.entries(lines).map(([k, v]) => `${k}=${v}`).join('\n'));
  return dir;
}

/** The profile's store and name only: the endpoints come from its recorded state. */
const storeEnv = () => ({ SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey, SYNCAUTH_PROFILE: 'bound' });

beforeAll(async () => {
  const apiKey = 'emulator-key-0123456789';
  ob = await startOnboarding({ apiKey, emulator: { workspaces: [{ name: 'default', apiKeys: [apiKey] }, { name: 'attacker', apiKeys: [ATTACKER_KEY] }] } });
  trap = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => { body += chunk.toString(); });
    req.on('end', () => {
      trapped.push({ url: req.url ?? '', headers: req.headers, body });
      res.writeHead(503).end();
    });
  });
  await new Promise<void>((resolve) => trap.listen(0, '127.0.0.1', resolve));
  trapUrl = `http://127.0.0.1:${(trap.address() as { port: number }).port}`;
  home = newHome();
  const setup = await runWithApproval(['setup', '--yes', '--no-open'], { env: onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'bound' }), cwd: home.dir });
  if (setup.code !== 0) throw new Error(`setup failed:\n${setup.stderr}`);
});
afterAll(async () => {
  await ob?.emulator.close();
  await new Promise((resolve) => trap?.close(resolve));
});

describe('endpoints recorded at setup', () => {
  it('a .env that names another token endpoint is refused before anything is sent, naming both hosts', async () => {
    const cwd = repoWithDotenv({ SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token` });
    const result = await runCli(['token'], { env: storeEnv(), cwd });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    const recorded = new URL(ob.emulator.tokenUrl).host;
    expect(result.stderr).toContain('note: .env set SYNCAUTH_TOKEN_URL\n');
    expect(result.stderr).toContain(`SYNCAUTH_TOKEN_URL (in .env) points at ${new URL(trapUrl).host}, not the recorded ${recorded}`);
    expect(result.stderr).toMatch(/--endpoint-override|SYNCAUTH_ENDPOINT_OVERRIDE=1/);
    expect(trapped).toEqual([]);
  });

  it('the same holds for the service base URL, and SYNCAUTH_ENDPOINT_OVERRIDE in the .env itself is ignored', async () => {
    const cwd = repoWithDotenv({ SYNCAUTH_BASE_URL: trapUrl, SYNCAUTH_ENDPOINT_OVERRIDE: '1' });
    const result = await runCli(['refresh'], { env: storeEnv(), cwd });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('note: .env may not set SYNCAUTH_ENDPOINT_OVERRIDE; ignored');
    expect(result.stderr).toContain(`SYNCAUTH_BASE_URL (in .env) points at ${new URL(trapUrl).host}`);
    expect(trapped).toEqual([]);
  });

  it('an environment variable or a flag alone is refused too; with the override, the run uses it', async () => {
    const cwd = tempDir();
    const fromEnv = await runCli(['token'], { env: { ...storeEnv(), SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token` }, cwd });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain('SYNCAUTH_TOKEN_URL points at');
    const fromFlag = await runCli(['token', '--token-url', `${trapUrl}/oauth2/token`], { env: storeEnv(), cwd });
    expect(fromFlag.code).toBe(2);
    expect(fromFlag.stderr).toContain('--token-url points at');
    expect(trapped).toEqual([]);

    const overridden = await runCli(['token', '--token-url', `${trapUrl}/oauth2/token`, '--endpoint-override'], { env: storeEnv(), cwd });
    expect(overridden.stderr).not.toContain('recorded');
    const viaEnv = await runCli(['token'], { env: { ...storeEnv(), SYNCAUTH_TOKEN_URL: `${trapUrl}/oauth2/token`, SYNCAUTH_ENDPOINT_OVERRIDE: '1' }, cwd });
    expect(viaEnv.stderr).not.toContain('recorded');
    expect(trapped.map((t) => t.url)).toEqual(['/oauth2/token', '/oauth2/token']);
    trapped.length = 0;
  });

  it('a refresh with the override uses the other endpoint for that run only: it records none', async () => {
    const recorded = readProfileState(home, 'bound')?.baseUrl as string;
    // The same emulator under another name: a different host to syncauth, so only the override lets it through.
    const elsewhere = recorded.replace('127.0.0.1', 'localhost');
    const result = await runCli(['refresh', '--endpoint-override'], { env: { ...storeEnv(), SYNCAUTH_BASE_URL: elsewhere }, cwd: tempDir() });
    expect(result.code, result.stderr).toBe(0);
    expect(readProfileState(home, 'bound')?.baseUrl).toBe(recorded);
    const after = await runCli(['refresh'], { env: storeEnv(), cwd: tempDir() });
    expect(after.code, after.stderr).toBe(0);
  });

  it('with the recorded endpoints (from the state, the environment or .env alike) the commands work', async () => {
    const cwd = repoWithDotenv({ SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl, SYNCAUTH_REMOTE_URL: 'dropbox://data' });
    const result = await runCli(['token'], { env: storeEnv(), cwd });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^\S+\n$/);
    expect(result.stderr).toBe('note: .env set SYNCAUTH_REMOTE_URL, SYNCAUTH_TOKEN_URL\n');
  });

  it('setup is the explicit act: an endpoint from the environment is recorded, one from .env is refused', async () => {
    const moved = ob.emulator.tokenUrl.replace('127.0.0.1', 'localhost');
    const dotenvCwd = repoWithDotenv({ SYNCAUTH_TOKEN_URL: moved });
    const refused = await runCli(['setup', '--yes', '--no-open'], { env: onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'bound', SYNCAUTH_TOKEN_URL: undefined }), cwd: dotenvCwd });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('SYNCAUTH_TOKEN_URL (in .env) points at localhost');

    const again = await runWithApproval(['setup', '--yes', '--no-open'], { env: onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'bound', SYNCAUTH_TOKEN_URL: moved }), cwd: home.dir });
    expect(again.code, again.stderr).toBe(0);
    expect(readProfileState(home, 'bound')?.tokenUrl).toBe(moved);
    const token = await runCli(['token'], { env: storeEnv(), cwd: home.dir });
    expect(token.code, token.stderr).toBe(0);
  });
});

describe('what a .env may set', () => {
  it("a .env's secrets never replace a set-up profile's stored ones (its API key would pick the workspace)", async () => {
    const cwd = repoWithDotenv({ SYNCAUTH_API_KEY: ATTACKER_KEY });
    const result = await runCli(['refresh'], { env: storeEnv(), cwd });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain('note: .env set SYNCAUTH_API_KEY\n');
    expect(result.stderr).toContain('note: profile "bound" uses its stored secrets, not SYNCAUTH_API_KEY from .env');
    expect(result.stderr).not.toContain(ATTACKER_KEY);
    expect([...(ob.emulator.state.workspaces.get('attacker')?.sources.values() ?? [])]).toEqual([]);
    expect(sources(ob).length).toBeGreaterThan(0);
    expect((await storedSecrets(home, 'bound')).api_key).toBe(ob.apiKey);
  });

  it('a .env cannot choose the config directory, the store, its key or the token file', async () => {
    const elsewhere = tempDir('syncauth-planted-');
    mkdirSync(path.join(elsewhere, 'profiles'));
    writeFileSync(path.join(elsewhere, 'profiles', 'bound.json'), JSON.stringify({
      version: 1, profile: 'bound', tokenUrl: `${trapUrl}/oauth2/token`, createdAt: new Date().toISOString(), updatedAt: new Date().toISOString(),
    }));
    const cwd = repoWithDotenv({ SYNCAUTH_CONFIG_DIR: elsewhere, SYNCAUTH_STORE: 'env', SYNCAUTH_STORE_KEY: 'planted-store-key-0123456789', SYNCAUTH_TOKEN_FILE: path.join(elsewhere, 'token') });
    const { SYNCAUTH_CONFIG_DIR: _dir, ...env } = storeEnv();
    const result = await runCli(['token'], { env: { ...env, HOME: home.dir, XDG_CONFIG_HOME: path.join(home.dir, 'xdg') }, cwd });
    expect(result.stderr).toContain(
      'note: .env may not set SYNCAUTH_CONFIG_DIR, SYNCAUTH_STORE, SYNCAUTH_STORE_KEY, SYNCAUTH_TOKEN_FILE; ignored (set them in the environment instead)',
    );
    expect(result.stderr).not.toContain('planted');
    expect(trapped).toEqual([]);
  });
});
