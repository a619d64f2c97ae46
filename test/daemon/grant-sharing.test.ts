// Replicas and the grant a re-authorization brings: the replica that completes the loop seals it into the
// coordinator; every other replica takes it at its next sweep (parked) or before parking on invalid_grant, and at
// start prefers it to the grant its own store or environment holds; an older record never replaces a newer grant;
// a record that does not open (tampered, another key) is refused, logged with the reason, and never used.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, type Coordinator, type DaemonGrant, type DaemonOptions, type DaemonProfile, type RunningDaemon } from '../../src/daemon/index.js';
import { recordIssuedAt, sealGrant } from '../../src/daemon/grant-record.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, renewalsOf, seededRandom, tempDir, type CapturedLog, type Clock } from './helpers.js';
import type { RunningEmulator } from '../../src/emulator/index.js';

/** The coordinator's grant records in memory, with Redis's rule: never an older record over a newer one. */
function sharedRecords(): { records: Map<string, string>; coordinator: () => Coordinator } {
  const records = new Map<string, string>();
  const coordinator = (): Coordinator => ({
    replicaId: randomBytes(4).toString('hex'),
    acquire: async () => ({ signal: new AbortController().signal, release: async () => undefined }),
    lastReconcile: async () => undefined,
    recordReconcile: async () => undefined,
    readGrantRecord: async (profile) => records.get(profile),
    writeGrantRecord: async (profile, record, issuedAt) => {
      const current = records.get(profile);
      if (current !== undefined && (recordIssuedAt(current) ?? 0) >= issuedAt) return false;
      records.set(profile, record);
      return true;
    },
    isAvailable: () => true,
    close: async () => undefined,
  });
  return { records, coordinator };
}

const daemons: RunningDaemon[] = [];
afterEach(async () => {
  for (const daemon of daemons.splice(0)) await daemon.close();
});

interface Replica {
  daemon: RunningDaemon;
  log: CapturedLog;
}

async function replica(
  emu: RunningEmulator,
  clock: Clock,
  coordinator: Coordinator,
  key: Buffer | undefined,
  profile: () => Partial<DaemonProfile> & { grant: DaemonGrant },
  extra: Partial<DaemonOptions> = {},
): Promise<Replica> {
  const log = captureLog();
  const daemon = await startDaemon({
    profiles: async () => [{ name: 'docs', tokenUrl: emu.tokenUrl, ...profile() }],
    profileStore: openProfileStore(tempDir()),
    renewMarginMs: 5_000,
    schedule: false,
    logger: log.logger,
    now: clock.now,
    random: seededRandom(),
    sleep: clock.sleep,
    backoff: { baseMs: 500 },
    coordinator,
    ...(key ? { grantKey: key } : {}),
    ...extra,
  });
  daemons.push(daemon);
  return { daemon, log };
}

const events = (log: CapturedLog, event: string) => log.records().filter((r) => r.event === event);
const docsEntry = async (daemon: RunningDaemon) => (await daemon.sweep()).profiles.find((p) => p.profile === 'docs');

/** Two replicas of one profile on the env store (the grant is the environment's, read-only, the same on both), each renewed once. */
async function renewedPair() {
  const clock = fakeClock();
  const emu = await emulator({ tokenLifetimeSeconds: 20, now: clock.now });
  const old = await obtainGrant(emu);
  const shared = sharedRecords();
  const key = randomBytes(32);
  const a = await replica(emu, clock, shared.coordinator(), key, () => ({ grant: old }));
  const b = await replica(emu, clock, shared.coordinator(), key, () => ({ grant: old }));
  expect(await docsEntry(a.daemon)).toMatchObject({ renewal: 'renewed' });
  expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'renewed' });
  return { clock, emu, old, shared, key, a, b };
}

/** The same pair after the grant was revoked: both parked for re-authorization. */
async function revokedPair() {
  const { clock, emu, old, shared, key, a, b } = await renewedPair();
  emu.revokeGrant(old.refreshToken);
  clock.advance(20_000);
  expect(await docsEntry(a.daemon)).toMatchObject({ renewal: 'reauthorization_needed' });
  expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'reauthorization_needed' });
  return { clock, emu, old, shared, key, a, b };
}

