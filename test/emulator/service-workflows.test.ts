import { describe, expect, it } from 'vitest';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { SCHEDULE_CRON, SCHEDULES } from '../../src/service/models.js';
import { validConfigs } from '../fixtures/source-configs.js';
import { call, detailLocs, emulator, manualClock } from './helpers.js';

type Workflow = {
  id: string;
  name: string;
  sources: string[];
  destinations: string[];
  workflow_type: string | null;
  workflow_nodes: { id: string; name: string; type: string; subtype: string; settings: unknown }[];
  schedule: { crontab_entries: { cron_expression: string }[] } | null;
  status: string;
  created_at: string;
  updated_at: string | null;
  reprocess_all: boolean | null;
};

async function createSource(emu: RunningEmulator, name = 'dropbox-data', apiKey?: string): Promise<string> {
  const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name, type: 'dropbox', config: validConfigs.dropbox }, apiKey });
  expect(answer.status, answer.text).toBe(200);
  return (answer.body as { id: string }).id;
}

function seededId(emu: RunningEmulator): string {
  expect(emu.seeded).not.toBeNull();
  return emu.seeded?.workflowId ?? '';
}

async function update(emu: RunningEmulator, body: unknown, id = seededId(emu)): Promise<Workflow> {
  const answer = await call(emu, 'PUT', `/api/v1/workflows/${id}`, { body });
  expect(answer.status, answer.text).toBe(200);
  return answer.body as Workflow;
}

describe('seeding', () => {
  it('gives each workspace one workflow wired to one destination', async () => {
    const emu = await emulator({ workspaces: [{ name: 'a', apiKeys: ['ka'] }, { name: 'b', apiKeys: ['kb'] }] });
    const a = emu.state.seeded.get('a');
    const b = emu.state.seeded.get('b');
    expect(a && b && a.workflowId !== b.workflowId).toBe(true);
    expect(emu.seeded).toEqual(a);
    const workflow = await call(emu, 'GET', `/api/v1/workflows/${a?.workflowId ?? ''}`, { apiKey: 'ka' });
    expect(workflow.body).toMatchObject({ sources: [], destinations: [a?.destinationId], status: 'inactive', schedule: null });
    expect((await call(emu, 'GET', `/api/v1/workflows/${a?.workflowId ?? ''}`, { apiKey: 'kb' })).body).toEqual({ detail: 'Workflow not found' });
  });

  it('seed: false starts empty', async () => {
    const emu = await emulator({ seed: false });
    expect(emu.seeded).toBeNull();
    expect((await call(emu, 'GET', '/api/v1/workflows/')).body).toEqual([]);
  });
});

