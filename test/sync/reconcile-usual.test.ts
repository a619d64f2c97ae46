// The usual cycle with a shared duplicate check (the daemon's): the recorded connector updated by id, nothing
// listed. Wherever a listing can change the answer, the reconcile still lists and keeps what any process that
// lists would keep: the check finding others, the recorded connector gone or not updatable, the workflow
// reading another connector of the family (made after the shared listing, which does not show it).
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { ServiceClient, ServiceError, type SourceConnectorInformation } from '../../src/service/index.js';
import { dropboxConfig, reconcileConnector, type DropboxConnectorSpec, type FamilyCheck } from '../../src/sync/reconcile.js';

const SPEC: DropboxConnectorSpec = {
  name: 'conn-usual',
  remoteUrl: 'dropbox://data',
  recursive: false,
  appKey: 'appkey-usual',
  appSecret: 'appsecret-usual',
  refreshToken: 'refresh-token-usual',
  accessToken: 'sl.u.fresh',
};

const running: { emu: RunningEmulator; client: ServiceClient }[] = [];
afterEach(async () => {
  for (const { emu, client } of running.splice(0)) {
    await client.close();
    await emu.close();
  }
});

/** A service without the unique-name rule, its clock a second on per request so creation order is age order. */
async function world(Client: typeof ServiceClient = ServiceClient): Promise<{ emu: RunningEmulator; client: ServiceClient; workflowId: string }> {
  let t = Date.parse('2026-01-01T00:00:00Z');
  const emu = await startEmulator({ uniqueConnectorNames: false, now: () => (t += 1000) });
  const client = new Client({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
  running.push({ emu, client });
  return { emu, client, workflowId: emu.seeded?.workflowId as string };
}

function make(client: ServiceClient): Promise<SourceConnectorInformation> {
  return client.createSource({ name: SPEC.name, type: 'dropbox', config: dropboxConfig({ ...SPEC, accessToken: 'sl.u.old' }) });
}

function callsSince(emu: RunningEmulator, since: number): string[] {
  return emu.state.requests.slice(since).map((r) => `${r.method} ${r.path.replace(/[0-9a-f-]{36}/g, '{id}')}`);
}

function stored(emu: RunningEmulator): string[] {
  return [...(emu.state.workspaces.get('default')?.sources.values() ?? [])].map((s) => s.id);
}

/** A shared check that says what its (older) listing showed. */
const sawOnly: FamilyCheck = async () => false;

describe('the usual cycle with a shared duplicate check', () => {
  it('updates the recorded connector by id, one call, and reads the workflow when one is named', async () => {
    const { emu, client, workflowId } = await world();
    const recorded = await make(client);
    await client.updateWorkflow(workflowId, { source_id: recorded.id });
    let since = emu.state.requests.length;
    const plain = await reconcileConnector({ client, connector: SPEC, connectorId: recorded.id, familyCheck: sawOnly });
    expect(plain).toMatchObject({ action: 'updated', connector: { id: recorded.id }, removed: [] });
    expect(callsSince(emu, since)).toEqual(['PUT /api/v1/sources/{id}']);
    since = emu.state.requests.length;
    const wired = await reconcileConnector({ client, connector: SPEC, connectorId: recorded.id, workflow: { id: workflowId }, familyCheck: sawOnly });
    expect(wired).toMatchObject({ action: 'updated', workflowAction: 'unchanged' });
    expect(callsSince(emu, since)).toEqual(['PUT /api/v1/sources/{id}', 'GET /api/v1/workflows/{id}']);
  });

  it('lists and removes the others when the check finds some', async () => {
    const { emu, client } = await world();
    const [recorded, duplicate] = [await make(client), await make(client)];
    const result = await reconcileConnector({ client, connector: SPEC, connectorId: recorded.id, familyCheck: async () => true });
    expect(result).toMatchObject({ action: 'updated', connector: { id: recorded.id }, removed: [duplicate.id] });
    expect(stored(emu)).toEqual([recorded.id]);
  });

  it('keeps the one the workflow reads, though the shared listing did not show it, as a listing would', async () => {
    const { emu, client, workflowId } = await world();
    const recorded = await make(client);
    const read = await make(client);
    await client.updateWorkflow(workflowId, { source_id: read.id });
    const result = await reconcileConnector({ client, connector: SPEC, connectorId: recorded.id, workflow: { id: workflowId }, familyCheck: sawOnly });
    expect(result).toMatchObject({ action: 'adopted', connector: { id: read.id }, removed: [recorded.id] });
    // Another process, still recording the first one, lists and keeps the same.
    const listed = await reconcileConnector({ client, connector: SPEC, connectorId: recorded.id, workflow: { id: workflowId } });
    expect(listed).toMatchObject({ connector: { id: read.id }, removed: [] });
    expect(stored(emu)).toEqual([read.id]);
  });

  it('a recorded connector gone is made again, one that cannot be updated is replaced', async () => {
    const { emu, client, workflowId } = await world();
    const gone = await make(client);
    await client.deleteSource(gone.id);
    const recreated = await reconcileConnector({ client, connector: SPEC, connectorId: gone.id, familyCheck: sawOnly });
    expect(recreated.action).toBe('recreated');
    expect(stored(emu)).toEqual([recreated.connector.id]);

    class NoUpdateClient extends ServiceClient {
      override async updateSource(): Promise<never> {
        throw new ServiceError('SERVICE_METHOD_NOT_ALLOWED', 'no PUT here', { status: 405, unsupported: true });
      }
    }
    const noUpdate = new NoUpdateClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    try {
      const replaced = await reconcileConnector({ client: noUpdate, connector: SPEC, connectorId: recreated.connector.id, workflow: { id: workflowId }, familyCheck: sawOnly });
      expect(replaced).toMatchObject({ action: 'replaced', removed: [recreated.connector.id] });
      expect(stored(emu)).toEqual([replaced.connector.id]);
      expect(emu.state.workspaces.get('default')?.workflows.get(workflowId)?.sources).toEqual([replaced.connector.id]);
    } finally {
      await noUpdate.close();
    }
  });
});
