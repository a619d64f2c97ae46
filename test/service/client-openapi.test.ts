// Every request the client makes, for every operation, checked against the service's public OpenAPI document:
// the path and method exist, path and query parameters and the JSON body fit their schemas.
import { afterEach, describe, expect, it } from 'vitest';
import { MockAgent } from 'undici';
import type { MockCallHistoryLog } from 'undici';
import { ServiceClient } from '../../src/service/client.js';
import { SOURCE_TYPES } from '../../src/service/models.js';
import type { WorkflowUpdate } from '../../src/service/models.js';
import { locate, requestErrors, responseErrors } from '../helpers/openapi.js';
import { validConfigs } from '../fixtures/source-configs.js';

const ORIGIN = 'https://platform.example.com';
const SOURCE_ID = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
const WORKFLOW_ID = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const DESTINATION_ID = '6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b';
const NODE_ID = '7d444840-9dc0-41c2-b1d0-e3c4b5e0b6a1';

const source = {
  id: SOURCE_ID, name: 'dropbox-data', type: 'dropbox',
  config: { remote_url: 'dropbox://data', recursive: false },
  created_at: '2025-06-01T10:00:00Z', updated_at: null,
};
const workflow = (i = 0): Record<string, unknown> => ({
  id: i === 0 ? WORKFLOW_ID : `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  name: i === 0 ? 'docs-sync' : `wf-${i}`,
  sources: [SOURCE_ID], destinations: [DESTINATION_ID], workflow_type: 'custom',
  workflow_nodes: [{ id: NODE_ID, name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: {} }],
  schedule: { crontab_entries: [{ cron_expression: '0 0 * * *' }] }, status: 'active',
  created_at: '2025-06-01T10:00:00Z', updated_at: null, reprocess_all: false,
});

/** Answers like the service would, and keeps every request. */
function recordingService(): { agent: MockAgent; client: ServiceClient; calls: () => MockCallHistoryLog[] } {
  const agent = new MockAgent({ enableCallHistory: true });
  agent.disableNetConnect();
  const pool = agent.get(ORIGIN);
  pool.intercept({ path: (p) => p === '/api/v1/sources/', method: 'POST' }).reply(200, source).persist();
  pool.intercept({ path: (p) => p.startsWith('/api/v1/sources/?') || p === '/api/v1/sources/', method: 'GET' })
    .reply(200, [source]).persist();
  pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: /^(GET|PUT)$/ }).reply(200, source).persist();
  pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'DELETE' }).reply(200, {}).persist();
  pool.intercept({ path: '/api/v1/workflows/', method: 'POST' }).reply(200, workflow()).persist();
  pool.intercept({ path: '/api/v1/workflows/', method: 'GET' })
    .reply(200, Array.from({ length: 20 }, (_, i) => workflow(i))).persist();
  pool.intercept({ path: (p) => p.startsWith('/api/v1/workflows/?'), method: 'GET' }).reply(200, [workflow()]).persist();
  pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: /^(GET|PUT)$/ }).reply(200, workflow()).persist();
  const client = new ServiceClient({ baseUrl: ORIGIN, apiKey: 'sk-test-0123456789', dispatcher: agent, sleep: () => Promise.resolve() });
  return { agent, client, calls: () => agent.getCallHistory()?.calls() ?? [] };
}

const agents: MockAgent[] = [];
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.close();
});

function target(call: MockCallHistoryLog): string {
  const query = new URLSearchParams(call.searchParams).toString();
  return query ? `${call.path}?${query}` : call.path;
}

function errorsOf(call: MockCallHistoryLog): string[] {
  const body = call.body === undefined || call.body === null ? undefined : (JSON.parse(call.body) as unknown);
  return requestErrors(call.method, target(call), body);
}

const updates: WorkflowUpdate[] = [
  {},
  { source_id: SOURCE_ID },
  { schedule: null },
  { name: null, source_id: null, destination_id: null, workflow_type: null, workflow_nodes: null, schedule: null, reprocess_all: null },
  {
    name: 'docs-sync', source_id: SOURCE_ID, destination_id: DESTINATION_ID, workflow_type: 'custom',
    workflow_nodes: [
      { id: NODE_ID, name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: { provider: 'anthropic' } },
      { name: 'Chunker', type: 'chunk', subtype: 'chunk_by_title', settings: null },
      { name: 'Embedder', type: 'embed', subtype: 'azure_openai' },
    ],
    schedule: 'every 15 minutes', reprocess_all: true,
  },
  ...(['basic', 'advanced', 'platinum', 'custom'] as const).map((workflow_type) => ({ workflow_type })),
  ...(['every hour', 'every 2 hours', 'every 4 hours', 'every 6 hours', 'every 8 hours', 'every 10 hours',
    'every 12 hours', 'daily', 'weekly', 'monthly'] as const).map((schedule) => ({ schedule })),
];

describe('requests against the public OpenAPI document', () => {
  it('every operation, every source type, every kind of workflow update: all requests validate', async () => {
    const { agent, client, calls } = recordingService();
    agents.push(agent);
    for (const type of SOURCE_TYPES) {
      await client.createSourceUntyped({ name: `my-${type}`, type, config: validConfigs[type] });
      await client.updateSourceUntyped(SOURCE_ID, validConfigs[type], type);
      await client.listSources({ sourceType: type });
      await client.findSourceByName(`my-${type}`, type);
    }
    await client.getSource(SOURCE_ID);
    await client.listSources();
    await client.findSourceByName('dropbox-data');
    await client.updateSourceUntyped(SOURCE_ID, { free: 'form' });
    await client.deleteSource(SOURCE_ID);
    await client.createWorkflow({ name: 'minimal', workflow_type: 'basic' });
    await client.createWorkflow({
      name: 'full', workflow_type: 'custom', source_id: SOURCE_ID, destination_id: DESTINATION_ID,
      workflow_nodes: [{ name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: {} }],
      schedule: 'weekly', reprocess_all: false,
    });
    await client.createWorkflow({ name: 'nulls', workflow_type: 'advanced', source_id: null, destination_id: null, workflow_nodes: null, schedule: null, reprocess_all: null });
    await client.getWorkflow(WORKFLOW_ID);
    await client.findWorkflowByName('docs-sync');
    for (const update of updates) await client.updateWorkflow(WORKFLOW_ID, update);

    const recorded = calls().filter((c) => !c.searchParams.page);
    expect(recorded.length).toBe(SOURCE_TYPES.length * 4 + 10 + updates.length);
    const failures = recorded.map((c) => ({ request: `${c.method} ${target(c)}`, errors: errorsOf(c) }))
      .filter((f) => f.errors.length > 0);
    expect(failures).toEqual([]);
    const operations = new Set(recorded.map((c) => `${c.method} ${locate(c.method, target(c)).template}`));
    expect([...operations].sort()).toEqual([
      'DELETE /api/v1/sources/{source_id}',
      'GET /api/v1/sources/',
      'GET /api/v1/sources/{source_id}',
      'GET /api/v1/workflows/',
      'GET /api/v1/workflows/{workflow_id}',
      'POST /api/v1/sources/',
      'POST /api/v1/workflows/',
      'PUT /api/v1/sources/{source_id}',
      'PUT /api/v1/workflows/{workflow_id}',
    ]);
  });

  it('the requests of a paged workflow list validate, the page number read as the integer it is', async () => {
    const { agent, client, calls } = recordingService();
    agents.push(agent);
    await client.listWorkflows();
    expect(calls().map(target)).toEqual(['/api/v1/workflows/', '/api/v1/workflows/?page=2']);
    expect(errorsOf(calls()[0] as MockCallHistoryLog)).toEqual([]);
    expect(errorsOf(calls()[1] as MockCallHistoryLog)).toEqual([]);
    // A page that is not an integer is still refused, so the coercion is no blanket pass.
    expect(requestErrors('GET', '/api/v1/workflows/?page=x&name=wf')).toEqual([
      'query.page must be integer', 'query.page must be null', 'query.page must match a schema in anyOf',
    ]);
  });

  it('the check is live: requests the client must never make are refused by it', () => {
    expect(requestErrors('POST', '/api/v1/sources/', { name: 'x', type: 'dropbox2', config: {} })).not.toEqual([]);
    expect(requestErrors('PUT', `/api/v1/workflows/${WORKFLOW_ID}`, { schedule: 'hourly' })).not.toEqual([]);
    expect(requestErrors('PUT', '/api/v1/workflows/not-a-uuid', {})).not.toEqual([]);
    expect(requestErrors('GET', '/api/v1/sources/?source_type=ftp')).not.toEqual([]);
    expect(() => requestErrors('PATCH', `/api/v1/sources/${SOURCE_ID}`, {})).toThrow(/not an operation/);
  });

  it('the answers this test gives are valid responses of the document too', () => {
    expect(responseErrors('GET', `/api/v1/sources/${SOURCE_ID}`, 200, source)).toEqual([]);
    expect(responseErrors('GET', `/api/v1/workflows/${WORKFLOW_ID}`, 200, workflow())).toEqual([]);
    expect(responseErrors('GET', '/api/v1/workflows/', 200, [workflow(), workflow(1)])).toEqual([]);
  });
});
