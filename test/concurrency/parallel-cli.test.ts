// Twenty `syncauth token` or `refresh` processes at once on one profile, as scripts beside a daemon start them:
// they take turns on the profile's renewal lock and reuse the renewal one of them made, counted in the
// emulator's request log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  onboardWithGrant, runCli, sources, startOnboarding, type Onboarded, type Onboarding,
} from '../helpers/onboarding.js';

const PROCESSES = 20;

let ob: Onboarding;

beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

const onboard = (profile: string): Promise<Onboarded> => onboardWithGrant(ob, profile);

/** Runs `args` in PROCESSES processes at once; the token requests they made, and how long they took together. */
async function together(p: Onboarded, args: string[]) {
  const from = ob.emulator.state.requests.length;
  const started = Date.now();
  const results = await Promise.all(
    Array.from({ length: PROCESSES }, () => runCli(args, { env: p.env, cwd: p.home.dir, timeoutMs: 120_000 })),
  );
  const elapsedMs = Date.now() - started;
  const tokenRequests = ob.emulator.state.requests.slice(from).filter((r) => r.route === 'token');
  for (const result of results) expect(result.code, result.stderr).toBe(0);
  return { results, tokenRequests, elapsedMs };
}

// The two run one after the other: both count every token request the emulator sees.
describe('many processes on one profile', () => {
  it(`${PROCESSES} \`syncauth token\` at once make exactly one token request and print the same token`, async () => {
    const p = await onboard('twenty-tokens');
    const { results, tokenRequests } = await together(p, ['token', '--profile', p.profile]);
    expect(tokenRequests).toHaveLength(1);
    expect(tokenRequests[0]?.status).toBe(200);
    const printed = new Set(results.map((r) => r.stdout));
    expect(printed.size).toBe(1);
    expect([...printed][0]).toMatch(/^sl\.u\.\S+\n$/);
  }, 180_000);

  it(`${PROCESSES} \`syncauth refresh\` at once each get a renewal made after they were started, sharing those made while they waited`, async () => {
    const p = await onboard('twenty-refreshes');
    const started = Date.now();
    const { results, tokenRequests, elapsedMs } = await together(p, ['refresh', '--profile', p.profile, '--json']);
    console.log(`${PROCESSES} refreshes: ${tokenRequests.length} renewals in ${elapsedMs} ms`);
    // A refresh takes another's renewal only when it finished while it waited for the lock, so some share one,
    // and none takes the token setup kept just before.
    expect(tokenRequests.length).toBeGreaterThanOrEqual(1);
    expect(tokenRequests.length).toBeLessThan(PROCESSES);
    const lifetimeMs = ob.emulator.options.tokenLifetimeSeconds * 1000;
    for (const result of results) {
      const printed = JSON.parse(result.stdout) as { connector: { id: string }; accessTokenExpiresAt: string };
      expect(printed.connector.id).toBe(p.connectorId);
      // Counted from when its token request was sent, which was after every process was started.
      expect(Date.parse(printed.accessTokenExpiresAt)).toBeGreaterThanOrEqual(started + lifetimeMs);
    }
    expect(sources(ob).filter((s) => s.name === `conn-${p.profile}`)).toHaveLength(1);
  }, 180_000);
});