describe('workflow update', () => {
  it('wires a source and a schedule; the workflow becomes active', async () => {
    const clock = manualClock();
    const emu = await emulator({ now: clock.now });
    const sourceId = await createSource(emu);
    clock.advance(1000);
    const workflow = await update(emu, { source_id: sourceId, schedule: 'every hour' });
    expect(workflow.sources).toEqual([sourceId]);
    expect(workflow.destinations).toEqual([emu.seeded?.destinationId]);
    expect(workflow.schedule).toEqual({ crontab_entries: [{ cron_expression: '0 * * * *' }] });
    expect(workflow.status).toBe('active');
    expect(workflow.updated_at).toBe(new Date(clock.now()).toISOString());
    expect((await call(emu, 'GET', `/api/v1/workflows/${workflow.id}`)).body).toEqual(workflow);
  });

  it('an absent field leaves the value unchanged', async () => {
    const emu = await emulator();
    const sourceId = await createSource(emu);
    const before = await update(emu, { source_id: sourceId, schedule: 'daily', workflow_type: 'advanced', reprocess_all: true, name: 'nightly' });
    const after = await update(emu, {});
    expect({ ...after, updated_at: null }).toEqual({ ...before, updated_at: null });
    const renamed = await update(emu, { name: 'renamed' });
    expect(renamed).toMatchObject({ name: 'renamed', sources: [sourceId], schedule: before.schedule, workflow_type: 'advanced', reprocess_all: true });
  });

  it('an explicit null clears the value', async () => {
    const emu = await emulator();
    const sourceId = await createSource(emu);
    await update(emu, { source_id: sourceId, schedule: 'weekly', workflow_type: 'custom', reprocess_all: true, workflow_nodes: [{ name: 'p', type: 'partition', subtype: 'vlm' }] });
    const cleared = await update(emu, { source_id: null, schedule: null, workflow_type: null, reprocess_all: null, workflow_nodes: null, destination_id: null });
    expect(cleared).toMatchObject({ sources: [], destinations: [], schedule: null, workflow_type: null, reprocess_all: null, workflow_nodes: [], status: 'inactive' });
  });

  it('a null name keeps the name, which the response requires', async () => {
    const emu = await emulator();
    const before = await update(emu, { name: 'kept' });
    expect((await update(emu, { name: null })).name).toBe(before.name);
  });

  it('maps each of the 11 named schedules to its cron expression', async () => {
    const emu = await emulator();
    expect(SCHEDULES).toHaveLength(11);
    const seen: string[] = [];
    for (const schedule of SCHEDULES) {
      const workflow = await update(emu, { schedule });
      expect(workflow.schedule).toEqual({ crontab_entries: [{ cron_expression: SCHEDULE_CRON[schedule] }] });
      seen.push(workflow.schedule?.crontab_entries[0]?.cron_expression ?? '');
    }
    expect(seen).toEqual([
      '*/15 * * * *', '0 * * * *', '0 */2 * * *', '0 */4 * * *', '0 */6 * * *', '0 */8 * * *',
      '0 */10 * * *', '0 */12 * * *', '0 0 * * *', '0 0 * * 0', '0 0 1 * *',
    ]);
  });

  it('an unknown schedule is 422 at ["body","schedule"] listing the allowed values', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'PUT', `/api/v1/workflows/${seededId(emu)}`, { body: { schedule: 'hourly' } });
    expect(answer.status).toBe(422);
    const expected = "'every 15 minutes', 'every hour', 'every 2 hours', 'every 4 hours', 'every 6 hours', 'every 8 hours', 'every 10 hours', 'every 12 hours', 'daily', 'weekly' or 'monthly'";
    expect(answer.body).toEqual({ detail: [{ loc: ['body', 'schedule'], msg: `Input should be ${expected}`, type: 'literal_error', ctx: { expected } }] });
    expect((await call(emu, 'GET', `/api/v1/workflows/${seededId(emu)}`)).body).toMatchObject({ schedule: null });
  });

  it('assigns ids to nodes that have none and keeps given ones', async () => {
    const emu = await emulator();
    const given = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
    const workflow = await update(emu, {
      workflow_nodes: [
        { name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: { provider: 'anthropic' } },
        { id: given, name: 'Chunker', type: 'chunk', subtype: 'chunk_by_title' },
        { id: null, name: 'Embedder', type: 'embed', subtype: 'openai' },
      ],
    });
    expect(workflow.workflow_nodes.map((n) => n.name)).toEqual(['Partitioner', 'Chunker', 'Embedder']);
    expect(workflow.workflow_nodes[0]?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(workflow.workflow_nodes[1]?.id).toBe(given);
    expect(workflow.workflow_nodes[2]?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(workflow.workflow_nodes[0]?.settings).toEqual({ provider: 'anthropic' });
    expect(workflow.workflow_nodes[1]?.settings).toBeNull();
  });

  it('a source or destination outside the workspace is 404 and changes nothing', async () => {
    const emu = await emulator({ workspaces: [{ name: 'a', apiKeys: ['ka'] }, { name: 'b', apiKeys: ['kb'] }] });
    const foreign = await createSource(emu, 'theirs', 'kb');
    const id = emu.state.seeded.get('a')?.workflowId ?? '';
    const answer = await call(emu, 'PUT', `/api/v1/workflows/${id}`, { apiKey: 'ka', body: { source_id: foreign, schedule: 'daily' } });
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ detail: 'Source not found' });
    const dest = await call(emu, 'PUT', `/api/v1/workflows/${id}`, { apiKey: 'ka', body: { destination_id: emu.state.seeded.get('b')?.destinationId } });
    expect(dest.body).toEqual({ detail: 'Destination not found' });
    expect((await call(emu, 'GET', `/api/v1/workflows/${id}`, { apiKey: 'ka' })).body).toMatchObject({ sources: [], schedule: null });
  });

  it('another workspace cannot see or update the workflow', async () => {
    const emu = await emulator({ workspaces: [{ name: 'a', apiKeys: ['ka'] }, { name: 'b', apiKeys: ['kb'] }] });
    const id = emu.state.seeded.get('a')?.workflowId ?? '';
    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      const answer = await call(emu, method, `/api/v1/workflows/${id}`, { apiKey: 'kb', body: method === 'PUT' ? { name: 'x' } : undefined });
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ detail: 'Workflow not found' });
    }
  });

  it('refuses bad fields one by one, with FastAPI locations', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'PUT', `/api/v1/workflows/${seededId(emu)}`, {
      body: { source_id: 'abc', workflow_type: 'gold', reprocess_all: 'yes', workflow_nodes: [{ name: 'n' }], extra: 1 },
    });
    expect(answer.status).toBe(422);
    expect(detailLocs(answer)).toEqual(expect.arrayContaining([
      ['body', 'source_id'],
      ['body', 'workflow_type'],
      ['body', 'reprocess_all'],
      ['body', 'workflow_nodes', 0, 'type'],
      ['body', 'workflow_nodes', 0, 'subtype'],
    ]));
    // An unknown field is ignored, as the service's models ignore it.
    expect(detailLocs(answer)).not.toContainEqual(['body', 'extra']);
    const detail = (answer.body as { detail: { loc: unknown[]; type: string }[] }).detail;
    const typeOf = (field: string): string | undefined => detail.find((d) => d.loc[1] === field)?.type;
    expect(typeOf('source_id')).toBe('uuid_parsing');
    expect(typeOf('workflow_type')).toBe('enum');
    expect(typeOf('reprocess_all')).toBe('bool_type');
  });

  it('path ids must be uuids; an unknown uuid is 404', async () => {
    const emu = await emulator();
    const bad = await call(emu, 'PUT', '/api/v1/workflows/workflow-1', { body: {} });
    expect(bad.status).toBe(422);
    expect(detailLocs(bad)).toEqual([['path', 'workflow_id']]);
    const unknown = await call(emu, 'PUT', '/api/v1/workflows/3fa85f64-5717-4562-b3fc-2c963f66afa6', { body: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ detail: 'Workflow not found' });
  });

  it('a deleted source stays referenced by the workflow', async () => {
    const emu = await emulator();
    const sourceId = await createSource(emu);
    await update(emu, { source_id: sourceId });
    expect((await call(emu, 'DELETE', `/api/v1/sources/${sourceId}`)).status).toBe(200);
    expect(((await call(emu, 'GET', `/api/v1/workflows/${seededId(emu)}`)).body as Workflow).sources).toEqual([sourceId]);
  });
});

