// `status` as a monitoring check: exit 4 when a profile needs re-authorization, 1 when one is incomplete or its
// last renewal or reconcile failed, 0 otherwise; the text names what is wrong and the command that fixes it.
// The states are written directly: what status reports depends on them alone.
import { describe, expect, it } from 'vitest';
import { openProfileStore, type ProfileStateDraft } from '../../src/profile/index.js';
import { newHome, runCli, type Home } from '../helpers/onboarding.js';
import { RUN_AS } from '../helpers/cli.js';

const at = '2026-01-01T00:00:00.000Z';
const base: ProfileStateDraft = { baseUrl: 'http://127.0.0.1:9', remoteUrl: 'dropbox://data', connectorId: 'c-1', connectorName: 'conn' };
const incomplete: ProfileStateDraft = {
  baseUrl: 'http://127.0.0.1:9', remoteUrl: 'dropbox://data',
  lastError: { code: 'SYNCAUTH_SETUP_UNFINISHED', message: 'setup stopped before the source connector was created or updated', at, terminal: false },
};
const failed: ProfileStateDraft = { ...base, lastError: { code: 'OAUTH_SERVER_ERROR', message: 'Dropbox answered 503', at, terminal: false } };
const revoked: ProfileStateDraft = { ...base, needsReauthorization: true, lastError: { code: 'OAUTH_INVALID_GRANT', message: 'refresh token is invalid or revoked', at, terminal: true } };
// Expired long ago, but that is no failure: the next `token` or the daemon renews it.
const expired: ProfileStateDraft = { ...base, accessTokenExpiresAt: at, lastRenewalAt: at };

async function homeWith(profiles: Record<string, ProfileStateDraft>): Promise<Home> {
  const home = newHome();
  const store = openProfileStore(home.configDir);
  for (const [name, draft] of Object.entries(profiles)) await store.update(name, () => draft);
  return home;
}

function status(home: Home, args: string[]) {
  return runCli(['status', ...args], { env: { SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey }, cwd: home.dir });
}

describe.concurrent('status exit codes', () => {
  it('0 for a profile whose access token merely expired', async () => {
    const home = await homeWith({ old: expired });
    const result = await status(home, ['--profile', 'old']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^state: +ok$/m);
    expect(result.stdout).not.toContain('→');
  });

  it('1 for an incomplete profile, naming refresh as the fix', async () => {
    const home = await homeWith({ half: incomplete });
    const result = await status(home, ['--profile', 'half']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^state: +incomplete$/m);
    expect(result.stdout).toContain(`→ setup stopped before the source connector was made: run \`${RUN_AS} refresh --profile half\` to finish it`);
    expect(result.stderr).toMatch(/error: profile "half" is incomplete\nhint: run `node \S+\/main\.js refresh --profile half`/);
  });

  it('1 for a profile whose last renewal failed, naming refresh as the fix', async () => {
    const home = await homeWith({ flaky: failed });
    const result = await status(home, ['--profile', 'flaky']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^state: +error$/m);
    expect(result.stdout).toContain(`→ the last renewal or connector update failed: run \`${RUN_AS} refresh --profile flaky\` to try again`);
    expect(result.stderr).toMatch(/error: profile "flaky" failed its last renewal or connector update\nhint: run `node \S+\/main\.js refresh --profile flaky`/);
  });

  it('1 for a failure retrying will not fix (a wrong app secret), naming setup as the fix', async () => {
    const home = await homeWith({ wrong: { ...base, lastError: { code: 'OAUTH_INVALID_CLIENT', message: 'invalid app key or secret', at, terminal: true } } });
    const result = await status(home, ['--profile', 'wrong']);
    expect(result.code).toBe(1);
    expect(result.stdout).toContain(`run \`${RUN_AS} setup --profile wrong\` to correct it`);
    expect(result.stderr).toMatch(/hint: run `node \S+\/main\.js setup --profile wrong`/);
  });

  it('over all profiles: 1 when one failed, 4 when one also needs re-authorization, each with its fix', async () => {
    const home = await homeWith({ a: expired, b: failed });
    const one = await status(home, []);
    expect(one.code).toBe(1);
    expect(one.stdout).toContain(`run \`${RUN_AS} refresh --profile b\``);

    await openProfileStore(home.configDir).update('c', () => revoked);
    const four = await status(home, []);
    expect(four.code).toBe(4);
    expect(four.stdout).toContain(`→ the last renewal or connector update failed: run \`${RUN_AS} refresh --profile b\` to try again`);
    expect(four.stdout).toContain(`→ run \`${RUN_AS} setup --profile c\` to authorize again`);
    expect(four.stderr).toContain(`hint: run \`${RUN_AS} refresh --profile b\`; run \`${RUN_AS} setup --profile c\``);

    const json = await status(home, ['--json']);
    expect(json.code).toBe(4);
    const { profiles } = JSON.parse(json.stdout) as { profiles: Record<string, unknown>[] };
    expect(profiles.map((p) => [p.profile, p.state, p.fix])).toEqual([
      ['a', 'ok', null],
      ['b', 'error', `${RUN_AS} refresh --profile b`],
      ['c', 'needs re-authorization', `${RUN_AS} setup --profile c`],
    ]);
    expect(profiles[0]).toMatchObject({ accessTokenExpired: true, lastError: null, needsReauthorization: false });
  });

  it('--json with an incomplete profile exits 1 and says so', async () => {
    const home = await homeWith({ half: incomplete });
    const json = await status(home, ['--json']);
    expect(json.code).toBe(1);
    expect((JSON.parse(json.stdout) as { profiles: Record<string, unknown>[] }).profiles[0]).toMatchObject({
      profile: 'half', state: 'incomplete', fix: `${RUN_AS} refresh --profile half`, lastError: { code: 'SYNCAUTH_SETUP_UNFINISHED' },
    });
  });
});
