// The daemon's notices, in-process on the hand-moved clock of the daemon tests: each transition a person
// should hear about is told once, with the profile, connector, folder, reason and time, and the next
// transition (a new spell, another grant revoked) is told again under another transition name.
import { describe, expect, it } from 'vitest';
import type { ProfileNotice } from '../../src/notify/notice.js';
import { startDaemon } from '../../src/daemon/index.js';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { newSecretsVersion } from '../../src/profile/index.js';
import { baseState } from '../../src/sync/renew.js';
import { drive, obtainGrant, profileOf, seededRandom, startWorld } from '../daemon/helpers.js';

function collector(): { notices: ProfileNotice[]; sink: { notice(n: ProfileNotice): void } } {
  const notices: ProfileNotice[] = [];
  return { notices, sink: { notice: (n) => void notices.push(n) } };
}

const MINUTE = 60_000;

describe('notices of the daemon', () => {
  it('tells profile.reauthorization_needed once per transition, profile.reauthorized when new secrets resume it, and a second revocation anew', async () => {
    const { notices, sink } = collector();
    const world = await startWorld({ profiles: ['docs', 'other'], reconcile: true, daemon: { notices: sink } });
    await drive(world, 5, 1000);
    expect(notices).toEqual([]);
    const docs = world.grants.get('docs');
    if (!docs) throw new Error('grant missing');
    world.emu.revokeGrant(docs.refreshToken);
    world.clock.advance(5_000);
    const parkedAt = world.clock.now();
    // Many sweeps while it stays parked: one notice.
    await drive(world, 30, 1000);
    const needed = notices.filter((n) => n.type === 'profile.reauthorization_needed');
    expect(needed).toHaveLength(1);
    expect(needed[0]).toMatchObject({ profile: 'docs', folder: 'dropbox://data', errorCode: 'OAUTH_INVALID_GRANT' });
    // The time of the transition: the sweep that found the grant revoked.
    expect(needed[0]?.at).toBeGreaterThanOrEqual(parkedAt);
    expect(needed[0]?.at).toBeLessThan(parkedAt + 30_000);
    expect(needed[0]?.connectorId).toMatch(/.+/);
    expect(needed[0]?.reason).toMatch(/revoked|expired|invalid/i);
    // No token.unavailable on top of it: the person was told already.
    expect(notices.filter((n) => n.type === 'token.unavailable')).toEqual([]);

    // New secrets stored (setup again): renewing again, and the loop closed.
    const fresh = await obtainGrant(world.emu, DEFAULT_APP);
    world.grants.set('docs', fresh);
    await world.store.update('docs', (current) => ({ ...baseState(current), secretsVersion: newSecretsVersion() }));
    await drive(world, 3, 1000);
    const reauthorized = notices.filter((n) => n.type === 'profile.reauthorized');
    expect(reauthorized).toHaveLength(1);
    expect(reauthorized[0]).toMatchObject({ profile: 'docs', transition: needed[0]?.transition, folder: 'dropbox://data' });
    expect(world.daemon.status().profiles.find((p) => p.name === 'docs')?.ready).toBe(true);

    // Revoked again later: a new transition, told again.
    world.emu.revokeGrant(fresh.refreshToken);
    await drive(world, 30, 1000);
    const again = notices.filter((n) => n.type === 'profile.reauthorization_needed');
    expect(again).toHaveLength(2);
    expect(again[1]?.transition).not.toBe(again[0]?.transition);
    expect(notices.every((n) => n.profile === 'docs')).toBe(true);
  });

  it('a daemon restarted on a parked profile names the same transition, so the notice id is the same', async () => {
    const first = collector();
    const world = await startWorld({ profiles: ['docs'], daemon: { notices: first.sink } });
    await drive(world, 2, 1000);
    const grant = world.grants.get('docs');
    if (!grant) throw new Error('grant missing');
    world.emu.revokeGrant(grant.refreshToken);
    await drive(world, 30, 1000);
    expect(first.notices).toHaveLength(1);
    await world.daemon.close();

    const second = collector();
    const restarted = await startDaemon({
      profiles: [{ ...profileOf(world.emu, { name: 'docs', grant }), readGrant: async () => grant }],
      profileStore: world.store,
      renewMarginMs: 5_000,
      schedule: false,
      now: world.clock.now,
      random: seededRandom(),
      notices: second.sink,
    });
    try {
      await restarted.sweep();
      expect(second.notices).toHaveLength(1);
      expect(second.notices[0]).toMatchObject({ type: 'profile.reauthorization_needed', transition: first.notices[0]?.transition });
    } finally {
      await restarted.close();
    }
  });

  it('tells connector.failing once the reconciles have failed past the threshold, once per failing spell', async () => {
    const { notices, sink } = collector();
    const world = await startWorld({ profiles: ['docs'], reconcile: true, lifetimeSeconds: 3600, daemon: { notices: sink, connectorFailingAfterMs: 10 * MINUTE, renewMarginMs: 5 * MINUTE } });
    await drive(world, 2, 1000);
    expect(world.daemon.status().profiles[0]?.reconcile?.lastOutcome).toBe('created');
    world.emu.setFaults([{ route: 'sources', status: 503 }]);
    // The next renewal (an hour's token, renewed 5 min before its end) starts a reconcile that fails and retries.
    await drive(world, 60 + 25, MINUTE);
    const failing = notices.filter((n) => n.type === 'connector.failing');
    expect(failing).toHaveLength(1);
    expect(failing[0]).toMatchObject({ profile: 'docs', folder: 'dropbox://data', errorCode: expect.any(String) });
    expect(failing[0]?.reason).toContain('the connector has not been updated for');
    // Back: the spell ends; a later one is told again, under another transition.
    world.emu.setFaults([]);
    await drive(world, 5, MINUTE);
    expect(notices.filter((n) => n.type === 'connector.failing')).toHaveLength(1);
    world.emu.setFaults([{ route: 'sources', status: 503 }]);
    await drive(world, 60 + 25, MINUTE);
    const spells = notices.filter((n) => n.type === 'connector.failing');
    expect(spells).toHaveLength(2);
    expect(spells[1]?.transition).not.toBe(spells[0]?.transition);
  });

  it('tells token.unavailable once no live token has been held for longer than the margin, once per spell', async () => {
    const { notices, sink } = collector();
    const tokenFile = `${(await import('../daemon/helpers.js')).tempDir()}/{profile}.token`;
    const world = await startWorld({ profiles: ['docs'], lifetimeSeconds: 60, daemon: { notices: sink, tokenFile, renewMarginMs: 20_000 } });
    await drive(world, 2, 1000);
    world.emu.setFaults([{ route: 'token', status: 503 }]);
    // The token dies 60 s after it was issued; 20 s after that, the spell is past the margin.
    await drive(world, 60, 1000);
    expect(notices.filter((n) => n.type === 'token.unavailable')).toEqual([]);
    await drive(world, 60, 1000);
    const unavailable = notices.filter((n) => n.type === 'token.unavailable');
    expect(unavailable).toHaveLength(1);
    expect(unavailable[0]).toMatchObject({ profile: 'docs', errorCode: expect.any(String) });
    expect(unavailable[0]?.reason).toContain('no live access token for');
    await drive(world, 120, 1000);
    expect(notices.filter((n) => n.type === 'token.unavailable')).toHaveLength(1);
    world.emu.setFaults([]);
    await drive(world, 30, 1000);
    expect(world.daemon.status().ready).toBe(true);
    world.emu.setFaults([{ route: 'token', status: 503 }]);
    await drive(world, 200, 1000);
    const spells = notices.filter((n) => n.type === 'token.unavailable');
    expect(spells).toHaveLength(2);
    expect(spells[1]?.transition).not.toBe(spells[0]?.transition);
    expect(notices.every((n) => n.type === 'token.unavailable')).toBe(true);
  });
});
