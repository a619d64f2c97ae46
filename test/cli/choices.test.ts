// What setup chose is remembered: `config.json` in the config dir records each profile's store, every command
// opens the profile with it (below flags and the environment; a `.env` can never choose a store), a missing
// store key is asked for at a terminal and named without one, doctor checks the store the file names, and a
// config dir of the previous release (no config.json) works as before.
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { resolveSettings } from '../../src/config.js';
import { openSecretStore } from '../../src/credentials/index.js';
import { DEFAULT_EMULATOR_API_KEY, startEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { CONFIG_FILE_NAME, readConfigFile, recordProfileChoices } from '../../src/profile/config-file.js';
import { openProfileSession } from '../../src/sync/profile-session.js';
import { ROOT, tempDir } from '../helpers/cli.js';
import { runInProcess, scriptedPrompter } from '../helpers/in-process.js';

const FIXTURE = path.join(ROOT, 'test/fixtures/previous-release/config');
const STORE_KEY = 'previous-release-fixture-store-key';
const REFRESH_TOKEN = '6YIfQMATTLtAAAAAAAAAAe09GItesfxfgDQC9hyY-l5ns4N1MOMPgKr-qyd7kxFQ';
const ISSUED = 'sl.choices-renewed-access-token';
// No keychain on this "host": a session bus that is not there.
const NO_BUS = { DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent/syncauth-no-bus' };

let server: Server;
let tokenUrl: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const ok = new URLSearchParams(body).get('refresh_token') === REFRESH_TOKEN;
      res.writeHead(ok ? 200 : 400, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ok ? { access_token: ISSUED, token_type: 'bearer', expires_in: 14_400 } : { error: 'invalid_grant' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** A copy of the previous release's config dir (file store, profile docs), optionally with setup's record. */
async function configDir(recorded: boolean): Promise<string> {
  const dir = path.join(tempDir('syncauth-choices-'), 'config');
  cpSync(FIXTURE, dir, { recursive: true });
  if (recorded) await recordProfileChoices(dir, 'docs', { store: 'file' });
  return dir;
}

const token = (dir: string, env: Record<string, string | undefined>, prompter?: ReturnType<typeof scriptedPrompter>) =>
  runInProcess(['token', '--force', '--profile', 'docs', '--token-url', tokenUrl, '--endpoint-override'], {
    env: { SYNCAUTH_CONFIG_DIR: dir, ...NO_BUS, ...env },
    ...(prompter ? { prompter } : {}),
  });

describe('the config file', () => {
  test('is versioned, private and keeps every profile; a newer version or a stray key is refused by name', async () => {
    const dir = await configDir(true);
    await recordProfileChoices(dir, 'other', { store: 'keychain' });
    const file = path.join(dir, CONFIG_FILE_NAME);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ version: 1, profiles: { docs: { store: 'file' }, other: { store: 'keychain' } } });
    const { statSync } = await import('node:fs');
    expect(statSync(file).mode & 0o777).toBe(0o600);

    writeFileSync(file, JSON.stringify({ version: 2, profiles: {} }));
    await expect(readConfigFile(dir)).rejects.toThrow(/newer syncauth \(version 2\)/);
    writeFileSync(file, JSON.stringify({ version: 1, profiles: { docs: { store: 'file', refresh_token: 'x' } } }));
    await expect(readConfigFile(dir)).rejects.toThrow(/config file .* is not valid/);
  });

  test('stands below flags and the environment, and a .env cannot choose the store', () => {
    const configFile = { profiles: { docs: { store: 'file' } } };
    const base = { env: { SYNCAUTH_PROFILE: 'docs' }, configFile, defaultConfigDir: '/tmp/x' };
    const chosen = resolveSettings(base);
    expect(chosen.values.store).toBe('file');
    expect(chosen.sources.store).toBe('config');
    expect(resolveSettings({ ...base, env: { ...base.env, SYNCAUTH_STORE: 'env' } }).values.store).toBe('env');
    expect(resolveSettings({ ...base, flags: { store: 'keychain' } }).values.store).toBe('keychain');
    expect(resolveSettings({ ...base, dotenv: { SYNCAUTH_STORE: 'keychain' } }).values.store).toBe('file');
    // Another profile's record is not this one's.
    expect(resolveSettings({ ...base, env: { SYNCAUTH_PROFILE: 'work' } }).values.store).toBe('keychain');
  });
});

describe('a profile setup put in the encrypted file store', () => {
  test('is opened with that store by the library too, which reads config.json itself', async () => {
    const dir = await configDir(true);
    const session = await openProfileSession({ inputs: { flags: { configDir: dir }, env: { SYNCAUTH_STORE_KEY: STORE_KEY } }, name: 'docs' });
    expect(session.secrets.kind).toBe('file');
    expect(session.settings.sources.store).toBe('config');
    expect((await session.secrets.get('docs')).refresh_token).toBe(REFRESH_TOKEN);
  });

  test('opens with the recorded store: only the key is needed, not SYNCAUTH_STORE (and a .env cannot move it)', async () => {
    const dir = await configDir(true);
    const cwd = tempDir('syncauth-choices-cwd-');
    writeFileSync(path.join(cwd, '.env'), 'SYNCAUTH_STORE=keychain\n');
    const result = await runInProcess(['token', '--force', '--profile', 'docs', '--token-url', tokenUrl, '--endpoint-override'], {
      cwd, env: { SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE_KEY: STORE_KEY, ...NO_BUS },
    });
    expect(result.stderr).not.toMatch(/keychain|D-Bus/i);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${ISSUED}\n`);
  });

  test('at a terminal, a missing key is asked for, hidden, once, and never shown', async () => {
    const dir = await configDir(true);
    const prompter = scriptedPrompter([STORE_KEY]);
    const result = await token(dir, {}, prompter);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${ISSUED}\n`);
    expect(prompter.asked).toHaveLength(1);
    expect(prompter.asked[0]).toMatch(/key of the encrypted file store .*secrets\.enc \(hidden; or set SYNCAUTH_STORE_KEY\)/);
    expect(result.stderr).not.toContain(STORE_KEY);
  });

  test('without a terminal, nothing is asked and the error names SYNCAUTH_STORE_KEY', async () => {
    const dir = await configDir(true);
    const result = await token(dir, {});
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('SYNCAUTH_STORE_KEY');
    expect(result.stderr).not.toMatch(/D-Bus|keychain is not available/i);
  });

  test("the missing key's error names what chose the file store: config.json, not a SYNCAUTH_STORE never set", async () => {
    const dir = await configDir(true);
    const recorded = await token(dir, {});
    expect(recorded.code).toBe(2);
    expect(recorded.stderr).not.toContain('SYNCAUTH_STORE=file');
    expect(recorded.stderr).toContain(`the file store, which ${path.join(dir, CONFIG_FILE_NAME)} records for profile "docs", needs SYNCAUTH_STORE_KEY`);
    // Where the person did set it, that is what is named.
    const set = await token(dir, { SYNCAUTH_STORE: 'file' });
    expect(set.stderr).toContain('SYNCAUTH_STORE=file needs SYNCAUTH_STORE_KEY');
  });

  test('SYNCAUTH_STORE in the environment still wins over the record', async () => {
    const dir = await configDir(true);
    const result = await token(dir, { SYNCAUTH_STORE: 'keychain', SYNCAUTH_STORE_KEY: STORE_KEY });
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe('');
  });

  test('a config file that cannot be read stops a command, naming the file', async () => {
    const dir = await configDir(true);
    writeFileSync(path.join(dir, CONFIG_FILE_NAME), '{not json');
    const result = await token(dir, { SYNCAUTH_STORE_KEY: STORE_KEY });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`the config file ${path.join(dir, CONFIG_FILE_NAME)} is not valid (it is not JSON)`);
  });
});