describe('workflow create, list and delete', () => {
  it('creates with the CreateWorkflow model', async () => {
    const emu = await emulator();
    const sourceId = await createSource(emu);
    const answer = await call(emu, 'POST', '/api/v1/workflows/', {
      body: {
        name: 'ingest',
        workflow_type: 'custom',
        source_id: sourceId,
        destination_id: emu.seeded?.destinationId,
        schedule: 'monthly',
        workflow_nodes: [{ name: 'Partitioner', type: 'partition', subtype: 'fast' }],
      },
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      name: 'ingest',
      sources: [sourceId],
      status: 'active',
      schedule: { crontab_entries: [{ cron_expression: '0 0 1 * *' }] },
      reprocess_all: false,
      updated_at: null,
      workflow_nodes: [{ id: expect.stringMatching(/^[0-9a-f-]{36}$/), name: 'Partitioner', type: 'partition', subtype: 'fast', settings: null }],
    });
  });

  it('requires name and workflow_type', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/workflows/', { body: {} });
    expect(answer.status).toBe(422);
    expect(answer.body).toEqual({
      detail: [
        { loc: ['body', 'name'], msg: 'Field required', type: 'missing' },
        { loc: ['body', 'workflow_type'], msg: 'Field required', type: 'missing' },
      ],
    });
  });

  it('lists with filters and pages of 20 by default', async () => {
    const emu = await emulator({ seed: false });
    const sourceId = await createSource(emu);
    for (let i = 0; i < 25; i++) {
      const body = { name: `wf-${String(i).padStart(2, '0')}`, workflow_type: 'basic', ...(i % 5 === 0 ? { source_id: sourceId } : {}) };
      expect((await call(emu, 'POST', '/api/v1/workflows/', { body })).status).toBe(200);
    }
    expect((await call(emu, 'GET', '/api/v1/workflows/')).body).toHaveLength(20);
    expect((await call(emu, 'GET', '/api/v1/workflows/?page=2')).body).toHaveLength(5);
    const byName = await call(emu, 'GET', '/api/v1/workflows/?sort_by=name&sort_direction=desc&page_size=3');
    expect((byName.body as Workflow[]).map((w) => w.name)).toEqual(['wf-24', 'wf-23', 'wf-22']);
    expect((await call(emu, 'GET', `/api/v1/workflows/?source_id=${sourceId}`)).body).toHaveLength(5);
    expect((await call(emu, 'GET', '/api/v1/workflows/?name=wf-07')).body).toHaveLength(1);
    const bad = await call(emu, 'GET', '/api/v1/workflows/?source_id=x&status=running&page=one');
    expect(bad.status).toBe(422);
    expect(detailLocs(bad)).toEqual([['query', 'source_id'], ['query', 'status'], ['query', 'page']]);
  });

  it('deletes', async () => {
    const emu = await emulator();
    const id = seededId(emu);
    const answer = await call(emu, 'DELETE', `/api/v1/workflows/${id}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ detail: `Workflow with id ${id} successfully deleted.` });
    expect((await call(emu, 'GET', `/api/v1/workflows/${id}`)).status).toBe(404);
  });
});
