// `syncauth demo --reauth` as a person runs it (`npm run demo -- --reauth` without its build): the main job, then
// the re-authorization loop with the real daemon process, its page and signed notices to a receiver that
// verifies them, the app unlinked at the emulated Dropbox, the link from the notice opened and Allow approved,
// and the profile live again; nothing outlives it. The receiver's check is the Standard Webhooks scheme: what
// the reference library signs verifies, and anything changed does not.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { verified } from '../../src/cli/commands/demo-reauth.js';
import { CLI, tempDir } from '../helpers/cli.js';

describe('syncauth demo --reauth', () => {
  it('closes the re-authorization loop on the emulator from a verified notice, and leaves nothing running', async () => {
    const dir = tempDir('syncauth-demo-reauth-');
    const result = spawnSync(process.execPath, [CLI, 'demo', '--reauth'], {
      cwd: dir, encoding: 'utf8', timeout: 120_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
    });
    const output = `${result.stdout}\n${result.stderr}`;
    expect(result.status, output).toBe(0);
    // The main job first, unchanged.
    expect(result.stdout).toContain('$ syncauth setup --yes --no-open --public-url http://127.0.0.1:');
    expect(result.stdout).toContain('$ syncauth refresh');
    // Then the loop, in the order a person meets it.
    const steps = [
      "syncauth daemon --token-file",
      '"grants_revoked":1',
      'The receiver got, signature verified:\n  profile.reauthorization_needed for profile "demo", link http://127.0.0.1:',
      'The page says: syncauth is authorized again',
      'The receiver got, signature verified: profile.reauthorized for profile "demo". /readyz is 200 again.',
    ];
    let at = 0;
    for (const step of steps) {
      const found = result.stdout.indexOf(step, at);
      expect(found, `"${step}" after offset ${at} in:\n${output}`).toBeGreaterThan(-1);
      at = found;
    }
    expect(result.stdout.slice(at)).toMatch(/\$ syncauth status\nprofile: +demo\nstate: +ok/);
    expect(result.stdout).not.toContain('whose signature did not verify');
    // The daemon is gone with the demo: its page no longer answers, and the temporary home is removed.
    const page = /--public-url (http:\/\/127\.0\.0\.1:\d+) --notify-url/.exec(result.stdout)?.[1] as string;
    await expect(fetch(page)).rejects.toThrow();
    const home = /--token-file (\S+)\/token/.exec(result.stdout)?.[1] as string;
    expect(existsSync(home)).toBe(false);
  }, 130_000);

  it("the demo's receiver verifies what the Standard Webhooks library signs, and nothing else", () => {
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const body = JSON.stringify({ type: 'profile.reauthorization_needed', data: { profile: 'demo' } });
    const id = 'msg_demo';
    const now = new Date();
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign(id, now, body) };
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    expect(verified(key, headers, body)).toBe(true);
    expect(verified(key, headers, body.replace('demo', 'other'))).toBe(false);
    expect(verified(key, { ...headers, 'webhook-id': 'msg_other' }, body)).toBe(false);
    expect(verified(randomBytes(32), headers, body)).toBe(false);
    const old = new Date(now.getTime() - 3_600_000);
    expect(verified(key, { ...headers, 'webhook-timestamp': String(Math.floor(old.getTime() / 1000)), 'webhook-signature': new Webhook(secret).sign(id, old, body) }, body)).toBe(false);
    expect(verified(key, { 'webhook-id': id, 'webhook-timestamp': headers['webhook-timestamp'] }, body)).toBe(false);
  });
});
