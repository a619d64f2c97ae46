// `syncauth doctor` against the emulator: a healthy profile passes every check and exits 0; each way it can be
// broken (a rejected API key, a wrong store key, a revoked grant, a connector gone from the service, a token
// file path that is a directory, a config directory that is a file, no daemon where one should answer) is one
// failed line naming the fix, and exit 1. No secret ever appears in what it prints.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openProfileStore } from '../../src/profile/index.js';
import { containerEnv, spawnDaemon } from '../daemon/process.js';
import { tempDir, RUN_AS } from '../helpers/cli.js';
import { grantRefreshToken, onboardWithGrant, runCli, startOnboarding, type Onboarded, type Onboarding } from '../helpers/onboarding.js';

interface Check {
  check: string;
  subject: string;
  status: 'ok' | 'warn' | 'fail';
  message: string;
  fix?: string;
}

let ob: Onboarding;
beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

function doctor(p: Onboarded, args: string[] = [], env: Record<string, string> = {}) {
  return runCli(['doctor', '--profile', p.profile, ...args], { env: { ...p.env, ...env }, cwd: p.home.dir });
}

/** Everything secret this profile involves, which no output may contain. */
function secretsOf(p: Onboarded): string[] {
  return [p.refreshToken, p.home.storeKey, ob.apiKey, ob.app.appKey, ob.app.appSecret];
}

function expectNoSecret(p: Onboarded, text: string): void {
  for (const secret of secretsOf(p)) expect(text).not.toContain(secret);
}

describe.concurrent('doctor', () => {
  it('passes a healthy profile: store, config directory, profile, service and key, and exits 0', async () => {
    const p = await onboardWithGrant(ob, 'healthy');
    const result = await doctor(p);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^ok +config directory +${p.home.configDir} is a writable directory$`, 'm'));
    expect(result.stdout).toMatch(/^ok +secret store +\S+secrets\.enc +opens with SYNCAUTH_STORE_KEY \(1 profile\)$/m);
    expect(result.stdout).toMatch(/^ok +config file +\S+config\.json records profile healthy: file store$/m);
    expect(result.stdout).toMatch(/^ok +profile healthy +state readable, Dropbox grant present, access token expires in \d/m);
    expect(result.stdout).toMatch(new RegExp(`^ok +service +${ob.emulator.url} +reachable, API key accepted \\(profile healthy\\)$`, 'm'));
    expect(result.stdout).toMatch(/\nno problems found\n$/);
    expect(result.stdout).not.toMatch(/^(warn|fail)/m);
    expectNoSecret(p, result.stdout + result.stderr);

    const json = await doctor(p, ['--json']);
    expect(json.code).toBe(0);
    const out = JSON.parse(json.stdout) as { ok: boolean; checks: Check[] };
    expect(out.ok).toBe(true);
    expect(out.checks.map((c) => [c.check, c.status])).toEqual([['config-dir', 'ok'], ['config-file', 'ok'], ['store', 'ok'], ['profile', 'ok'], ['service', 'ok']]);
    expectNoSecret(p, json.stdout);
  });

  it('fails an API key the service rejects, saying how to replace it', async () => {
    const p = await onboardWithGrant(ob, 'badkey');
    const result = await doctor(p, [], { SYNCAUTH_API_KEY: 'not-a-key-of-this-workspace' });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^fail +service +\S+ +the service rejected the API key \(profile badkey\) \(401\)$/m);
    expect(result.stdout).toMatch(/→ set SYNCAUTH_API_KEY to a key of the right workspace .*node \S+\/main\.js setup --profile badkey/);
    expect(result.stderr).toMatch(/^error: 1 check of \d+ failed$/m);
    expect(result.stdout + result.stderr).not.toContain('not-a-key-of-this-workspace');
    expectNoSecret(p, result.stdout + result.stderr);
  });

  it('fails a store key that does not open the store, and does not pretend to check the secrets', async () => {
    const p = await onboardWithGrant(ob, 'wrongstorekey');
    const wrongKey = 'a-different-but-long-store-key-1234';
    const result = await doctor(p, [], { SYNCAUTH_STORE_KEY: wrongKey });
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^fail +secret store +\S+secrets\.enc +the store key does not open \S+secrets\.enc/m);
    expect(result.stdout).toMatch(/^ok +profile wrongstorekey +state readable, secrets not checked \(the store cannot be opened\)/m);
    expect(result.stdout + result.stderr).not.toContain(wrongKey);
    expectNoSecret(p, result.stdout + result.stderr);
  });

  it('fails a profile that needs re-authorization, and a connector gone from the service', async () => {
    const p = await onboardWithGrant(ob, 'revoked');
    const gone = await runCli(['source', 'delete', p.connectorId, '--yes', '--profile', p.profile], { env: p.env, cwd: p.home.dir });
    expect(gone.code).toBe(0);
    await openProfileStore(p.home.configDir).update(p.profile, (s) => s && ({
      ...s, needsReauthorization: true,
      lastError: { code: 'OAUTH_INVALID_GRANT', message: 'refresh token is invalid or revoked', at: new Date().toISOString(), terminal: true },
    }));
    const result = await doctor(p, ['--json']);
    expect(result.code).toBe(1);
    const { ok, checks } = JSON.parse(result.stdout) as { ok: boolean; checks: Check[] };
    expect(ok).toBe(false);
    expect(checks).toContainEqual({
      check: 'profile', subject: 'revoked', status: 'fail', message: 'needs re-authorization: Dropbox no longer accepts its grant',
      fix: `run \`${RUN_AS} setup --profile revoked\` to authorize again`,
    });
    expect(checks).toContainEqual({
      check: 'service', subject: ob.emulator.url, status: 'fail', message: `the source connector ${p.connectorId} of profile revoked is not on the service`,
      fix: `run \`${RUN_AS} refresh --profile revoked\` to create it again`,
    });
    expectNoSecret(p, result.stdout + result.stderr);
  });

  it('fails a token file path that is a directory, and a config directory that is a file, naming the path', async () => {
    const p = await onboardWithGrant(ob, 'paths');
    const dir = path.join(p.home.dir, 'run');
    mkdirSync(dir);
    const tokenDir = await doctor(p, ['--token-file', dir]);
    expect(tokenDir.code).toBe(1);
    expect(tokenDir.stdout).toMatch(new RegExp(`^fail +token file +${dir} is a directory, but the token file must be a file$`, 'm'));
    expect(tokenDir.stdout).toContain(`→ give a file inside it, e.g. ${path.join(dir, 'token')}`);

    const file = path.join(tempDir(), 'config');
    writeFileSync(file, '');
    const configFile = await runCli(['doctor'], { env: { ...p.env, SYNCAUTH_CONFIG_DIR: file }, cwd: p.home.dir });
    expect(configFile.code).toBe(1);
    expect(configFile.stdout).toMatch(new RegExp(`^fail +config directory +${file} is a file, but the config directory must be a directory$`, 'm'));
    expect(configFile.stdout).not.toMatch(/E[A-Z]{4,}:/);
  });

  it('warns, exiting 0, when nothing is set up yet; fails a profile asked for by name that is not', async () => {
    const home = tempDir();
    const env = { SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: 'a-long-enough-store-key-5678' };
    const empty = await runCli(['doctor'], { env, cwd: home });
    expect(empty.code).toBe(0);
    expect(empty.stdout).toMatch(/^warn +profiles +no profile is set up yet\n +→ run `node \S+\/main\.js setup`$/m);
    expect(empty.stdout).toMatch(/\nno problems found, 1 warning\n$/);
    const named = await runCli(['doctor', '--profile', 'nosuch'], { env, cwd: home });
    expect(named.code).toBe(1);
    expect(named.stdout).toMatch(/^fail +profile nosuch +has not been set up\n +→ run `node \S+\/main\.js setup --profile nosuch`$/m);
  });

  it('colours ok, warn and fail when asked (FORCE_COLOR), and never with NO_COLOR', async () => {
    const p = await onboardWithGrant(ob, 'colour');
    const coloured = await doctor(p, [], { FORCE_COLOR: '1' });
    expect(coloured.stdout).toContain('\x1b[32mok  \x1b[39m');
    const plain = await doctor(p, [], { FORCE_COLOR: '1', NO_COLOR: '1' });
    expect(plain.stdout).not.toContain('\x1b[');
  });
});

