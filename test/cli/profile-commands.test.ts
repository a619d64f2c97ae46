// The commands that work on a profile once setup made it — authorize, token, status, refresh, logout — run as
// a user would after onboarding: only the store settings in the environment, the rest from the profile's state
// and the encrypted store.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { RUN_AS } from '../helpers/cli.js';
import {
  currentAccount, filesUnder, grantRefreshToken, newestAccessTokenOf, newestRefreshToken, newHome, onboardingEnv, profileFile, readProfileState,
  onboardWithGrant, renewAtEmulator, runCli, runWithApproval, sources, startOnboarding, storedSecrets, type Home, type Onboarded,
  type Onboarding,
} from '../helpers/onboarding.js';

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

/** A profile onboarded with a grant handed in (the quick, browserless path of setup). */
const onboard = (profile: string, home: Home = newHome()): Promise<Onboarded> => onboardWithGrant(ob, profile, home);

function run(p: Onboarded, args: string[]) {
  return runCli(args, { env: p.env, cwd: p.home.dir });
}

function connectorToken(id: string): unknown {
  return sources(ob).find((s) => s.id === id)?.config.token;
}

// Its own emulator, so that "the newest grant" is the one authorize made while the other tests run side by side.
describe('authorize', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding();
  });
  afterAll(async () => ob.emulator.close());

  function authorizeEnv(home: Home) {
    const { SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_AUTHORIZE_URL, SYNCAUTH_TOKEN_URL, SYNCAUTH_REDIRECT_URI } = onboardingEnv(ob, home);
    return { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_APP_KEY, SYNCAUTH_APP_SECRET, SYNCAUTH_AUTHORIZE_URL, SYNCAUTH_TOKEN_URL, SYNCAUTH_REDIRECT_URI };
  }

  it('prints the refresh token alone on stdout and stores nothing', async () => {
    const home = newHome();
    const result = await runWithApproval(['authorize', '--no-open'], { env: authorizeEnv(home), cwd: home.dir });
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    const refreshToken = newestRefreshToken(ob);
    expect(result.stdout).toBe(`${refreshToken}\n`);
    expect(result.stderr).toMatch(/The refresh token follows on stdout/);
    expect(result.stderr).not.toContain(refreshToken);
    expect(filesUnder(home.dir)).toEqual([]);
    // It is a working grant.
    expect((await renewAtEmulator(ob, refreshToken)).status).toBe(200);
  });

  it('--json gives the refresh token with the granted scopes', async () => {
    const home = newHome();
    const result = await runWithApproval(['authorize', '--no-open', '--json'], { env: authorizeEnv(home), cwd: home.dir });
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as { refresh_token: string; scopes: string[]; account_id: string };
    expect(out.refresh_token).toBe(newestRefreshToken(ob));
    expect(out.scopes).toContain('files.content.read');
    expect(out.account_id).toBe(ob.emulator.state.account.accountId);
  });
});

describe.concurrent('token', () => {
  it('prints a valid access token alone on stdout', async () => {
    const p = await onboard('tok');
    const result = await run(p, ['token', '--profile', 'tok']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^sl\.u\.\S+\n$/);
    const accessToken = result.stdout.trimEnd();
    expect(accessToken).toBe(newestAccessTokenOf(ob, p.refreshToken));
    const account = await currentAccount(ob, accessToken);
    expect(account.status).toBe(200);
    expect(account.body.account_id).toBe(ob.emulator.state.account.accountId);
  });

  it('a profile without a grant: exit 4 and how to set it up', async () => {
    // A profile that exists (its state is there) but whose grant is gone from the store; one that exists nowhere
    // is refused as no profile of that name (no-such-profile.test.ts).
    const home = newHome();
    await onboard('nobody', home);
    const secrets = path.join(home.configDir, 'secrets');
    const records = readdirSync(secrets).filter((name) => name.startsWith('nobody'));
    expect(records.length).toBeGreaterThan(0);
    for (const name of records) rmSync(path.join(secrets, name));
    const result = await runCli(['token', '--profile', 'nobody'], { env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey, SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl }, cwd: home.dir });
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/error: profile "nobody" has no Dropbox grant/);
    expect(result.stderr).toMatch(/hint: run `node \S+\/main\.js setup --profile nobody`/);
  });
});

