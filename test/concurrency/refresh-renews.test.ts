// `syncauth refresh` promises a renewal now: a token another command kept moments before it was asked is not
// taken as its own. Real processes against the emulator, as a user meets it: `token`, then the grant revoked
// at Dropbox, then `refresh` at once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onboardWithGrant, readProfileState, runCli, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

describe('refresh right after token', () => {
  it('asks Dropbox again: a grant revoked since `token` fails with exit 4, nothing is said renewed, and status sees it', async () => {
    const p = await onboardWithGrant(ob, 'revoked-after-token');
    const run = (args: string[]) => runCli([...args, '--profile', p.profile], { env: p.env, cwd: p.home.dir, timeoutMs: 60_000 });

    const token = await run(['token']);
    expect(token.code, token.stderr).toBe(0);
    ob.emulator.revokeGrant(p.refreshToken);

    const from = ob.emulator.state.requests.length;
    const refresh = await run(['refresh']);
    const asked = ob.emulator.state.requests.slice(from).filter((r) => r.route === 'token');
    expect(asked.length, 'refresh made a token request').toBeGreaterThanOrEqual(1);
    expect(asked.every((r) => r.status === 400)).toBe(true);
    expect(refresh.code, refresh.stderr).toBe(4);
    expect(refresh.stdout).not.toMatch(/renewed/);
    expect(refresh.stderr).toMatch(/invalid_grant|revoked/i);
    expect(readProfileState(p.home, p.profile)?.needsReauthorization).toBe(true);

    const status = await run(['status']);
    expect(status.code, status.stdout).not.toBe(0);
  }, 120_000);
});