describe('doctor and a running daemon', () => {
  it('asks its /readyz: ready is ok; a port where nothing listens fails, saying how to start one', async () => {
    const grant = { appKey: ob.app.appKey, appSecret: ob.app.appSecret, refreshToken: await grantRefreshToken(ob) };
    const home = tempDir();
    const env = containerEnv(ob.emulator, grant, home);
    const daemon = spawnDaemon(env, home);
    try {
      const { listen } = await daemon.started();
      await daemon.ready(listen);
      const address = new URL(listen).host;
      const result = await runCli(['doctor', '--listen', address], { env, cwd: home });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^ok +secret store +environment +secrets come from the environment \(read-only\): SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_REFRESH_TOKEN, SYNCAUTH_API_KEY set$/m);
      // The daemon records the profile's state as it renews.
      expect(result.stdout).toMatch(/^ok +profile container +state readable, Dropbox grant present, access token expires in \d/m);
      expect(result.stdout).toMatch(/^ok +service +\S+ +reachable, API key accepted \(profile container\)$/m);
      expect(result.stdout).toMatch(new RegExp(`^ok +daemon +http://${address}/readyz +ready \\(1 profile; a revoked grant is noticed within 15 min\\)$`, 'm'));
      for (const secret of [grant.refreshToken, grant.appSecret, grant.appKey, env.SYNCAUTH_API_KEY as string]) expect(result.stdout).not.toContain(secret);
    } finally {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    const nobody = await runCli(['doctor', '--listen', '127.0.0.1:1'], { env: { ...env, SYNCAUTH_LISTEN: '' }, cwd: home });
    expect(nobody.code).toBe(1);
    expect(nobody.stdout).toMatch(/^fail +daemon +http:\/\/127\.0\.0\.1:1\/readyz +no daemon answers: nothing listens there$/m);
    expect(nobody.stdout).toContain('→ start it with `syncauth daemon --listen 127.0.0.1:1`');
  });
});
