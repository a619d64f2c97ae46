// At most 100 token calls per profile in any 24 hours, whatever the failure (src/daemon/call-budget.ts): a
// profile whose token endpoint answers 503 all day, next to a healthy one, with four-hour tokens and a clock
// moved by hand a minute a sweep. Alone, and in a fleet of three over the Redis stand-in, where the replica that
// takes the failing profile over continues its count and its backoff rather than starting from zero.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { BUDGET_BURST, BUDGET_REFILL_MS, budgetScale, CallBudgets, mergeBudgets, nextCallAt, spentAt, TOKEN_CALLS_PER_DAY, withCall, type BudgetState } from '../../src/daemon/call-budget.js';
import { startDaemon, type DaemonGrant, type RunningDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import type { MemoryRedis } from '../helpers/replicas.mjs';
import { captureLog, emulator, failingDoor, fleetReplicaOptions, handDrivenOptions, obtainGrant, profileOf, renewalsOf, tempDir, virtualClocks } from './helpers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** The most calls in any window of `span` among `ats` (sorted). */
function mostWithin(ats: number[], span: number): number {
  let most = 0;
  let first = 0;
  for (let last = 0; last < ats.length; last += 1) {
    while ((ats[last] as number) - (ats[first] as number) >= span) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

describe('the budget of token calls', () => {
  it('lets a profile that calls whenever it may make at most 100 calls in any 24 hours, and one every 24 minutes once its burst is spent', () => {
    let state: BudgetState | undefined;
    const ats: number[] = [];
    for (let t = 0; t < 3 * DAY; t += MINUTE) {
      if (nextCallAt(state, t) > t) continue;
      state = withCall(state, { at: t, failures: 1 });
      ats.push(t);
    }
    expect(mostWithin(ats, DAY)).toBeLessThanOrEqual(TOKEN_CALLS_PER_DAY);
    expect(mostWithin(ats, DAY)).toBeGreaterThanOrEqual(TOKEN_CALLS_PER_DAY - 2);
    // The burst at a minute apart, then the refill's pace: never silent for hours.
    expect(ats.slice(0, BUDGET_BURST)).toEqual(Array.from({ length: BUDGET_BURST }, (_, i) => i * MINUTE));
    const gaps = ats.slice(BUDGET_BURST + 1).map((at, i) => at - (ats[BUDGET_BURST + i] as number));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(BUDGET_REFILL_MS + MINUTE);
  });

  it('never holds a healthy profile: six renewals a day, a restart or a takeover each hour, and checks that force a renewal', () => {
    let state: BudgetState | undefined;
    for (let t = 0; t < 7 * DAY; t += 10 * MINUTE) {
      const renewal = t % (4 * HOUR) === 0 || t % HOUR === 0 || t % (3 * HOUR) === 20 * MINUTE;
      if (!renewal) continue;
      expect(nextCallAt(state, t)).toBe(t);
      state = withCall(state, { at: t, failures: 0 });
    }
  });

  it('is the day\'s 100 for a four-hour token, and three times the need of a token too short for it, so a healthy profile of any lifetime is never held', () => {
    expect(budgetScale(4 * HOUR, 15 * MINUTE)).toBe(1);
    expect(budgetScale(undefined, 15 * MINUTE)).toBe(1);
    for (const [lifetime, margin] of [[6_000, 5_000], [20_000, 15 * MINUTE], [30 * MINUTE, 5 * MINUTE]] as const) {
      const scale = budgetScale(lifetime, margin);
      const every = Math.max(1_000, lifetime - margin);
      let state: BudgetState | undefined;
      for (let t = 0; t < DAY; t += every) {
        expect(nextCallAt(state, t, scale)).toBe(t);
        state = withCall(state, { at: t, failures: 0 }, scale);
      }
    }
  });

  it('merged with an older record of itself (replayed), counts what the newer does, never more', () => {
    let state: BudgetState | undefined;
    const history: BudgetState[] = [];
    for (let i = 0; i < 30; i += 1) {
      state = withCall(state, { at: i * MINUTE, failures: i + 1, retryAt: i * MINUTE + MINUTE });
      history.push(state);
    }
    const now = 31 * MINUTE;
    const newest = history.at(-1) as BudgetState;
    for (const old of history) {
      expect(spentAt(old, now)).toBeLessThanOrEqual(spentAt(newest, now));
      expect(mergeBudgets(newest, old)).toEqual(mergeBudgets(newest, newest));
    }
    // A budget whole again has no calls counted, however many it once had.
    expect(spentAt(newest, newest.at + BUDGET_BURST * BUDGET_REFILL_MS)).toBe(0);
  });
});

describe("a process's budgets over one token endpoint", () => {
  it('through an outage of the endpoint, probe it once a minute for all, and release every profile at the first success, each within 100 a day', async () => {
    let t = 0;
    const budgets = new CallBudgets({ now: () => t, marginMs: 15 * MINUTE, log: captureLog('info').logger });
    const names = Array.from({ length: 10 }, (_, i) => `p${i}`);
    const endpoint = 'http://127.0.0.1:1/oauth2/token';
    const calls = new Map<string, number[]>(names.map((name) => [name, []]));
    const outage = { from: 2 * HOUR, to: 2 * HOUR + 90 * MINUTE };
    const down = (at: number): boolean => at >= outage.from && at < outage.to;
    // Every profile wants a token from the outage's start on (as renewals due then would), and once it has one
    // wants none for the rest of the day; a sweep a minute visits them in order.
    const served = new Set<string>();
    const callsAfterEnd: number[] = [];
    for (t = outage.from; t < outage.from + DAY; t += MINUTE) {
      for (const name of names) {
        if (served.has(name) || budgets.spentUntil(name, endpoint) !== undefined) continue;
        const failed = down(t);
        (calls.get(name) as number[]).push(t);
        if (!failed) served.add(name);
        if (t >= outage.to) callsAfterEnd.push(t);
        await budgets.called(name, { at: t, failures: failed ? 1 : 0, endpoint }, false);
      }
    }
    // Every profile has its token within two sweeps of the end, not at its refill.
    expect(served.size).toBe(names.length);
    expect(Math.max(...callsAfterEnd) - outage.to).toBeLessThanOrEqual(2 * MINUTE);
    // Past the burst the whole process called about once a minute, and no profile made more than 100 calls.
    const during = [...calls.values()].flat().filter((at) => at >= outage.from + 45 * MINUTE && at < outage.to);
    // (one probe a minute, and each profile's refill giving it one call every 24 minutes)
    expect(during.length).toBeLessThanOrEqual(45 + 2 * names.length);
    for (const ats of calls.values()) expect(ats.length).toBeLessThanOrEqual(TOKEN_CALLS_PER_DAY);
  });

  it("keeps the endpoint's scale for a short-lived token through a profile's spell of failures that begins once its budget is whole again", async () => {
    let t = 0;
    const budgets = new CallBudgets({ now: () => t, marginMs: 20_000, log: captureLog('info').logger });
    const endpoint = 'http://127.0.0.1:1/oauth2/token';
    // One-minute tokens: a healthy profile renews about 2,000 times a day, so the budget is scaled for it.
    await budgets.called('docs', { at: t, failures: 0, endpoint, lifetimeMs: 60_000 }, false);
    t += 10 * MINUTE;
    expect(budgets.spentUntil('docs', endpoint)).toBeUndefined();
    // Then its endpoint fails: a call a second for five minutes is still within the scaled budget.
    for (let i = 1; i <= 300; i += 1, t += 1_000) {
      expect(budgets.spentUntil('docs', endpoint)).toBeUndefined();
      await budgets.called('docs', { at: t, failures: i, endpoint }, false);
    }
  });

  it('a profile failing alone spends its reserve as the others succeed, then the refill: at most 100 in 24 hours', async () => {
    let t = 0;
    const budgets = new CallBudgets({ now: () => t, marginMs: 15 * MINUTE, log: captureLog('info').logger });
    const endpoint = 'http://127.0.0.1:1/oauth2/token';
    const ats: number[] = [];
    for (t = 0; t < 2 * DAY; t += MINUTE) {
      // Healthy neighbours with four-hour tokens, one of them renewing every 10 minutes: news that the endpoint answers.
      if (t % (10 * MINUTE) === 0) await budgets.called(`healthy-${(t / (10 * MINUTE)) % 24}`, { at: t, failures: 0, endpoint, lifetimeMs: 4 * 60 * MINUTE }, false);
      if (budgets.spentUntil('failing', endpoint) !== undefined) continue;
      ats.push(t);
      await budgets.called('failing', { at: t, failures: ats.length, endpoint }, false);
    }
    expect(mostWithin(ats, DAY)).toBeLessThanOrEqual(TOKEN_CALLS_PER_DAY);
    expect(ats.filter((at) => at >= DAY).length).toBeGreaterThanOrEqual(55);
    for (let i = 0; i < 24; i += 1) expect(budgets.spentUntil(`healthy-${i}`, endpoint)).toBeUndefined();
  });
});


interface Replica {
  id: string;
  daemon: RunningDaemon;
  running: boolean;
}

/** Daemons over one emulator (four-hour tokens) and one clock, alone or as a fleet over the Redis stand-in. */
async function budgetWorld(count: number, options: { fleet?: boolean } = {}) {
  const clocks = virtualClocks();
  const emu = await emulator({ tokenLifetimeSeconds: 4 * 3600, now: clocks.now });
  const door = await failingDoor(emu, clocks.now);
  const redis: MemoryRedis = { now: clocks.now, leases: new Map(), records: new Map() };
  const grantKey = randomBytes(32);
  const names = Array.from({ length: count }, (_, i) => `b${String(i).padStart(2, '0')}`);
  const grants = new Map<string, DaemonGrant>();
  for (const name of names) grants.set(name, await obtainGrant(emu));
  const log = captureLog('info');
  const replicas: Replica[] = [];
  const start = async (id: string): Promise<Replica> => {
    const daemon = await startDaemon({
      profiles: () => Promise.resolve(names.map((name) => ({ ...profileOf(emu, { name, grant: grants.get(name) as DaemonGrant }), tokenUrl: door.url }))),
      profileStore: openProfileStore(tempDir()),
      ...(options.fleet
        ? { ...fleetReplicaOptions(id, { clocks, log, redis, grantKey, leaseMs: 3 * MINUTE, fallbackMs: 20 * MINUTE }), spreadRenewals: false }
        : handDrivenOptions(id, { clocks, log })),
    });
    const replica = { id, daemon, running: true };
    replicas.push(replica);
    return replica;
  };
  const sweepAll = async (): Promise<void> => {
    for (const r of replicas) if (r.running) await r.daemon.sweep();
  };
  const advance = async (ms: number): Promise<void> => {
    for (let left = ms; left > 0; left -= MINUTE) {
      clocks.advance(MINUTE);
      await sweepAll();
    }
  };
  const refreshTokenOf = (name: string): string => (grants.get(name) as DaemonGrant).refreshToken;
  const callsOf = (name: string): number[] => door.calls.get(refreshTokenOf(name)) ?? [];
  const served = (r: Replica): string[] => r.daemon.status().profiles.map((p) => p.name);
  const outcomes = (name: string): unknown[] => log.records().filter((r) => r.profile === name && r.event === 'renewal.budget_spent');
  const close = async (): Promise<void> => {
    for (const r of replicas) await r.daemon.close();
    await door.close();
  };
  return { emu, door, redis, names, replicas, start, sweepAll, advance, refreshTokenOf, callsOf, served, outcomes, close, log, now: clocks.now };
}

describe('a profile whose token endpoint fails all day', () => {
  it('sends at most 100 calls in 24 hours, is told so with when it resumes, and renews within the refill once the endpoint is back; its healthy neighbour is never held', async () => {
    const w = await budgetWorld(2);
    try {
      const [failing, healthy] = w.names as [string, string];
      const r = await w.start('solo');
      await w.sweepAll();
      expect(renewalsOf(w.emu, w.refreshTokenOf(failing))).toBe(1);
      // From its next renewal on, every call of the failing profile meets a 503.
      w.door.failing.add(w.refreshTokenOf(failing));
      const from = w.now();
      // Its token falls due within four hours; a whole day of failing follows.
      await w.advance(DAY + 4 * HOUR);
      const calls = w.callsOf(failing).filter((at) => at >= from);
      expect(calls.length).toBeGreaterThan(BUDGET_BURST);
      expect(mostWithin(calls, DAY)).toBeLessThanOrEqual(TOKEN_CALLS_PER_DAY);
      // It kept trying through the day, at the refill's pace once its burst was spent.
      const late = calls.filter((at) => at >= from + 12 * HOUR);
      expect(late.length).toBeGreaterThanOrEqual(20);
      const spent = w.log.records().filter((rec) => rec.profile === failing && rec.event === 'renewal.budget_spent');
      expect(spent.length).toBeGreaterThanOrEqual(1);
      expect(spent[0]).toMatchObject({ level: 40, resumeAt: expect.stringMatching(/^\d{4}-/) });
      expect(r.daemon.status().profiles.find((p) => p.name === failing)).toMatchObject({ ready: false });
      // The healthy one renewed every lifetime, and was never held.
      expect(renewalsOf(w.emu, w.refreshTokenOf(healthy))).toBeGreaterThanOrEqual(6);
      expect(w.log.records().filter((rec) => rec.profile === healthy && rec.event === 'renewal.budget_spent')).toEqual([]);
      expect(r.daemon.status().profiles.find((p) => p.name === healthy)).toMatchObject({ ready: true });
      // The endpoint answers again: a token within the refill's pace, not at the end of some day.
      w.door.failing.delete(w.refreshTokenOf(failing));
      const back = w.now();
      let renewedAt: number | undefined;
      for (let minute = 0; minute < 30 && renewedAt === undefined; minute += 1) {
        await w.advance(MINUTE);
        if (r.daemon.status().profiles.find((p) => p.name === failing)?.ready) renewedAt = w.now();
      }
      expect(renewedAt).toBeDefined();
      expect((renewedAt as number) - back).toBeLessThanOrEqual(BUDGET_REFILL_MS + 2 * MINUTE);
    } finally {
      await w.close();
    }
  }, 120_000);
});

describe('in a fleet, the budget and the backoff go with the profile', () => {
  it('the replica that takes a failing profile over continues its count (at most 100 calls in 24 hours across the fleet) and its backoff', async () => {
    const w = await budgetWorld(9, { fleet: true });
    try {
      const [a, b, c] = [await w.start('a'), await w.start('b'), await w.start('c')] as [Replica, Replica, Replica];
      await w.sweepAll();
      await w.sweepAll();
      const name = w.served(a)[0] as string;
      expect(name).toBeDefined();
      w.door.failing.add(w.refreshTokenOf(name));
      const from = w.now();
      // Its token falls due within four hours; from then its owner spends the burst, a minute or so a call, until
      // the budget holds it.
      await w.advance(6 * HOUR);
      expect(w.outcomes(name).filter((rec) => (rec as { replica?: string }).replica === 'a').length).toBeGreaterThanOrEqual(1);
      const beforeTakeover = w.callsOf(name).filter((at) => at >= from).length;
      expect(beforeTakeover).toBeGreaterThanOrEqual(BUDGET_BURST);
      // The owner dies; another replica takes the profile after the lease, and is held by the same budget:
      // no fresh burst of forty.
      a.running = false;
      const died = w.now();
      await w.advance(10 * MINUTE);
      const heir = [b, c].find((r) => w.served(r).includes(name)) as Replica;
      expect(heir).toBeDefined();
      const firstHour = w.callsOf(name).filter((at) => at > died && at <= died + HOUR);
      expect(firstHour.length).toBeLessThanOrEqual(4);
      expect(w.outcomes(name).filter((rec) => (rec as { replica?: string }).replica === heir.id).length).toBeGreaterThanOrEqual(1);
      // Its backoff continued too: the streak it reports is the fleet's, not one of its own from zero.
      expect(w.redis.budgets?.get(name)?.failures).toBeGreaterThan(BUDGET_BURST);
      await w.advance(DAY - (w.now() - from));
      const calls = w.callsOf(name).filter((at) => at >= from);
      expect(calls.length).toBeLessThanOrEqual(TOKEN_CALLS_PER_DAY);
      // The other profiles were renewed every lifetime across the fleet, and never held.
      for (const other of w.names.filter((n) => n !== name)) {
        expect(w.outcomes(other)).toEqual([]);
        expect(renewalsOf(w.emu, w.refreshTokenOf(other))).toBeGreaterThanOrEqual(6);
      }
    } finally {
      await w.close();
    }
  }, 120_000);
});

describe('a grant a person has just authorized', () => {
  it('is renewed with at once, whatever the budget the failing grant before it spent', async () => {
    const w = await budgetWorld(2, { fleet: true });
    try {
      const r = await w.start('a');
      await w.sweepAll();
      await w.sweepAll();
      const name = w.names[0] as string;
      w.door.failing.add(w.refreshTokenOf(name));
      await w.advance(6 * HOUR);
      expect(w.outcomes(name).length).toBeGreaterThanOrEqual(1);
      expect(r.daemon.status().profiles.find((p) => p.name === name)).toMatchObject({ ready: false, lastRenewal: { outcome: 'budget_spent' } });
      const fresh = await obtainGrant(w.emu);
      const result = await r.daemon.reauthorized(name, { ...fresh, accountId: '' });
      expect(result).toMatchObject({ stored: true });
      expect(result.error).toBeUndefined();
      expect(renewalsOf(w.emu, fresh.refreshToken)).toBe(1);
      expect(r.daemon.status().profiles.find((p) => p.name === name)).toMatchObject({ ready: true });
    } finally {
      await w.close();
    }
  }, 60_000);
});
