// Two first-time reconciles of one profile at once (two `setup`s, `setup` beside a daemon) both find no
// connector and both create it: the service's unique-name rule answers the second with 409. The loser adopts
// the winner when it is this profile's connector (same app key and folder); a connector of that name that is
// not (another app's, another folder's, another type) is never adopted, updated or removed, and the error
// names it and says what to do.
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator, type StoredSource } from '../../src/emulator/index.js';
import { ServiceClient, isServiceError, type ServiceError, type SourceConnectorInformation } from '../../src/service/index.js';
import { reconcileConnector, type DropboxConnectorSpec } from '../../src/sync/reconcile.js';

const SPEC: DropboxConnectorSpec = {
  name: 'conn-race',
  remoteUrl: 'dropbox://data',
  recursive: false,
  appKey: 'appkey-race',
  appSecret: 'appsecret-race',
  refreshToken: 'refresh-token-race',
  accessToken: 'sl.u.race',
};

const running: RunningEmulator[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
});

async function emulator(): Promise<RunningEmulator> {
  const emu = await startEmulator({ seed: true });
  running.push(emu);
  return emu;
}

function stored(emu: RunningEmulator): StoredSource[] {
  return [...(emu.state.workspaces.get('default')?.sources.values() ?? [])];
}

/**
 * A client whose listing of sources waits until `parties` clients have listed, so that every one of them sees
 * the workspace as it was before any created: the race, made certain.
 */
function racingClients(emu: RunningEmulator, parties: number): ServiceClient[] {
  let arrived = 0;
  let release!: () => void;
  const allListed = new Promise<void>((resolve) => (release = resolve));
  class RacingClient extends ServiceClient {
    #first = true;
    override async listSources(filter?: { sourceType?: string }): Promise<SourceConnectorInformation[]> {
      const listed = await super.listSources(filter);
      if (this.#first) {
        this.#first = false;
        if (++arrived === parties) release();
        await allListed;
      }
      return listed;
    }
  }
  return Array.from({ length: parties }, () => new RacingClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } }));
}

async function expectConflict(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => expect.fail('expected a conflict, but reconcile succeeded'),
    (caught: unknown) => caught,
  );
  expect(isServiceError(error, 'SERVICE_CONFLICT'), String(error)).toBe(true);
  return error as ServiceError;
}

describe('a 409 on creating the connector', () => {
  it('two parallel first-time reconciles of the same profile: one creates, the other adopts it', async () => {
    const emu = await emulator();
    const [a, b] = racingClients(emu, 2) as [ServiceClient, ServiceClient];
    const workflowId = emu.seeded?.workflowId as string;
    const results = await Promise.all([
      reconcileConnector({ client: a, connector: SPEC, workflow: { id: workflowId } }),
      reconcileConnector({ client: b, connector: { ...SPEC, accessToken: 'sl.u.race-b' }, workflow: { id: workflowId } }),
    ]);
    expect(results.map((r) => r.action).sort()).toEqual(['adopted', 'created']);
    expect(results[0].connector.id).toBe(results[1].connector.id);
    expect(emu.state.requests.filter((r) => r.route === 'sources' && r.method === 'POST').map((r) => r.status).sort()).toEqual([200, 409]);
    expect(stored(emu).map((s) => s.name)).toEqual(['conn-race']);
    expect(emu.state.workspaces.get('default')?.workflows.get(workflowId)?.sources).toEqual([results[0].connector.id]);
    await Promise.all([a.close(), b.close()]);
  });

  it.each<[string, Partial<DropboxConnectorSpec>, RegExp]>([
    ['another Dropbox app', { appKey: 'someone-elses-app' }, /belongs to another Dropbox app/],
    ['another folder', { remoteUrl: 'dropbox://elsewhere' }, /it reads dropbox:\/\/elsewhere, not dropbox:\/\/data/],
    ['a masked app key', { appKey: '********' }, /does not show its app key/],
  ])('a connector of the same name for %s is left alone and named in the error', async (_what, differs, reason) => {
    const emu = await emulator();
    const [winner, loser] = racingClients(emu, 2) as [ServiceClient, ServiceClient];
    const theirs: DropboxConnectorSpec = { ...SPEC, ...differs, accessToken: 'sl.u.theirs' };
    const [won, lost] = await Promise.allSettled([
      reconcileConnector({ client: winner, connector: theirs }),
      reconcileConnector({ client: loser, connector: SPEC }),
    ]);
    expect(won.status).toBe('fulfilled');
    const error = await expectConflict(lost.status === 'rejected' ? Promise.reject(lost.reason) : Promise.resolve(lost.value));
    const [existing] = stored(emu);
    expect(stored(emu)).toHaveLength(1);
    expect(existing?.config).toMatchObject({ app_key: theirs.appKey, remote_url: theirs.remoteUrl, token: 'sl.u.theirs' });
    expect(error.message).toContain(`a source connector named "conn-race" (${existing?.id}) already exists on the service and is not this profile's`);
    expect(error.message).toMatch(reason);
    expect(error.hint).toBe(
      `choose another name with --connector-name (or SYNCAUTH_CONNECTOR_NAME), or, if that connector is no longer used, delete it with \`syncauth source delete ${existing?.id}\` and run the command again`,
    );
    expect(error.exitCode).toBe(1);
    for (const secret of [SPEC.appSecret, SPEC.refreshToken, SPEC.appKey]) expect(`${error.message} ${error.hint}`).not.toContain(secret);
    await Promise.all([winner.close(), loser.close()]);
  });

  it('a pre-existing connector of that name from another app is not adopted (nor its credentials replaced)', async () => {
    const emu = await emulator();
    const client = new ServiceClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    const foreign = await client.createSource({
      name: SPEC.name, type: 'dropbox',
      config: { remote_url: SPEC.remoteUrl, recursive: false, app_key: 'other-app', app_secret: 'other-secret', refresh_token: 'other-rt', token: 'sl.u.other' },
    });
    const error = await expectConflict(reconcileConnector({ client, connector: SPEC }));
    expect(error.message).toContain(`(${foreign.id})`);
    expect(stored(emu).map((s) => s.config)).toEqual([foreign.config]);
    await client.close();
  });

  it('a connector of another type with that name is a conflict that names its type', async () => {
    const emu = await emulator();
    const client = new ServiceClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    const s3 = await client.createSource({ name: SPEC.name, type: 's3', config: { remote_url: 's3://bucket/path', anonymous: true } });
    const error = await expectConflict(reconcileConnector({ client, connector: SPEC }));
    expect(error.message).toContain(`(${s3.id})`);
    expect(error.message).toMatch(/it is a s3 connector/);
    expect(stored(emu)).toHaveLength(1);
    await client.close();
  });
});
