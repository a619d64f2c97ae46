// Against a service without the unique-name rule a workspace may hold several connectors of a profile's family
// (its connector name or the time-stamped replacements, a dropbox connector of the same app key and folder).
// A reconcile that finds several keeps one (the one the profile's workflow reads, else the one recorded, else
// the oldest no other workflow reads), points the workflow at it, removes the rest and says which, by name and
// id. A connector another workflow reads, and one it cannot prove is this profile's, are never removed.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator, type StoredSource } from '../../src/emulator/index.js';
import { ServiceClient, isServiceError, type SourceConnectorInformation } from '../../src/service/index.js';
import { describeCleanup, dropboxConfig, reconcileConnector, type DropboxConnectorSpec } from '../../src/sync/reconcile.js';
import { connectorsNamed, startWorld } from '../daemon/helpers.js';
import {
  onboardWithGrant, readProfileState, runCli, sources, startOnboarding, type Onboarding,
} from '../helpers/onboarding.js';

const SPEC: DropboxConnectorSpec = {
  name: 'conn-family',
  remoteUrl: 'dropbox://data',
  recursive: false,
  appKey: 'appkey-family',
  appSecret: 'appsecret-family',
  refreshToken: 'refresh-token-family',
  accessToken: 'sl.u.family',
};

type Three = [SourceConnectorInformation, SourceConnectorInformation, SourceConnectorInformation];

const running: { emu: RunningEmulator; client: ServiceClient }[] = [];
afterEach(async () => {
  for (const { emu, client } of running.splice(0)) {
    await client.close();
    await emu.close();
  }
});