describe.concurrent('status', () => {
  it('text and --json, one profile or all of them', async () => {
    const p = await onboard('stat-a');
    await onboard('stat-b', p.home);
    const text = await run(p, ['status', '--profile', 'stat-a']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^profile: +stat-a$/m);
    expect(text.stdout).toMatch(/^state: +ok$/m);
    expect(text.stdout).toMatch(/^folder: +dropbox:\/\/data$/m);
    expect(text.stdout).toContain(`conn-stat-a (${p.connectorId})`);
    expect(text.stdout).toMatch(/^token expires: +\S+ \(in 4\.0h\)$/m);
    expect(text.stdout).toMatch(/^last error: +-$/m);
    expect(text.stdout).not.toContain('stat-b');

    const json = await run(p, ['status', '--json']);
    expect(json.code).toBe(0);
    const { profiles } = JSON.parse(json.stdout) as { profiles: Record<string, unknown>[] };
    expect(profiles.map((s) => s.profile)).toEqual(['stat-a', 'stat-b']);
    expect(profiles[0]).toMatchObject({
      state: 'ok', needsReauthorization: false, baseUrl: ob.emulator.url, remoteUrl: 'dropbox://data',
      connector: { id: p.connectorId, name: 'conn-stat-a' }, accessTokenExpired: false, lastError: null,
    });
  });
});

describe.concurrent('a revoked grant', () => {
  it('token and refresh exit 4 naming `syncauth setup --profile X`; status exits 4 until setup authorizes again', async () => {
    const p = await onboard('revoked');
    ob.emulator.revokeGrant(p.refreshToken);

    const token = await run(p, ['token', '--profile', 'revoked']);
    expect(token.code).toBe(4);
    expect(token.stdout).toBe('');
    expect(token.stderr).toMatch(/error: .*invalid or revoked.*\(profile "revoked"\)/);
    expect(token.stderr).toMatch(/hint: run `node \S+\/main\.js setup --profile revoked` to authorize again/);

    const refresh = await run(p, ['refresh', '--profile', 'revoked']);
    expect(refresh.code).toBe(4);
    expect(refresh.stderr).toMatch(/hint: run `node \S+\/main\.js setup --profile revoked` to authorize again/);

    const status = await run(p, ['status', '--profile', 'revoked']);
    expect(status.code).toBe(4);
    expect(status.stdout).toMatch(/^state: +needs re-authorization$/m);
    expect(status.stdout).toContain(`→ run \`${RUN_AS} setup --profile revoked\` to authorize again`);
    expect(status.stderr).toMatch(/error: profile "revoked" needs re-authorization\nhint: run `node \S+\/main\.js setup --profile revoked`/);
    const json = await run(p, ['status', '--json']);
    expect(json.code).toBe(4);
    expect((JSON.parse(json.stdout) as { profiles: Record<string, unknown>[] }).profiles[0]).toMatchObject({
      profile: 'revoked', state: 'needs re-authorization', needsReauthorization: true, lastError: { code: 'OAUTH_INVALID_GRANT', terminal: true },
    });

    // Following the hint: setup goes through the browser again (the stored grant is dead) and heals the profile.
    const again = await runWithApproval(['setup', '--yes', '--no-open', '--profile', 'revoked', '--connector-name', 'conn-revoked'], {
      env: onboardingEnv(ob, p.home), cwd: p.home.dir,
    });
    expect(again.stderr).not.toMatch(/^error/m);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/source connector conn-revoked updated/);
    const healed = await run(p, ['status', '--profile', 'revoked']);
    expect(healed.code).toBe(0);
    expect(healed.stdout).toMatch(/^state: +ok$/m);
    const newGrant = (await storedSecrets(p.home, 'revoked')).refresh_token as string;
    expect(newGrant).not.toBe(p.refreshToken);
    expect(sources(ob).find((s) => s.id === p.connectorId)?.config.refresh_token).toBe(newGrant);
    expect((await run(p, ['token', '--profile', 'revoked'])).code).toBe(0);
  });
});

describe.concurrent('refresh', () => {
  it("renews and puts the new access token into the connector's token", async () => {
    const p = await onboard('fresh');
    const before = connectorToken(p.connectorId);
    expect(before).toMatch(/^sl\.u\./);
    const result = await run(p, ['refresh', '--profile', 'fresh', '--json']);
    expect(result.stderr).not.toMatch(/^error/m);
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as { connector: { id: string; action: string }; accessTokenExpiresAt: string };
    expect(out.connector).toEqual({ id: p.connectorId, action: 'updated' });
    const after = connectorToken(p.connectorId);
    expect(after).not.toBe(before);
    expect(after).toBe(newestAccessTokenOf(ob, p.refreshToken));
    expect((await currentAccount(ob, after as string)).status).toBe(200);
    expect(sources(ob).filter((s) => s.name === 'conn-fresh')).toHaveLength(1);
    expect(readProfileState(p.home, 'fresh')?.accessTokenExpiresAt).toBe(out.accessTokenExpiresAt);
  });

  it('text output names the connector', async () => {
    const p = await onboard('fresh-text');
    const result = await run(p, ['refresh', '--profile', 'fresh-text']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^✓ renewed: access token valid until \S+$/m);
    expect(result.stdout).toContain(`✓ source connector conn-fresh-text updated (${p.connectorId})`);
    expect(connectorToken(p.connectorId)).toBe(newestAccessTokenOf(ob, p.refreshToken));
  });
});