describe('a grant shared by re-authorization', () => {
  it('is taken by a parked replica at its next sweep, and by a replica restarted with the old grant in its environment', async () => {
    const { clock, emu, old, shared, key, a, b } = await revokedPair();
    const fresh = await obtainGrant(emu);
    const result = await a.daemon.reauthorized('docs', { ...fresh, accountId: 'dbid:owner' });
    expect(result).toMatchObject({ stored: true });
    expect(result.error).toBeUndefined();
    expect(shared.records.has('docs')).toBe(true);
    expect(events(a.log, 'grant.shared')).toHaveLength(1);

    // B's next sweep: the record is read (B is parked), opened, taken; B renews with it in the same visit.
    expect(await docsEntry(b.daemon)).toMatchObject({ action: 'renewal', renewal: 'renewed' });
    expect(renewalsOf(emu, fresh.refreshToken)).toBe(2);
    expect(b.daemon.status()).toMatchObject({ ready: true });
    expect(events(b.log, 'grant.adopted')).toEqual([expect.objectContaining({ profile: 'docs', when: 'sweep', stored: false })]);

    // A reload reads the old grant from the environment again: the newer one stays.
    await b.daemon.reload();
    clock.advance(20_000);
    expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'renewed' });
    expect(renewalsOf(emu, fresh.refreshToken)).toBe(3);

    // A restarted replica (the old grant still in its environment) prefers the record, and never tries the old grant.
    const restarted = await replica(emu, clock, shared.coordinator(), key, () => ({ grant: old }));
    expect(await docsEntry(restarted.daemon)).toMatchObject({ renewal: 'renewed' });
    expect(renewalsOf(emu, fresh.refreshToken)).toBe(4);
    expect(events(restarted.log, 'grant.adopted')).toEqual([expect.objectContaining({ when: 'start' })]);
    expect(events(restarted.log, 'profile.reauthorization_needed')).toHaveLength(0);

    for (const r of [a, b, restarted]) for (const secret of [fresh.refreshToken, fresh.appSecret, old.refreshToken, key.toString('base64')]) expect(r.log.lines.join('\n')).not.toContain(secret);
  });

  it('is taken before a replica that has not failed yet would park on invalid_grant', async () => {
    const { clock, emu, old, a, b } = await renewedPair();
    emu.revokeGrant(old.refreshToken);
    clock.advance(20_000);
    expect(await docsEntry(a.daemon)).toMatchObject({ renewal: 'reauthorization_needed' });
    const fresh = await obtainGrant(emu);
    expect(await a.daemon.reauthorized('docs', { ...fresh, accountId: 'dbid:owner' })).toMatchObject({ stored: true });
    // B's renewal with the revoked grant fails; instead of parking, B takes the shared grant and renews next.
    expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'failed' });
    expect(events(b.log, 'grant.adopted')).toEqual([expect.objectContaining({ when: 'invalid_grant' })]);
    expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'renewed' });
    expect(events(b.log, 'profile.reauthorization_needed')).toHaveLength(0);
  });

  it('is never replaced by an older record, and a tampered record or one sealed under another key is refused and logged', async () => {
    const { clock, emu, shared, key, a, b } = await revokedPair();
    const fresh = await obtainGrant(emu);
    await a.daemon.reauthorized('docs', { ...fresh, accountId: 'dbid:owner' });
    expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'renewed' });
    const issuedAt = recordIssuedAt(shared.records.get('docs') as string) as number;

    // A stale write that got past the store's rule: an older grant, validly sealed.
    const stale = await obtainGrant(emu);
    shared.records.set('docs', sealGrant(key, 'docs', { ...stale, issuedAt: issuedAt - 1 }));
    emu.revokeGrant(fresh.refreshToken);
    clock.advance(20_000);
    expect(await docsEntry(b.daemon)).toMatchObject({ renewal: 'reauthorization_needed' });
    expect(await docsEntry(b.daemon)).toMatchObject({ action: 'parked' });
    expect(renewalsOf(emu, stale.refreshToken)).toBe(0);

    // Newer, but sealed under another key: refused once in the log however many sweeps see it.
    const other = await obtainGrant(emu);
    shared.records.set('docs', sealGrant(randomBytes(32), 'docs', { ...other, issuedAt: issuedAt + 10 }));
    for (let i = 0; i < 3; i++) expect(await docsEntry(b.daemon)).toMatchObject({ action: 'parked' });
    // Newer, but tampered: its time moved forward so it would win.
    const genuine = JSON.parse(sealGrant(key, 'docs', { ...other, issuedAt: issuedAt + 20 })) as Record<string, unknown>;
    shared.records.set('docs', JSON.stringify({ ...genuine, issuedAt: issuedAt + 30 }));
    for (let i = 0; i < 3; i++) expect(await docsEntry(b.daemon)).toMatchObject({ action: 'parked' });
    expect(renewalsOf(emu, other.refreshToken)).toBe(0);
    const refused = events(b.log, 'grant.record_refused');
    expect(refused).toEqual([
      expect.objectContaining({ profile: 'docs', reason: 'sealed_elsewhere' }),
      expect.objectContaining({ profile: 'docs', reason: 'sealed_elsewhere' }),
    ]);
    expect(refused.every((r) => Number(r.level) >= 50)).toBe(true);
    for (const secret of [other.refreshToken, other.appSecret, stale.refreshToken]) expect(b.log.lines.join('\n')).not.toContain(secret);
  });

  it('is stored in the replica\'s own store when writable, and a replica without the key neither shares nor takes it', async () => {
    const { clock, emu, old, shared, key, a } = await revokedPair();
    const fresh = await obtainGrant(emu);
    await a.daemon.reauthorized('docs', { ...fresh, accountId: 'dbid:owner' });

    // A replica with a writable store of its own, still holding the old grant there: it takes the record at
    // start, and writes it to its store.
    let stored: { grant: DaemonGrant; accountId: string | undefined } | undefined;
    const writable = await replica(emu, clock, shared.coordinator(), key, () => ({
      grant: stored?.grant ?? old,
      readGrant: async () => stored?.grant ?? old,
      storeGrant: async (grant: DaemonGrant, accountId: string | undefined) => {
        stored = { grant, accountId };
      },
    }));
    expect(stored).toEqual({ grant: fresh, accountId: 'dbid:owner' });
    expect(events(writable.log, 'grant.adopted')).toEqual([expect.objectContaining({ when: 'start', stored: true })]);
    expect(await docsEntry(writable.daemon)).toMatchObject({ renewal: 'renewed' });

    // Without the key: the record is not read; the old grant is tried and the profile parks.
    const keyless = await replica(emu, clock, shared.coordinator(), undefined, () => ({ grant: old }));
    expect(await docsEntry(keyless.daemon)).toMatchObject({ renewal: 'reauthorization_needed' });
    // And a re-authorization there, with an env store and nothing to hand the grant to, is refused as before.
    expect(await keyless.daemon.reauthorized('docs', { ...(await obtainGrant(emu)), accountId: 'dbid:owner' })).toMatchObject({ stored: false });
  });

  it('runs the --on-reauthorized hook with the new grant, and a failing hook is a warning on a working grant', async () => {
    const clock = fakeClock();
    const emu = await emulator({ tokenLifetimeSeconds: 20, now: clock.now });
    const old = await obtainGrant(emu);
    const handed: DaemonGrant[] = [];
    let ok = true;
    const r = await replica(emu, clock, sharedRecords().coordinator(), undefined, () => ({ grant: old }), {
      onReauthorized: async (profile, grant) => {
        expect(profile).toBe('docs');
        handed.push(grant);
        return ok ? { ok } : { ok, message: 'it exited with code 1' };
      },
    });
    emu.revokeGrant(old.refreshToken);
    expect(await docsEntry(r.daemon)).toMatchObject({ renewal: 'reauthorization_needed' });
    const fresh = await obtainGrant(emu);
    const first = await r.daemon.reauthorized('docs', { ...fresh, accountId: 'dbid:owner' });
    expect(first).toMatchObject({ stored: true });
    expect(first.warning).toBeUndefined();
    expect(handed).toEqual([{ appKey: fresh.appKey, appSecret: fresh.appSecret, refreshToken: fresh.refreshToken }]);
    expect(r.daemon.status()).toMatchObject({ ready: true });

    ok = false;
    const again = await obtainGrant(emu);
    const second = await r.daemon.reauthorized('docs', { ...again, accountId: 'dbid:owner' });
    expect(second).toMatchObject({ stored: true });
    expect(second.error).toBeUndefined();
    expect(second.warning).toMatch(/--on-reauthorized.*failed: it exited with code 1.*restart would read the old one/);
    expect(renewalsOf(emu, again.refreshToken)).toBe(1);
    expect(events(r.log, 'reauth.hook_failed')).toHaveLength(1);
  });
});
