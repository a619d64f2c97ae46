// Twenty `syncauth token` or `refresh` processes at once on one profile, as scripts beside a daemon start them:
// they take turns on the profile's renewal lock and reuse the renewal one of them made, counted in the
// emulator's request log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECENT_RENEWAL_MS } from '../../src/cli/commands/shared.js';
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

  it(`${PROCESSES} \`syncauth refresh\` at once share renewals: at most one per ${RECENT_RENEWAL_MS / 1000} s they span`, async () => {
    const p = await onboard('twenty-refreshes');
    const { results, tokenRequests, elapsedMs } = await together(p, ['refresh', '--profile', p.profile, '--json']);
    // A refresh renews unless it finds a token renewed less than RECENT_RENEWAL_MS ago, so two renewals are at
    // least that far apart: over `elapsedMs` there can be no more than 1 + elapsedMs / RECENT_RENEWAL_MS.
    const bound = 1 + Math.floor(elapsedMs / RECENT_RENEWAL_MS);
    expect(tokenRequests.length, `${tokenRequests.length} renewals in ${elapsedMs} ms`).toBeGreaterThanOrEqual(1);
    expect(tokenRequests.length, `${tokenRequests.length} renewals in ${elapsedMs} ms`).toBeLessThanOrEqual(bound);
    expect(bound, `the processes took ${elapsedMs} ms`).toBeLessThan(PROCESSES / 4);
    for (const result of results) {
      expect((JSON.parse(result.stdout) as { connector: { id: string } }).connector.id).toBe(p.connectorId);
    }
    expect(sources(ob).filter((s) => s.name === `conn-${p.profile}`)).toHaveLength(1);
  }, 180_000);
});
