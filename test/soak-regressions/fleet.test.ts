// A slice of the fleet soak (soak/fleet.mjs) in every test run: 100 shared profiles on three fleet replicas for
// three simulated days, under every fault kind the season draws, judged by the same targets as
// `npm run soak -- --fleet`.
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- plain JavaScript module shared with `npm run soak`
import { checkFleetTargets, formatFleetResult, runFleetSoak } from '../../soak/fleet.mjs';

interface Result {
  schedule: { kind: string; at: number; durationMs: number }[];
  profiles: number;
  lifetimes: number;
  fleet: {
    renewalsMin: number;
    takes: { total: number; byCause: Record<string, number> };
    revocation: { noticedAfterMs?: number; reauthorization?: { stored: boolean }; requests: unknown[] };
    events: Record<string, number>;
    renewals: number;
    servedAtEnd: number[];
    replicasStarted: number;
  };
}

const KINDS = ['cold_start', 'replica_killed', 'reload', 'redis_down', 'token_5xx_burst', 'token_429_burst', 'grant_revoked'];

describe('the soak\'s fleet mode, in virtual time', () => {
  it('three days of 100 shared profiles on three replicas under every kind of fault meet every target', async () => {
    const seed = Number(process.env.SYNCAUTH_SOAK_SEED ?? 3);
    const result = (await runFleetSoak({ seed, days: 3, profileCount: 100 })) as Result;
    const misses = checkFleetTargets(result) as unknown[];
    expect(misses, formatFleetResult(result, misses) as string).toEqual([]);
    // It cannot pass by doing nothing: every fault kind was on the schedule and happened (a replica started for
    // each cold start and kill, the reload logged, the fallback to every profile taken while Redis was away, the
    // revocation noticed and re-authorized), every profile was renewed about once per lifetime, and the
    // profiles of the replicas that went were taken over by the others.
    const f = result.fleet;
    expect(new Set(result.schedule.map((e) => e.kind))).toEqual(new Set(KINDS));
    const count = (kind: string) => result.schedule.filter((e) => e.kind === kind).length;
    expect(f.replicasStarted).toBe(3 + 3 * count('cold_start') + count('replica_killed'));
    expect(f.events['daemon.reloaded']).toBe(count('reload'));
    expect(f.events['fleet.fallback_all']).toBeGreaterThanOrEqual(count('redis_down'));
    expect(f.takes.byCause.replica_killed).toBeGreaterThan(0);
    expect(f.takes.byCause.cold_start).toBeGreaterThanOrEqual(result.profiles);
    expect(f.takes.byCause.redis_down).toBeGreaterThan(0);
    expect(f.renewalsMin).toBeGreaterThanOrEqual(Math.floor(result.lifetimes * 0.9));
    expect(f.revocation.noticedAfterMs).toBeDefined();
    expect(f.revocation.reauthorization?.stored).toBe(true);
    expect(f.servedAtEnd.reduce((s, n) => s + n, 0)).toBe(result.profiles);
    for (const n of f.servedAtEnd) expect(n).toBeGreaterThan(0);
  }, 240_000);

  it('visiting only the profiles due, as the soak does, changes nothing the fleet logs, and the renewals only by which profile a random draw falls to', async () => {
    // Seed 1 has a replica serving a revoked profile for Redis's fallback: the case where a visit not made could
    // hide what one would do (it once took its own refusal for another process's and renewed again).
    const run = (visitAll: boolean) => runFleetSoak({ seed: 1, days: 3, profileCount: 100, visitAll }) as Promise<Result>;
    const every = await run(true);
    const due = await run(false);
    const fleetEvents = (r: Result) => Object.fromEntries(Object.entries(r.fleet.events).filter(([event]) => event.startsWith('fleet.')));
    expect(every.fleet.events['fleet.fallback_refused']).toBeGreaterThan(0);
    expect(fleetEvents(due)).toEqual(fleetEvents(every));
    expect(every.fleet.events['grant.failed_elsewhere']).toBeUndefined();
    expect(due.fleet.events['grant.failed_elsewhere']).toBeUndefined();
    expect(Math.abs(due.fleet.renewals - every.fleet.renewals)).toBeLessThanOrEqual(every.fleet.renewals * 0.01);
  }, 240_000);
});
