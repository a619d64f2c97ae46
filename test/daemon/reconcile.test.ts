// Reconcile after a crash: whatever step the previous cycle died at (after creating a connector, after
// recreating a deleted one, after making a replacement where the service cannot update connectors), the next
// cycle ends with exactly one connector of the profile, and the workflow reading from it.
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import type { RunningEmulator } from '../../src/emulator/index.js';
import type { ProfileStore } from '../../src/profile/index.js';
import { ServiceClient, ServiceError } from '../../src/service/index.js';
import { reconcileConnector, type DropboxConnectorSpec } from '../../src/sync/reconcile.js';
import { connectorsNamed, drive, emulator, fakeClock, startWorld } from './helpers.js';

const SPEC: DropboxConnectorSpec = {
  name: 'conn-docs',
  remoteUrl: 'dropbox://data',
  recursive: false,
  appKey: 'appkey123',
  appSecret: 'appsecret456',
  refreshToken: 'refresh-token-789',
  accessToken: 'sl.u.first',
};

/** A deployment without the update route: PUT /sources/{id} answers 405. */
class NoUpdateClient extends ServiceClient {
  override async updateSource(): Promise<never> {
    throw new ServiceError('SERVICE_METHOD_NOT_ALLOWED', 'no PUT here', { status: 405, unsupported: true });
  }
}

function clientOf(emu: RunningEmulator, Kind: typeof ServiceClient = ServiceClient): ServiceClient {
  return new Kind({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
}

describe('reconcile after a crash', () => {
  it('adopts the connector a crashed cycle created before it could record the id', async () => {
    const emu = await emulator();
    const client = clientOf(emu);
    const first = await reconcileConnector({ client, connector: SPEC });
    expect(first.action).toBe('created');
    // The id never reached the state file: the next cycle knows no id.
    const second = await reconcileConnector({ client, connector: { ...SPEC, accessToken: 'sl.u.second' } });
    expect(second).toMatchObject({ action: 'adopted', connector: { id: first.connector.id } });
    expect(connectorsNamed(emu, 'conn-docs').map((c) => c.config.token)).toEqual(['sl.u.second']);
    await client.close();
  });

  it('adopts the connector a crashed recreation made instead of creating another', async () => {
    const emu = await emulator();
    const client = clientOf(emu);
    const original = await reconcileConnector({ client, connector: SPEC });
    await client.deleteSource(original.connector.id);
    const recreated = await reconcileConnector({ client, connector: SPEC, connectorId: original.connector.id });
    expect(recreated.action).toBe('recreated');
    // Crash before the new id was recorded: the next cycle still holds the deleted one.
    const again = await reconcileConnector({ client, connector: { ...SPEC, accessToken: 'sl.u.third' }, connectorId: original.connector.id });
    expect(again.connector.id).toBe(recreated.connector.id);
    expect(connectorsNamed(emu, 'conn-docs').map((c) => [c.id, c.config.token])).toEqual([[recreated.connector.id, 'sl.u.third']]);
    await client.close();
  });

  it('where connectors cannot be updated, replaces, repoints the workflow and cleans up after a crashed replacement', async () => {
    const clock = fakeClock();
    const emu = await emulator({ now: clock.now });
    const workflowId = emu.seeded?.workflowId as string;
    const plain = clientOf(emu);
    const base = await reconcileConnector({ client: plain, connector: SPEC, workflow: { id: workflowId } });
    const client = clientOf(emu, NoUpdateClient);
    const now = () => new Date(clock.now());

    clock.advance(1000);
    const replaced = await reconcileConnector({ client, connector: SPEC, connectorId: base.connector.id, workflow: { id: workflowId }, now });
    expect(replaced).toMatchObject({ action: 'replaced', removed: [base.connector.id] });
    expect(replaced.connector.name).toMatch(/^conn-docs-\d{14}$/);

    // Crash before the replacement's id was recorded; the next cycle replaces again and removes the orphan.
    clock.advance(1000);
    const next = await reconcileConnector({ client, connector: { ...SPEC, accessToken: 'sl.u.later' }, connectorId: base.connector.id, workflow: { id: workflowId }, now });
    expect(next.action).toBe('replaced');
    expect(next.removed).toEqual([replaced.connector.id]);
    const live = connectorsNamed(emu, 'conn-docs');
    expect(live.map((c) => c.id)).toEqual([next.connector.id]);
    expect(live[0]?.config.token).toBe('sl.u.later');
    expect(emu.state.workspaces.get('default')?.workflows.get(workflowId)?.sources).toEqual([next.connector.id]);

    // State lost altogether: the time-stamped replacement is adopted, not a second connector made under the base name.
    const adopted = await reconcileConnector({ client: plain, connector: SPEC, workflow: { id: workflowId }, now });
    expect(adopted).toMatchObject({ action: 'adopted', connector: { id: next.connector.id } });
    expect(connectorsNamed(emu, 'conn-docs').map((c) => c.id)).toEqual([next.connector.id]);
    await plain.close();
    await client.close();
  });

  it('a daemon whose state write fails after the connector was created ends the next cycle with one connector', async () => {
    const world = await startWorld({ profiles: ['docs'], reconcile: true, workflow: true });
    // The first write of a connector id fails, as if the process died right after creating the connector.
    const store = world.store as ProfileStore & { update: ProfileStore['update'] };
    const update = store.update.bind(store);
    let failed = false;
    store.update = (name, mutate, options) =>
      update(
        name,
        (current) => {
          const draft = mutate(current);
          if (!failed && draft?.connectorId) {
            failed = true;
            throw new Error('disk full');
          }
          return draft;
        },
        options,
      );
    const report = await world.daemon.sweep();
    expect(report.profiles[0]).toMatchObject({ renewal: 'renewed', reconcile: 'failed' });
    expect(connectorsNamed(world.emu, 'conn-docs')).toHaveLength(1);
    await drive(world, 3, 1000);
    const live = connectorsNamed(world.emu, 'conn-docs');
    expect(live).toHaveLength(1);
    expect((await world.store.read('docs'))?.connectorId).toBe(live[0]?.id);
    expect(world.daemon.status().profiles[0]?.reconcile).toMatchObject({ pending: false, lastOutcome: 'adopted' });
  });
});
