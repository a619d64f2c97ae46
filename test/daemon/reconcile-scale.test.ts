// A workspace where many profiles each keep their connector (operators onboarding folder after folder into one
// service): a profile's reconcile in the usual cycle costs the service the same calls whether the workspace
// holds ten connectors or a thousand: its connector's update by id. The duplicate check lists the workspace
// once for every profile of it (at most once an hour), not once per profile per renewal.
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, type RequestLogEntry, type RunningEmulator } from '../../src/emulator/index.js';
import { ServiceClient } from '../../src/service/index.js';
import { dropboxConfig } from '../../src/sync/reconcile.js';
import { connectorsNamed, startWorld, type World } from './helpers.js';

/** The service's requests (not Dropbox's) from the `since`-th on, as `METHOD path` with ids as `{id}`. */
function serviceCalls(emu: RunningEmulator, since: number): { calls: string[]; bytes: number } {
  const made = emu.state.requests.slice(since).filter((r: RequestLogEntry) => r.path.startsWith('/api/v1/'));
  return {
    calls: made.map((r) => `${r.method} ${r.path.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '{id}')} ${r.status}`).sort(),
    bytes: made.reduce((sum, r) => sum + (r.bytes ?? 0), 0),
  };
}

/** `count` connectors of other profiles in the workspace, as `setup` of each left them. */
async function othersConnectors(world: World, count: number): Promise<void> {
  const client = new ServiceClient({ baseUrl: world.emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
  try {
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (next < count) {
        const i = next++;
        const name = `dropbox-data-other-${String(i).padStart(4, '0')}`;
        await client.createSource({
          name,
          type: 'dropbox',
          config: dropboxConfig({ name, remoteUrl: 'dropbox://data', recursive: false, appKey: 'other-app', appSecret: 'other-secret', refreshToken: `other-refresh-${i}` }),
        });
      }
    }));
  } finally {
    await client.close();
  }
}

/** Two profiles with their connectors, `others` connectors of other profiles beside them; three sweeps. */
async function sweeps(others: number): Promise<{ listed: { calls: string[] }; usual: { calls: string[]; bytes: number }; world: World }> {
  const world = await startWorld({ profiles: ['a', 'b'], reconcile: true });
  const first = await world.daemon.sweep();
  expect(first.profiles.map((p) => p.reconcile)).toEqual(['created', 'created']);
  await othersConnectors(world, others);
  // Past the renewal margin: each sweep renews both, then reconciles both.
  world.clock.advance(16_000);
  let since = world.emu.state.requests.length;
  const second = await world.daemon.sweep();
  expect(second.profiles.map((p) => [p.renewal, p.reconcile])).toEqual([['renewed', 'updated'], ['renewed', 'updated']]);
  const listed = serviceCalls(world.emu, since);
  world.clock.advance(16_000);
  since = world.emu.state.requests.length;
  const third = await world.daemon.sweep();
  expect(third.profiles.map((p) => [p.renewal, p.reconcile])).toEqual([['renewed', 'updated'], ['renewed', 'updated']]);
  return { listed, usual: serviceCalls(world.emu, since), world };
}

describe('the reconcile of a profile among many connectors of one workspace', () => {
  it('costs one update by id in the usual cycle, the same calls and bytes at 10 and at 1,000 connectors', async () => {
    const small = await sweeps(10);
    const large = await sweeps(1_000);
    for (const { listed, usual } of [small, large]) {
      // The sweep that first needs the duplicate check lists the workspace once, for both profiles.
      expect(listed.calls).toEqual(['GET /api/v1/sources/ 200', 'PUT /api/v1/sources/{id} 200', 'PUT /api/v1/sources/{id} 200']);
      // The usual cycle: each profile's connector updated by id, and nothing listed.
      expect(usual.calls).toEqual(['PUT /api/v1/sources/{id} 200', 'PUT /api/v1/sources/{id} 200']);
    }
    expect(large.usual.calls).toEqual(small.usual.calls);
    // The answers are the two connectors, whatever else the workspace holds.
    expect(large.usual.bytes).toBeLessThan(small.usual.bytes * 1.1);
    for (const { world } of [small, large]) {
      expect(connectorsNamed(world.emu, 'conn-a')).toHaveLength(1);
      expect(connectorsNamed(world.emu, 'conn-b')).toHaveLength(1);
    }
  }, 120_000);

  it('finds a duplicate made after the shared listing at the first reconcile after the next one, an hour on', async () => {
    const world = await startWorld({ profiles: ['a', 'b'], reconcile: true, emulator: { uniqueConnectorNames: false } });
    await world.daemon.sweep();
    world.clock.advance(16_000);
    await world.daemon.sweep();
    const [kept] = connectorsNamed(world.emu, 'conn-a');
    const client = new ServiceClient({ baseUrl: world.emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    let duplicate: string;
    try {
      duplicate = (await client.createSourceUntyped({ name: 'conn-a', type: 'dropbox', config: kept?.config as Record<string, unknown> })).id;
    } finally {
      await client.close();
    }
    // Within the hour, the listing taken before it answers: the connector recorded is updated, the duplicate left.
    world.clock.advance(16_000);
    await world.daemon.sweep();
    expect(connectorsNamed(world.emu, 'conn-a').map((c) => c.id).sort()).toEqual([kept?.id, duplicate].sort());
    // An hour on, the next listing shows it, and the reconcile removes it, keeping the one recorded.
    world.clock.advance(3_600_000);
    const later = await world.daemon.sweep();
    expect(later.profiles.find((p) => p.profile === 'a')).toMatchObject({ renewal: 'renewed', reconcile: 'updated' });
    expect(connectorsNamed(world.emu, 'conn-a').map((c) => c.id)).toEqual([kept?.id]);
    expect(connectorsNamed(world.emu, 'conn-b')).toHaveLength(1);
    const logged = world.log.records().filter((r) => r.event === 'reconcile.updated' && r.profile === 'a');
    expect(logged.at(-1)?.removed).toEqual([duplicate]);
  });
});
