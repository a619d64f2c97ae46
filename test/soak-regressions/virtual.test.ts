// A slice of the year soak (soak/virtual.mjs) in every test run: twelve simulated days of two replicas and ten
// profiles under every fault kind the year draws, judged by the same targets as `npm run soak`.
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- plain JavaScript modules shared with `npm run soak`
import { checkTargets, formatResult } from '../../soak/common.mjs';
// @ts-expect-error -- see above
import { runVirtualSoak } from '../../soak/virtual.mjs';

interface Result {
  schedule: { kind: string }[];
  expiredWhileReplicaDown: unknown[];
  humanActions: { profile: string }[];
  expectedHumanActions: string[];
  renewals: Record<string, number>;
  lifetimes: number;
}

const KINDS = [
  'token_outage_short', 'token_outage_long', 'token_5xx_burst', 'token_429_burst', 'token_slow', 'token_hang',
  'token_trickle', 'service_5xx', 'service_hang', 'service_trickle', 'connector_deleted', 'replica_killed', 'replica_stopped', 'host_suspended',
  'redis_restarted', 'clock_stepped', 'token_file_unwritable', 'grant_revoked',
];

describe('the soak, in virtual time', () => {
  it('twelve days under every kind of fault meet every target', async () => {
    const seed = Number(process.env.SYNCAUTH_SOAK_SEED ?? 11);
    const result = (await runVirtualSoak({ seed, days: 12 })) as Result;
    const misses = checkTargets(result) as unknown[];
    expect(misses, formatResult(result, misses) as string).toEqual([]);
    // It cannot pass by running nothing: every fault was on the schedule, tokens were renewed for every
    // lifetime, the observer saw the tokens a stopped replica left expire, and the revoked grant was flagged.
    expect(new Set(result.schedule.map((e) => e.kind))).toEqual(new Set(KINDS));
    for (const n of Object.values(result.renewals)) expect(n).toBeGreaterThanOrEqual(result.lifetimes * 10 * 0.9);
    expect(result.expiredWhileReplicaDown.length).toBeGreaterThan(0);
    expect(result.humanActions.map((h) => h.profile)).toEqual(result.expectedHumanActions);
    expect(result.expectedHumanActions).toHaveLength(1);
  }, 240_000);
});