/** An emulator without the unique-name rule whose clock steps a second per request, so creation order is age order. */
async function world(): Promise<{ emu: RunningEmulator; client: ServiceClient; workflowId: string }> {
  let t = Date.parse('2026-01-01T00:00:00Z');
  const emu = await startEmulator({ uniqueConnectorNames: false, now: () => (t += 1000) });
  const client = new ServiceClient({ baseUrl: emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
  running.push({ emu, client });
  return { emu, client, workflowId: emu.seeded?.workflowId as string };
}

function make(client: ServiceClient, name = SPEC.name, differs: Partial<DropboxConnectorSpec> = {}): Promise<SourceConnectorInformation> {
  return client.createSource({ name, type: 'dropbox', config: dropboxConfig({ ...SPEC, ...differs, accessToken: 'sl.u.old' }) });
}

function stored(emu: RunningEmulator): StoredSource[] {
  return [...(emu.state.workspaces.get('default')?.sources.values() ?? [])];
}

function readers(emu: RunningEmulator, workflowId: string): string[] | undefined {
  return emu.state.workspaces.get('default')?.workflows.get(workflowId)?.sources;
}

describe('the emulator\'s unique-name rule', () => {
  it('refuses a second connector of one name by default, and takes it with uniqueConnectorNames: false', async () => {
    const strict = await startEmulator();
    const client = new ServiceClient({ baseUrl: strict.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    running.push({ emu: strict, client });
    await make(client);
    const refused = await make(client).then(() => undefined, (error: unknown) => error);
    expect(isServiceError(refused) && refused.status).toBe(409);

    const { emu, client: lax } = await world();
    await make(lax);
    await make(lax);
    expect(stored(emu).map((s) => s.name)).toEqual([SPEC.name, SPEC.name]);
  });
});

describe('a reconcile that finds several connectors of the family', () => {
  it('keeps the one the profile\'s workflow reads, even over the one recorded, and removes the rest', async () => {
    const { emu, client, workflowId } = await world();
    const recorded = await make(client);
    const read = await make(client);
    const replacement = await make(client, `${SPEC.name}-20260101000000`);
    await client.updateWorkflow(workflowId, { source_id: read.id });

    const result = await reconcileConnector({ client, connector: SPEC, connectorId: recorded.id, workflow: { id: workflowId } });
    expect(result).toMatchObject({ action: 'adopted', connector: { id: read.id }, workflowAction: 'unchanged' });
    expect(result.removedConnectors).toEqual([{ id: recorded.id, name: SPEC.name }, { id: replacement.id, name: replacement.name }]);
    expect(result.removed).toEqual([recorded.id, replacement.id]);
    expect(stored(emu).map((s) => [s.id, s.config.token])).toEqual([[read.id, SPEC.accessToken]]);
    expect(readers(emu, workflowId)).toEqual([read.id]);
  });

  it('without a workflow reading one, keeps the recorded one', async () => {
    const { emu, client, workflowId } = await world();
    const [a, b, c] = [await make(client), await make(client), await make(client)] as Three;
    const kept = await reconcileConnector({ client, connector: SPEC, connectorId: b.id, workflow: { id: workflowId } });
    expect(kept).toMatchObject({ action: 'updated', connector: { id: b.id }, workflowAction: 'updated', removed: [a.id, c.id] });
    expect(readers(emu, workflowId)).toEqual([b.id]);
    expect(stored(emu).map((s) => s.id)).toEqual([b.id]);
  });

  it('with no workflow reading one and none recorded, keeps the oldest', async () => {
    const { emu, client } = await world();
    const [a, b, c] = [await make(client), await make(client, `${SPEC.name}-20260101000000`), await make(client)] as Three;
    // The id was lost and no workflow is named: the oldest stays, whichever process looks.
    const oldest = await reconcileConnector({ client, connector: SPEC });
    expect(oldest).toMatchObject({ action: 'adopted', connector: { id: a.id }, removed: [b.id, c.id] });
    expect(stored(emu).map((s) => s.id)).toEqual([a.id]);
  });

  it('never removes a duplicate another workflow reads, and says it left it', async () => {
    const { emu, client, workflowId } = await world();
    const other = await client.createWorkflow({ name: 'someone-elses', workflow_type: 'basic' });
    const [a, b, c] = [await make(client), await make(client), await make(client)] as Three;
    await client.updateWorkflow(other.id, { source_id: b.id });

    const result = await reconcileConnector({ client, connector: SPEC, connectorId: a.id, workflow: { id: workflowId } });
    expect(result).toMatchObject({ connector: { id: a.id }, removed: [c.id] });
    expect(result.keptShared).toEqual([{ id: b.id, name: SPEC.name, workflows: [other.id] }]);
    expect(stored(emu).map((s) => s.id)).toEqual([a.id, b.id]);
    expect(readers(emu, other.id)).toEqual([b.id]);
    expect(readers(emu, workflowId)).toEqual([a.id]);
    expect(describeCleanup(result)).toEqual([
      `removed 1 other source connector(s) of this profile: ${SPEC.name} (${c.id})`,
      `left source connector ${SPEC.name} (${b.id}) in place: workflow ${other.id} reads it`,
    ]);

    // With nothing recorded, the one kept is the oldest that no other workflow reads, not the shared one.
    await client.updateWorkflow(other.id, { source_id: a.id });
    const lost = await reconcileConnector({ client, connector: SPEC });
    expect(lost).toMatchObject({ action: 'adopted', connector: { id: b.id }, removed: [] });
    expect(lost.keptShared.map((k) => k.id)).toEqual([a.id]);
    expect(stored(emu).map((s) => s.id)).toEqual([a.id, b.id]);
  });

  it.each<[string, Partial<DropboxConnectorSpec>]>([
    ['another app key', { appKey: 'someone-elses-app' }],
    ['another folder', { remoteUrl: 'dropbox://elsewhere' }],
    ['an app key the service masks', { appKey: '********' }],
  ])('leaves a connector of the family\'s name with %s alone, while it removes a true duplicate', async (_what, differs) => {
    const { emu, client, workflowId } = await world();
    const ours = await make(client);
    const foreign = await make(client, SPEC.name, differs);
    const foreignReplacement = await make(client, `${SPEC.name}-20260101000000`, differs);
    const s3 = await client.createSource({ name: SPEC.name, type: 's3', config: { remote_url: 's3://bucket/path', anonymous: true } });
    const duplicate = await make(client);
    const before = stored(emu).filter((s) => [foreign.id, foreignReplacement.id, s3.id].includes(s.id)).map((s) => structuredClone(s));

    const result = await reconcileConnector({ client, connector: SPEC, connectorId: ours.id, workflow: { id: workflowId } });
    expect(result).toMatchObject({ action: 'updated', connector: { id: ours.id }, removed: [duplicate.id], keptShared: [] });
    expect(stored(emu).filter((s) => s.id !== ours.id)).toEqual(before);
  });
});

describe('`refresh` where the workspace holds duplicates of the profile\'s connector', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding({ emulator: { uniqueConnectorNames: false } });
  });
  afterAll(async () => ob.emulator.close());

  it('with 20 duplicates, one refresh leaves one, the workflow reading it, and names the ones it removed', async () => {
    const p = await onboardWithGrant(ob, 'dups');
    const client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey, retry: { retries: 0 } });
    try {
      const workflow = await client.createWorkflow({ name: 'dups-wf', workflow_type: 'basic' });
      const wired = await runCli(['profile', 'set', '--profile', p.profile, '--workflow-id', workflow.id], { env: p.env, cwd: p.home.dir });
      expect(wired.code, wired.stderr).toBe(0);
      const config = sources(ob).find((s) => s.id === p.connectorId)?.config as Record<string, unknown>;
      const duplicates: SourceConnectorInformation[] = [];
      for (let i = 0; i < 20; i++) duplicates.push(await client.createSourceUntyped({ name: `conn-${p.profile}`, type: 'dropbox', config }));
      // The workflow was pointed at one of them (by hand, or by the last of several racing processes).
      const read = duplicates[6] as SourceConnectorInformation;
      await client.updateWorkflow(workflow.id, { source_id: read.id });

      const result = await runCli(['refresh', '--profile', p.profile], { env: p.env, cwd: p.home.dir });
      expect(result.code, result.stderr).toBe(0);
      const family = sources(ob).filter((s) => s.name === `conn-${p.profile}`);
      expect(family.map((s) => s.id)).toEqual([read.id]);
      expect(ob.emulator.state.workspaces.get('default')?.workflows.get(workflow.id)?.sources).toEqual([read.id]);
      expect(readProfileState(p.home, p.profile)).toMatchObject({ connectorId: read.id });

      // In the family's order, oldest first and, within one millisecond of creation, by id: the order every
      // process sees the family in (duplicates made within one millisecond may come in either creation order).
      const byAge = (a: SourceConnectorInformation, b: SourceConnectorInformation): number => Date.parse(a.created_at) - Date.parse(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
      const removed = [p.connectorId, ...duplicates.filter((d) => d.id !== read.id).sort(byAge).map((d) => d.id)];
      expect(result.stdout).toContain(`✓ source connector conn-${p.profile} adopted (${read.id})`);
      expect(result.stdout).toContain(`✓ removed 20 other source connector(s) of this profile: ${removed.map((id) => `conn-${p.profile} (${id})`).join(', ')}\n`);
      for (const secret of [ob.app.appSecret, p.refreshToken, String(config.token)]) expect(result.stdout + result.stderr).not.toContain(secret);

      // --json says the same: ids in `removed`, and names beside them.
      const another = await client.createSourceUntyped({ name: `conn-${p.profile}`, type: 'dropbox', config });
      const json = await runCli(['refresh', '--profile', p.profile, '--json'], { env: p.env, cwd: p.home.dir });
      expect(json.code, json.stderr).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({
        connector: { id: read.id, action: 'updated' },
        removed: [another.id],
        removedConnectors: [{ id: another.id, name: `conn-${p.profile}` }],
        keptShared: [],
      });
    } finally {
      await client.close();
    }
  }, 60_000);
});