describe.concurrent('logout', () => {
  it('revokes the grant at Dropbox and deletes the secrets, the kept access token and the state', async () => {
    const p = await onboard('bye');
    expect((await run(p, ['token', '--profile', 'bye'])).code).toBe(0);
    const store = openSecretStore({ kind: 'file', configDir: p.home.configDir, storeKey: p.home.storeKey, env: {} });
    expect((await store.get('bye')).access_token).toBeDefined();
    const result = await run(p, ['logout', '--profile', 'bye']);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/✓ grant revoked at Dropbox/);
    expect(result.stderr).toContain(`the source connector ${p.connectorId} is left on the service`);
    const grant = [...ob.emulator.state.grants.values()].find((g) => g.refreshToken === p.refreshToken);
    expect(grant?.revokedAt).not.toBeNull();
    const renewal = await renewAtEmulator(ob, p.refreshToken);
    expect(renewal).toEqual({ status: 400, body: { error: 'invalid_grant', error_description: 'refresh token is invalid or revoked' } });
    expect(existsSync(profileFile(p.home, 'bye'))).toBe(false);
    expect(await store.get('bye')).toEqual({});
    const status = await run(p, ['status', '--profile', 'bye']);
    expect(status.code).toBe(4);
    expect(status.stderr).toMatch(/profile "bye" has not been set up/);
  });

  it('--no-revoke deletes locally and leaves the grant valid', async () => {
    const p = await onboard('keep');
    const result = await run(p, ['logout', '--profile', 'keep', '--no-revoke']);
    expect(result.code).toBe(0);
    expect(result.stderr).not.toMatch(/revoked/);
    expect((await renewAtEmulator(ob, p.refreshToken)).status).toBe(200);
    expect(existsSync(profileFile(p.home, 'keep'))).toBe(false);
    expect(await storedSecrets(p.home, 'keep')).toEqual({});
  });

  it('a profile that does not exist: exit 1 naming the ones that do; nothing touched, nothing sent to Dropbox', async () => {
    const p = await onboard('present');
    const stateBefore = readProfileState(p.home, 'present');
    const files = filesUnder(p.home.dir);
    // A grant in the environment: before, logout revoked it under the name of a profile that was never made.
    const grant = await grantRefreshToken(ob);
    const env = { ...p.env, SYNCAUTH_APP_KEY: ob.app.appKey, SYNCAUTH_APP_SECRET: ob.app.appSecret, SYNCAUTH_REFRESH_TOKEN: grant, SYNCAUTH_TOKEN_URL: ob.emulator.tokenUrl };
    const result = await runCli(['logout', '--profile', 'nosuch'], { env, cwd: p.home.dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^error: there is no profile "nosuch"/m);
    expect(result.stderr).toMatch(/^hint: the existing profiles are: present\b/m);
    expect(result.stderr).not.toMatch(/✓/);
    expect((await renewAtEmulator(ob, grant)).status).toBe(200);
    expect(filesUnder(p.home.dir)).toEqual(files);
    expect(readProfileState(p.home, 'present')).toEqual(stateBefore);
    expect((await storedSecrets(p.home, 'present')).refresh_token).toBe(p.refreshToken);

    const empty = newHome();
    const none = await runCli(['logout', '--profile', 'nosuch'], { env: { SYNCAUTH_CONFIG_DIR: empty.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: empty.storeKey }, cwd: empty.dir });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^error: there is no profile "nosuch"/m);
    expect(none.stderr).toMatch(/^hint: there are no profiles yet/m);
    expect(filesUnder(empty.dir)).toEqual([]);
  });

  it('leaves the other profiles of the store alone', async () => {
    const p = await onboard('one');
    const other = await onboard('two', p.home);
    expect((await run(p, ['logout', '--profile', 'one'])).code).toBe(0);
    expect((await storedSecrets(p.home, 'two')).refresh_token).toBe(other.refreshToken);
    expect(readProfileState(p.home, 'two')?.connectorId).toBe(other.connectorId);
    expect((await run(other, ['token', '--profile', 'two'])).code).toBe(0);
  });
});
