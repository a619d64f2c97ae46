// What syncConnector writes to the profile's state: the connector it reconciled, in one write with what the
// caller records. A reconcile that finds the connector already recorded, with nothing else to record (the
// daemon's, after every renewal), writes nothing: the same bytes but for updatedAt, durably, at every renewal.
import { statSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { ServiceClient } from '../../src/service/index.js';
import { syncConnector, type DropboxConnectorSpec } from '../../src/sync/reconcile.js';
import { baseState } from '../../src/sync/renew.js';
import { tempDir } from '../helpers/cli.js';

const SPEC: DropboxConnectorSpec = {
  name: 'conn-state',
  remoteUrl: 'dropbox://data',
  recursive: false,
  appKey: 'appkey-state',
  appSecret: 'appsecret-state',
  refreshToken: 'refresh-token-state',
  accessToken: 'sl.s.first',
};

const running: { emu: RunningEmulator; client: ServiceClient }[] = [];
afterEach(async () => {
  for (const { emu, client } of running.splice(0)) {
    await client.close();
    await emu.close();
  }
});

describe('the state syncConnector writes', () => {
  it('records a new connector, writes nothing when the recorded one is updated with nothing else to record, and writes what a caller adds', async () => {
    let t = Date.parse('2026-01-01T00:00:00Z');
    const emu = await startEmulator({ now: () => (t += 1000) });
    const client = new ServiceClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    running.push({ emu, client });
    const profiles = openProfileStore(tempDir());
    const name = 'p1';
    const file = profiles.fileOf(name);
    const identity = () => {
      const info = statSync(file);
      return { ino: info.ino, mtimeMs: info.mtimeMs, size: info.size };
    };
    const sync = async (accessToken: string, extra: Partial<Parameters<typeof syncConnector>[0]> = {}) => {
      const state = await profiles.read(name);
      return syncConnector({ client, connector: { ...SPEC, accessToken }, ...(state?.connectorId ? { connectorId: state.connectorId } : {}), profiles, profile: name, ...extra });
    };

    const created = await sync('sl.s.first');
    expect(created.action).toBe('created');
    expect(await profiles.read(name)).toMatchObject({ connectorId: created.connector.id, connectorName: SPEC.name });
    const written = identity();

    // The daemon's reconcile after a renewal: the recorded connector updated, the state left as it is.
    const updated = await sync('sl.s.second');
    expect(updated).toMatchObject({ action: 'updated', connector: { id: created.connector.id } });
    expect(emu.state.workspaces.get('default')?.sources.get(created.connector.id)?.config.token).toBe('sl.s.second');
    expect(identity()).toEqual(written);

    // A caller that records something more (refresh, setup) writes, in the same write.
    await sync('sl.s.third', { fields: (current) => ({ ...baseState(current), remoteUrl: SPEC.remoteUrl }) });
    expect(identity()).not.toEqual(written);
    expect(await profiles.read(name)).toMatchObject({ connectorId: created.connector.id, remoteUrl: SPEC.remoteUrl });

    // The recorded connector gone: the one made in its place is recorded.
    await client.deleteSource(created.connector.id);
    const before = identity();
    const recreated = await sync('sl.s.fourth');
    expect(recreated.connector.id).not.toBe(created.connector.id);
    expect(identity()).not.toEqual(before);
    expect(await profiles.read(name)).toMatchObject({ connectorId: recreated.connector.id });
  });
});
