// A config dir written by the previous release (test/fixtures/previous-release, see its README) still works
// with this one: its state is read, its encrypted secrets open with the same key (and are migrated to the
// per-profile records on the way), `status` reports it, and
// `token --force` renews with the refresh token stored there and records the renewal in the same format.
import { cpSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { openFileSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { ROOT, runCli, tempDir } from '../helpers/cli.js';

const FIXTURE = path.join(ROOT, 'test/fixtures/previous-release/config');
const STORE_KEY = 'previous-release-fixture-store-key';
const APP_KEY = 'emu1appkey2k3y4';
const APP_SECRET = 'emu5appsecret6s';
const REFRESH_TOKEN = '6YIfQMATTLtAAAAAAAAAAe09GItesfxfgDQC9hyY-l5ns4N1MOMPgKr-qyd7kxFQ';
const ISSUED = 'sl.fixture-renewed-access-token';

let server: Server;
let tokenUrl: string;
const forms: URLSearchParams[] = [];

beforeAll(async () => {
  // Dropbox's token endpoint, as far as a renewal goes: it accepts only the fixture's grant.
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      forms.push(form);
      const ok = req.url === '/oauth2/token' && form.get('grant_type') === 'refresh_token' && form.get('refresh_token') === REFRESH_TOKEN &&
        form.get('client_id') === APP_KEY && form.get('client_secret') === APP_SECRET;
      res.writeHead(ok ? 200 : 400, { 'content-type': 'application/json' });
      res.end(JSON.stringify(ok ? { access_token: ISSUED, token_type: 'bearer', expires_in: 14_400 } : { error: 'invalid_grant', error_description: 'refresh token is malformed' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth2/token`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function copyOfFixture(): string {
  const configDir = path.join(tempDir('syncauth-previous-'), 'config');
  cpSync(FIXTURE, configDir, { recursive: true });
  return configDir;
}

describe('a config dir written by the previous release', () => {
  test('its state and its encrypted secrets open as they are', async () => {
    const configDir = copyOfFixture();
    const state = await openProfileStore(configDir).read('docs');
    expect(state).toMatchObject({ version: 1, profile: 'docs', connectorId: '0a4100b9-3819-45c7-a907-b360889584d7', connectorName: 'dropbox-data' });
    const before = JSON.parse(readFileSync(path.join(configDir, 'secrets.enc'), 'utf8')) as { version: number; kdf: unknown };
    expect(before.version).toBe(2);
    const secrets = await openFileSecretStore({ configDir, storeKey: () => STORE_KEY }).get('docs');
    expect(secrets).toMatchObject({ app_key: APP_KEY, app_secret: APP_SECRET, refresh_token: REFRESH_TOKEN });
    // Opening it migrated the one file to the keyring (same KDF and salt) and a record per profile.
    expect(JSON.parse(readFileSync(path.join(configDir, 'secrets.enc'), 'utf8'))).toMatchObject({ version: 3, kdf: before.kdf });
    expect(readdirSync(path.join(configDir, 'secrets'))).toEqual(['docs.enc']);
    expect(await openFileSecretStore({ configDir, storeKey: () => STORE_KEY }).get('docs')).toEqual(secrets);
  });

  test('status reports it, and token --force renews with its stored grant and records that in the same format', async () => {
    const configDir = copyOfFixture();
    const env = { SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: STORE_KEY };
    const status = await runCli(['status', '--json', '--profile', 'docs'], { env });
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
    expect(JSON.stringify(JSON.parse(status.stdout))).toContain('0a4100b9-3819-45c7-a907-b360889584d7');

    const token = await runCli(['token', '--force', '--profile', 'docs', '--token-url', tokenUrl, '--endpoint-override'], { env });
    expect(token.stderr).not.toContain('error');
    expect(token.code).toBe(0);
    expect(token.stdout).toBe(`${ISSUED}\n`);
    expect(forms.at(-1)?.get('refresh_token')).toBe(REFRESH_TOKEN);

    // The state file keeps its format; the renewal went to the profile's renewal record, and status shows it.
    const state = JSON.parse(readFileSync(path.join(configDir, 'profiles/docs.json'), 'utf8')) as Record<string, unknown>;
    expect(state.version).toBe(1);
    expect(statSync(path.join(configDir, 'profiles/docs.renewed')).mode & 0o777).toBe(0o600);
    const after = await runCli(['status', '--json', '--profile', 'docs'], { env });
    expect(after.code).toBe(0);
    const reported = JSON.stringify(JSON.parse(after.stdout));
    const expiry = /"accessTokenExpiresAt":"([^"]+)"/.exec(reported)?.[1];
    expect(Date.parse(String(expiry))).toBeGreaterThan(Date.now() + 3 * 3_600_000);
    // The secrets file still opens with the same key, the grant in it unchanged.
    expect(await openFileSecretStore({ configDir, storeKey: () => STORE_KEY }).get('docs')).toMatchObject({ refresh_token: REFRESH_TOKEN });
  });
});

describe('the state format after the previous release', () => {
  test("recording the Dropbox account makes the previous release's state version 2; a state without one stays version 1", async () => {
    const configDir = copyOfFixture();
    const store = openProfileStore(configDir);
    const before = await store.read('docs');
    expect(before).toMatchObject({ version: 1 });
    expect(before).not.toHaveProperty('accountId');
    // A write that adds nothing new keeps the format the previous release reads.
    await store.update('docs', (current) => (current ? { ...current, recursive: true } : current));
    expect(JSON.parse(readFileSync(path.join(configDir, 'profiles/docs.json'), 'utf8'))).toMatchObject({ version: 1, recursive: true });
    await store.update('docs', (current) => (current ? { ...current, accountId: 'dbid:AAfixtureaccount' } : current));
    const written = JSON.parse(readFileSync(path.join(configDir, 'profiles/docs.json'), 'utf8')) as Record<string, unknown>;
    expect(written).toMatchObject({ version: 2, accountId: 'dbid:AAfixtureaccount', connectorId: '0a4100b9-3819-45c7-a907-b360889584d7' });
    expect(await openProfileStore(configDir).read('docs')).toMatchObject({ version: 2, accountId: 'dbid:AAfixtureaccount' });
  });
});
