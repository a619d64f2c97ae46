// A daemon (or one pass, --once) that would renew a token and hand it to nobody is refused before it renews:
// with the env store (nothing kept), no token file, template or socket, and no base URL and API key to update a
// connector with, it exits 2 naming what is missing. Anything that takes the token is work: a sink, a connector
// to reconcile, or a writable store that keeps it for `token` and `exec`.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openFileSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { RUN_AS, runCli, tempDir } from '../helpers/cli.js';
import { connectorsNamed, emulator, obtainGrant, tokenRequests } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';

/** The Dockerfile comment's example: the env store and a grant, nothing else. */
function grantOnly(env: Record<string, string>): Record<string, string> {
  const { SYNCAUTH_BASE_URL: _base, SYNCAUTH_API_KEY: _key, SYNCAUTH_LISTEN: _listen, ...rest } = env;
  return rest;
}

describe('a daemon with nothing to do', () => {
  it('--once with only the env store and a grant exits 2, naming what is missing, and renews nothing', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const before = tokenRequests(emu);
    const result = await runCli(['daemon', '--once'], { env: grantOnly(containerEnv(emu, grant, home, { profile: 'idle' })), cwd: home });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('daemon --once has nothing to do');
    expect(result.stderr).toContain('the env store keeps nothing');
    for (const name of ['--token-file', 'SYNCAUTH_TOKEN_FILE', '--template', 'SYNCAUTH_BASE_URL', 'SYNCAUTH_API_KEY', `${RUN_AS} exec`]) {
      expect(result.stderr).toContain(name);
    }
    // One pass serves no socket, so a socket is not offered as the way out.
    expect(result.stderr).not.toContain('--socket');
    expect(result.stdout).not.toContain('one pass done');
    expect(tokenRequests(emu)).toBe(before);
  }, 30_000);

  it('the long-running daemon likewise, offering the socket too', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const result = await runCli(['daemon'], { env: grantOnly(containerEnv(emu, grant, home, { profile: 'idle' })), cwd: home });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('daemon has nothing to do');
    expect(result.stderr).toContain('--socket (SYNCAUTH_SOCKET)');
  }, 30_000);

  it('a token file is work: the same pass publishes and exits 0', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const result = await runCli(['daemon', '--once'], { env: grantOnly(containerEnv(emu, grant, home, { profile: 'pub', tokenFile })), cwd: home });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(emu.state.accessTokens.get(readFileSync(tokenFile, 'utf8'))?.expiresAt).toBeGreaterThan(Date.now());
  }, 30_000);

  it('a connector to update is work: with the base URL and API key the pass reconciles and exits 0', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const { SYNCAUTH_LISTEN: _listen, ...env } = containerEnv(emu, grant, home, { profile: 'conn' });
    const result = await runCli(['daemon', '--once'], { env, cwd: home });
    expect(result.code).toBe(0);
    expect(connectorsNamed(emu, 'conn-conn')).toHaveLength(1);
  }, 30_000);

  it('a writable store is work: the token the pass kept serves `token`', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const configDir = path.join(home, 'config');
    const storeKey = 'daemon-idle-test-store-key-0123456789';
    await openFileSecretStore({ configDir, storeKey: () => storeKey }).set('kept', {
      app_key: grant.appKey, app_secret: grant.appSecret, refresh_token: grant.refreshToken,
    });
    await openProfileStore(configDir).update('kept', () => ({ tokenUrl: emu.tokenUrl, dropboxApiUrl: emu.apiUrl }));
    const env = { SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: storeKey };
    const pass = await runCli(['daemon', '--once'], { env, cwd: home });
    expect(pass.stderr).toBe('');
    expect(pass.code).toBe(0);
    const renewals = tokenRequests(emu);
    const token = await runCli(['token', '--profile', 'kept'], { env, cwd: home });
    expect(token.code).toBe(0);
    expect(emu.state.accessTokens.get(token.stdout.trim())?.expiresAt).toBeGreaterThan(Date.now());
    // `token` took the token the pass kept: no second renewal.
    expect(tokenRequests(emu)).toBe(renewals);
  }, 30_000);
});
