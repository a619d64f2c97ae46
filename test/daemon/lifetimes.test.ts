// Many token lifetimes in a second: the emulator and the daemon share a hand-moved clock (token lifetime
// 20 s, margin 5 s, a sweep every simulated second), and after every sweep the published token, the token in
// memory and the connector are checked against what the emulator knows to be live.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { World } from './helpers.js';
import { connectorsNamed, drive, latestTokenOf, renewalsOf, startWorld, tokenRequests } from './helpers.js';

const LIFETIME_S = 20;
const MARGIN_S = 5;
const SIM_S = 300;

interface Tally {
  /** Moments at which the file held a token that was no longer live. */
  expiredFile: number;
  /** Moments with no file at all after the first renewal. */
  missingFile: number;
  expiredMemory: number;
  staleConnector: number;
}

/** Checks every profile against the emulator after a sweep. */
function checker(world: World, tokenFile: string, options: { connectorMayLag?: () => boolean } = {}): { tally: Tally; check: () => void } {
  const tally: Tally = { expiredFile: 0, missingFile: 0, expiredMemory: 0, staleConnector: 0 };
  const check = (): void => {
    const now = world.clock.now();
    const status = world.daemon.status();
    for (const [name, grant] of world.grants) {
      const file = tokenFile.replace('{profile}', name);
      if (existsSync(file)) {
        const token = readFileSync(file, 'utf8');
        const issued = world.emu.state.accessTokens.get(token);
        if (!issued || issued.expiresAt <= now) tally.expiredFile += 1;
      } else {
        tally.missingFile += 1;
      }
      const profile = status.profiles.find((p) => p.name === name);
      if (!profile?.expiresAt || Date.parse(profile.expiresAt) <= now || !profile.holdsToken) tally.expiredMemory += 1;
      const latest = latestTokenOf(world.emu, grant.refreshToken);
      const connectors = connectorsNamed(world.emu, `conn-${name}`);
      const lagging = options.connectorMayLag?.() ?? false;
      if (!lagging && (connectors.length !== 1 || connectors[0]?.config.token !== latest?.token)) tally.staleConnector += 1;
    }
  };
  return { tally, check };
}

function idealRenewals(): number {
  // One at start (the daemon holds no token to publish), then one per (lifetime - margin).
  return 1 + SIM_S / (LIFETIME_S - MARGIN_S);
}

describe('renewal across many token lifetimes', () => {
  it('never publishes or holds an expired token, renews at the ideal rate, keeps the connector current', async () => {
    const dir = (await import('./helpers.js')).tempDir();
    const tokenFile = path.join(dir, '{profile}.token');
    const world = await startWorld({
      profiles: 3,
      lifetimeSeconds: LIFETIME_S,
      reconcile: true,
      workflow: true,
      daemon: { renewMarginMs: MARGIN_S * 1000, tokenFile },
    });
    const { tally, check } = checker(world, tokenFile);
    await drive(world, SIM_S, 1000, check);

    expect(tally).toEqual({ expiredFile: 0, missingFile: 0, expiredMemory: 0, staleConnector: 0 });
    for (const [, grant] of world.grants) {
      const renewals = renewalsOf(world.emu, grant.refreshToken);
      expect(Math.abs(renewals - idealRenewals()) / idealRenewals()).toBeLessThanOrEqual(0.1);
    }
    // The seeded workflow reads from the first profile's connector.
    const workflow = world.emu.state.workspaces.get('default')?.workflows.get(world.emu.seeded?.workflowId ?? '');
    expect(workflow?.sources).toEqual([connectorsNamed(world.emu, 'conn-p1')[0]?.id]);
  });

  it('rides out token 5xx, 429 bursts with Retry-After, latency and service 5xx shorter than the margin', async () => {
    const dir = (await import('./helpers.js')).tempDir();
    const tokenFile = path.join(dir, '{profile}.token');
    const world = await startWorld({
      profiles: 2,
      lifetimeSeconds: LIFETIME_S,
      reconcile: true,
      daemon: { renewMarginMs: MARGIN_S * 1000, tokenFile },
    });
    let serviceDown = false;
    const { tally, check } = checker(world, tokenFile, { connectorMayLag: () => serviceDown });
    let injected = 0;
    // Faults switched on and off on the shared clock; each outage is shorter than the 5 s margin.
    const schedule: { at: number; apply: () => void }[] = [
      { at: 13, apply: () => world.emu.setFaults([{ route: 'token', status: 503 }]) },
      { at: 16, apply: () => world.emu.setFaults([]) },
      { at: 43, apply: () => world.emu.setFaults([{ route: 'token', status: 429, retryAfterSeconds: 2, times: 2 }]) },
      { at: 70, apply: () => world.emu.setFaults([{ route: 'token', latencyMs: 100 }]) },
      { at: 90, apply: () => world.emu.setFaults([]) },
      { at: 100, apply: () => world.emu.setFaults([{ route: 'sources', status: 503 }]) },
      { at: 103, apply: () => world.emu.setFaults([]) },
      { at: 130, apply: () => world.emu.setFaults([{ route: 'token', status: 500, errorRate: 0.5 }]) },
      { at: 133, apply: () => world.emu.setFaults([]) },
    ];
    const before = tokenRequests(world.emu);
    await drive(world, 200, 1000, async (step) => {
      check();
      const due = schedule.filter((s) => s.at === step);
      for (const s of due) {
        s.apply();
        injected += 1;
      }
      serviceDown = step >= 100 && step < 110;
    });
    expect(injected).toBe(schedule.length);
    expect(tally).toEqual({ expiredFile: 0, missingFile: 0, expiredMemory: 0, staleConnector: 0 });
    // No retry storm: the renewals plus a few retries per outage, not one request per sweep per profile.
    const requests = tokenRequests(world.emu) - before;
    const renewals = [...world.grants.values()].reduce((n, g) => n + renewalsOf(world.emu, g.refreshToken), 0);
    expect(renewals).toBeLessThanOrEqual(2 * (1 + 200 / (LIFETIME_S - MARGIN_S)) * 1.1);
    expect(requests - renewals).toBeGreaterThan(0);
    expect(requests - renewals).toBeLessThanOrEqual(24);
    // The failures were logged as warnings with a retry time, never as errors.
    const records = world.log.records();
    expect(records.some((r) => r.level === 40 && typeof r.retryInMs === 'number')).toBe(true);
    expect(records.filter((r) => Number(r.level) >= 50)).toEqual([]);
  });
});