describe('a config dir of the previous release (no config.json)', () => {
  test('works as before: the file store when SYNCAUTH_STORE=file says so, and nothing is written into it', async () => {
    const dir = await configDir(false);
    const result = await token(dir, { SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY });
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${ISSUED}\n`);
    expect(existsSync(path.join(dir, CONFIG_FILE_NAME))).toBe(false);
  });

  test('doctor names the secrets.enc beside a keychain that does not answer', async () => {
    const dir = await configDir(false);
    const result = await runInProcess(['doctor', '--json'], { env: { SYNCAUTH_CONFIG_DIR: dir, ...NO_BUS } });
    const { checks } = JSON.parse(result.stdout) as { checks: { check: string; subject: string; status: string; fix?: string }[] };
    const store = checks.find((c) => c.check === 'store');
    expect(store).toMatchObject({ subject: 'OS keychain', status: 'fail' });
    expect(store?.fix).toContain(`${path.join(dir, 'secrets.enc')} exists`);
    expect(checks.some((c) => c.check === 'config-file')).toBe(false);
  });
});

describe('doctor', () => {
  test('checks the store the config file names, not the keychain', async () => {
    const dir = await configDir(true);
    const result = await runInProcess(['doctor', '--json'], { env: { SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE_KEY: STORE_KEY, ...NO_BUS } });
    const { checks } = JSON.parse(result.stdout) as { checks: { check: string; subject: string; status: string; message: string }[] };
    expect(checks.find((c) => c.check === 'config-file')).toMatchObject({ status: 'ok', message: `${path.join(dir, CONFIG_FILE_NAME)} records profile docs: file store` });
    const stores = checks.filter((c) => c.check === 'store');
    expect(stores).toEqual([expect.objectContaining({ subject: path.join(dir, 'secrets.enc'), status: 'ok' })]);
    expect(checks.find((c) => c.check === 'profile' && c.subject === 'docs')?.status).toBe('ok');
  });

  test('without the key it says so and asks nothing, even at a terminal', async () => {
    const dir = await configDir(true);
    const prompter = scriptedPrompter([]);
    const result = await runInProcess(['doctor', '--json'], { env: { SYNCAUTH_CONFIG_DIR: dir, ...NO_BUS }, prompter });
    const { checks } = JSON.parse(result.stdout) as { checks: { check: string; status: string; message: string }[] };
    expect(checks.find((c) => c.check === 'store')).toMatchObject({ status: 'fail', message: 'SYNCAUTH_STORE_KEY is not set, so the file cannot be opened' });
    expect(prompter.asked).toEqual([]);
  });

  test('reports a config file it cannot read', async () => {
    const dir = await configDir(true);
    writeFileSync(path.join(dir, CONFIG_FILE_NAME), JSON.stringify({ version: 7, profiles: {} }));
    const result = await runInProcess(['doctor', '--json'], { env: { SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY, ...NO_BUS } });
    expect(result.code).toBe(1);
    const { checks } = JSON.parse(result.stdout) as { checks: { check: string; status: string; message: string }[] };
    expect(checks.find((c) => c.check === 'config-file')).toMatchObject({ status: 'fail' });
    expect(checks.find((c) => c.check === 'config-file')?.message).toContain('newer syncauth (version 7)');
  });
});

describe('source list, for a profile setup put in the encrypted file store', () => {
  test('takes the API key from the store config.json records: only the key is needed, not SYNCAUTH_STORE', async () => {
    const emulator = await startEmulator();
    try {
      const dir = path.join(tempDir('syncauth-choices-'), 'config');
      await openProfileStore(dir).update('docs', () => ({ baseUrl: emulator.url, remoteUrl: 'dropbox://data' }));
      await openSecretStore({ kind: 'file', configDir: dir, storeKey: STORE_KEY, env: {} }).set('docs', { api_key: DEFAULT_EMULATOR_API_KEY });
      await recordProfileChoices(dir, 'docs', { store: 'file' });
      const result = await runInProcess(['source', 'list', '--profile', 'docs'], { env: { SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE_KEY: STORE_KEY, ...NO_BUS } });
      expect(result.stderr).not.toMatch(/keychain|D-Bus/i);
      expect(result.code, result.stderr).toBe(0);
    } finally {
      await emulator.close();
    }
  });
});
