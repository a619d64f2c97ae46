// `syncauth daemon --once`, the one-shot mode of init containers, Jobs and cron, as a real process: it renews
// what is due, reconciles, publishes, leaves the token file for the consumers, and its exit code says whether
// every profile is fresh (0), one needs re-authorization (4), or something else failed (1), with a line per
// failed profile.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir, RUN_AS } from '../helpers/cli.js';
import { connectorsNamed, emulator, obtainGrant, tokensOf } from './helpers.js';
import { containerEnv } from './process.js';

describe('daemon --once', () => {
  it('renews, reconciles and publishes, exits 0 and leaves the token file; a second pass reuses the still-fresh token', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const env = containerEnv(emu, grant, home, { profile: 'init', tokenFile });

    const first = await runCli(['daemon', '--once'], { env, cwd: home, timeoutMs: 20_000 });
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    const token = readFileSync(tokenFile, 'utf8');
    const issued = emu.state.accessTokens.get(token);
    expect(issued?.expiresAt).toBeGreaterThan(Date.now());
    expect((statSync(tokenFile).mode & 0o777).toString(8)).toBe('600');
    // The daemon reckons the expiry from its own clock and expires_in: within a second of the provider's.
    expect(Math.abs(Date.parse(readFileSync(`${tokenFile}.expires_at`, 'utf8').trim()) - (issued?.expiresAt ?? 0))).toBeLessThan(1_000);
    const connectors = connectorsNamed(emu, 'conn-init');
    expect(connectors.map((c) => c.config.token)).toEqual([token]);
    expect(first.stdout).toContain('one pass done: 1 of 1 profiles fresh');

    // A cron job running again within the token's life renews nothing.
    const renewedBefore = tokensOf(emu, grant.refreshToken).length;
    const second = await runCli(['daemon', '--once'], { env, cwd: home, timeoutMs: 20_000 });
    expect(second.code).toBe(0);
    expect(tokensOf(emu, grant.refreshToken).length).toBe(renewedBefore);
    expect(readFileSync(tokenFile, 'utf8')).toBe(token);
  }, 40_000);

  it('judges the pass once its templates have rendered: a slow account lookup for {{ account_id }} still exits 0 with the file rendered', async () => {
    // Templates render beside the renewals, not on their path; the one pass must still wait for them to end.
    const emu = await emulator({ faults: [{ route: 'account', latencyMs: 1_500 }] });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const source = path.join(home, 'env.tpl');
    const dest = path.join(home, 'dropbox.env');
    writeFileSync(source, 'DROPBOX_ACCOUNT={{account_id}}\nDROPBOX_ACCESS_TOKEN={{access_token}}\n');
    const result = await runCli(['daemon', '--once', '--template', `${source}:${dest}`], { env: containerEnv(emu, grant, home, { profile: 'slow' }), cwd: home, timeoutMs: 20_000 });
    expect(result.code, result.stderr).toBe(0);
    const token = tokensOf(emu, grant.refreshToken).at(-1)?.token;
    expect(readFileSync(dest, 'utf8')).toBe(`DROPBOX_ACCOUNT=${emu.state.account.accountId}\nDROPBOX_ACCESS_TOKEN=${token}\n`);
  }, 40_000);

  it('exits 4 with a line naming the profile and the fix when the grant was revoked; nothing is published', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    emu.revokeGrant(grant.refreshToken);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const result = await runCli(['daemon', '--once'], { env: containerEnv(emu, grant, home, { profile: 'gone', tokenFile }), cwd: home, timeoutMs: 20_000 });
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('syncauth daemon --once: profile "gone": re-authorization needed');
    expect(result.stderr).toContain(`${RUN_AS} setup --profile gone`);
    expect(() => readFileSync(tokenFile)).toThrow();
    expect(connectorsNamed(emu, 'conn-gone')).toEqual([]);
  }, 30_000);

  it('exits 1 when the token is fresh but the connector could not be updated, keeping the token for the consumers', async () => {
    const emu = await emulator({ faults: [{ route: 'sources', status: 500 }] });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const result = await runCli(['daemon', '--once'], { env: containerEnv(emu, grant, home, { profile: 'svc', tokenFile }), cwd: home, timeoutMs: 30_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('profile "svc": the token is fresh, but updating the connector with it failed');
    expect(result.stderr).toContain('1 of 1 profiles are not fresh: svc');
    expect(emu.state.accessTokens.get(readFileSync(tokenFile, 'utf8'))?.expiresAt).toBeGreaterThan(Date.now());
  }, 40_000);

  it('exits 1 when replicas coordinate through a Redis that is unreachable: the token is published, the connector left alone', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const tokenFile = path.join(home, 'token');
    const env = { ...containerEnv(emu, grant, home, { profile: 'fleet', tokenFile }), SYNCAUTH_REDIS_URL: 'redis://127.0.0.1:1' };
    const result = await runCli(['daemon', '--once'], { env, cwd: home, timeoutMs: 30_000 });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('profile "fleet": the token is fresh, but the connector was not updated: Redis (--redis-url) is unreachable');
    expect(emu.state.accessTokens.get(readFileSync(tokenFile, 'utf8'))?.expiresAt).toBeGreaterThan(Date.now());
    expect(connectorsNamed(emu, 'conn-fleet')).toEqual([]);
  }, 40_000);
});