describe('the daemon where the workspace holds duplicates of the profile\'s connector', () => {
  it('its next reconcile leaves one, the one the workflow reads, and logs the ids it removed', async () => {
    const world = await startWorld({ profiles: ['docs'], reconcile: true, workflow: true, emulator: { uniqueConnectorNames: false } });
    await world.daemon.sweep();
    const [first] = connectorsNamed(world.emu, 'conn-docs');
    expect(first).toBeDefined();
    const client = new ServiceClient({ baseUrl: world.emu.url, apiKey: DEFAULT_EMULATOR_API_KEY, retry: { retries: 0 } });
    try {
      const extra: string[] = [];
      for (let i = 0; i < 3; i++) extra.push((await client.createSourceUntyped({ name: 'conn-docs', type: 'dropbox', config: first?.config as Record<string, unknown> })).id);
      // Past the renewal margin: the next sweep renews, then reconciles.
      world.clock.advance(16_000);
      const report = await world.daemon.sweep();
      expect(report.profiles[0]).toMatchObject({ renewal: 'renewed', reconcile: 'updated' });
      expect(connectorsNamed(world.emu, 'conn-docs').map((c) => c.id)).toEqual([first?.id]);
      const logged = world.log.records().filter((r) => r.event === 'reconcile.updated');
      // Made in the same emulator instant, they are removed in id order.
      expect(logged.at(-1)?.removed).toEqual([...extra].sort());
    } finally {
      await client.close();
    }
  });
});
