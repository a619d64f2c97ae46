// The service client against undici's MockAgent: the exact request of every operation, validation that sends
// nothing, every error class, retries and the create-after-ambiguous-failure recovery. A few tests at the end
// use a real HTTP server on 127.0.0.1 for what a mock cannot show (the keep-alive pool, real timeouts, real
// connection refusals).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MockAgent, errors as undiciErrors } from 'undici';
import type { MockCallHistoryLog } from 'undici';
import { ServiceClient } from '../../src/service/client.js';
import type { ServiceClientOptions } from '../../src/service/client.js';
import { ServiceError } from '../../src/service/errors.js';
import { SOURCE_TYPES } from '../../src/service/models.js';
import type { SourceType } from '../../src/service/models.js';
import { ValidationError } from '../../src/errors.js';
import { requiredFields, typedConfigs, validConfigs } from '../fixtures/source-configs.js';

const ORIGIN = 'https://platform.example.com';
const API_KEY = 'sk-test-0123456789abcdef';
const SOURCE_ID = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
const OTHER_SOURCE_ID = '9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d';
const WORKFLOW_ID = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const DESTINATION_ID = '6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b';
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;
const JSON_HEADERS = { 'content-type': 'application/json' };

const dropboxConfig = typedConfigs.dropbox;

function sourceInfo(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: SOURCE_ID,
    name: 'dropbox-data',
    type: 'dropbox',
    config: { remote_url: 'dropbox://data', recursive: false },
    created_at: '2025-06-01T10:00:00Z',
    updated_at: null,
    ...over,
  };
}

function workflowInfo(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: WORKFLOW_ID,
    name: 'docs-sync',
    sources: [SOURCE_ID],
    destinations: [DESTINATION_ID],
    workflow_type: 'custom',
    workflow_nodes: [],
    schedule: { crontab_entries: [{ cron_expression: '0 0 * * *' }] },
    status: 'active',
    created_at: '2025-06-01T10:00:00Z',
    updated_at: null,
    reprocess_all: false,
    ...over,
  };
}

interface Harness {
  agent: MockAgent;
  pool: ReturnType<MockAgent['get']>;
  client: ServiceClient;
  delays: number[];
  calls: () => MockCallHistoryLog[];
}

const agents: MockAgent[] = [];

function harness(options: Partial<ServiceClientOptions> = {}): Harness {
  const agent = new MockAgent({ enableCallHistory: true });
  agent.disableNetConnect();
  agents.push(agent);
  const delays: number[] = [];
  const client = new ServiceClient({
    baseUrl: ORIGIN,
    apiKey: API_KEY,
    dispatcher: agent,
    sleep: (ms) => {
      delays.push(ms);
      return Promise.resolve();
    },
    ...options,
  });
  return { agent, pool: agent.get(ORIGIN), client, delays, calls: () => agent.getCallHistory()?.calls() ?? [] };
}

afterEach(async () => {
  vi.restoreAllMocks();
  vi.useRealTimers();
  for (const agent of agents.splice(0)) await agent.close();
});

function headersFor(body: boolean, keyHeader = 'service-api-key'): Record<string, string> {
  return {
    [keyHeader]: API_KEY,
    accept: 'application/json',
    'user-agent': `syncauth/${VERSION}`,
    ...(body ? { 'content-type': 'application/json' } : {}),
  };
}

interface ExpectedRequest {
  method: string;
  path: string;
  query?: Record<string, string>;
  body?: unknown;
  keyHeader?: string;
}

function expectRequest(call: MockCallHistoryLog | undefined, expected: ExpectedRequest): void {
  expect(call).toBeDefined();
  const c = call as MockCallHistoryLog;
  expect(c.origin).toBe(ORIGIN);
  expect(c.method).toBe(expected.method);
  expect(c.path).toBe(expected.path);
  expect(c.searchParams).toEqual(expected.query ?? {});
  expect(c.headers).toEqual(headersFor(expected.body !== undefined, expected.keyHeader));
  if (expected.body === undefined) expect(c.body).toBeUndefined();
  // toStrictEqual on the parsed body: a field sent as null differs from a field left out.
  else expect(JSON.parse(String(c.body))).toStrictEqual(expected.body);
}

async function caught(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail, and it succeeded');
}

async function serviceError(promise: Promise<unknown>): Promise<ServiceError> {
  const err = await caught(promise);
  expect(err).toBeInstanceOf(ServiceError);
  return err as ServiceError;
}

async function validationError(promise: Promise<unknown>): Promise<ValidationError> {
  const err = await caught(promise);
  expect(err).toBeInstanceOf(ValidationError);
  const v = err as ValidationError;
  expect(v.exitCode).toBe(2);
  return v;
}

function connectionRefused(): Error {
  return Object.assign(new Error('connect ECONNREFUSED 203.0.113.7:443'), { code: 'ECONNREFUSED' });
}

describe('the exact request of every operation', () => {
  it('createSource POSTs {name, type, config} to /api/v1/sources/ and returns the connector', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'POST' }).reply(200, sourceInfo(), { headers: JSON_HEADERS });
    const created = await h.client.createSource({ name: 'dropbox-data', type: 'dropbox', config: dropboxConfig });
    expect(created).toEqual(sourceInfo());
    expect(h.calls()).toHaveLength(1);
    expectRequest(h.calls()[0], {
      method: 'POST', path: '/api/v1/sources/', body: { name: 'dropbox-data', type: 'dropbox', config: dropboxConfig },
    });
  });

  it('getSource GETs /api/v1/sources/{id} without a body', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'GET' }).reply(200, sourceInfo());
    expect(await h.client.getSource(SOURCE_ID)).toEqual(sourceInfo());
    expectRequest(h.calls()[0], { method: 'GET', path: `/api/v1/sources/${SOURCE_ID}` });
  });

  it('listSources GETs the collection, with ?source_type= only when filtering', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, [sourceInfo()]);
    h.pool.intercept({ path: '/api/v1/sources/?source_type=kafka-cloud', method: 'GET' }).reply(200, []);
    expect(await h.client.listSources()).toEqual([sourceInfo()]);
    expect(await h.client.listSources({ sourceType: 'kafka-cloud' })).toEqual([]);
    expectRequest(h.calls()[0], { method: 'GET', path: '/api/v1/sources/' });
    expectRequest(h.calls()[1], { method: 'GET', path: '/api/v1/sources/', query: { source_type: 'kafka-cloud' } });
  });

  it('findSourceByName lists by type and picks the exact name, newest first', async () => {
    const h = harness();
    const older = sourceInfo({ id: OTHER_SOURCE_ID, created_at: '2025-01-01T00:00:00Z' });
    const newer = sourceInfo({ created_at: '2025-06-01T10:00:00Z' });
    const lookalike = sourceInfo({ id: '5f0c8a1e-6c1b-4e0a-9a43-1d2b3c4d5e6f', name: 'dropbox-data-2' });
    h.pool.intercept({ path: '/api/v1/sources/?source_type=dropbox', method: 'GET' })
      .reply(200, [older, lookalike, newer]).times(2);
    expect(await h.client.findSourceByName('dropbox-data', 'dropbox')).toEqual(newer);
    expect(await h.client.findSourceByName('nothing-like-it', 'dropbox')).toBeUndefined();
    expectRequest(h.calls()[0], { method: 'GET', path: '/api/v1/sources/', query: { source_type: 'dropbox' } });
  });

  it('findSourceByName without a type lists everything and matches the name alone', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' })
      .reply(200, [sourceInfo({ name: 's3-reports', type: 's3' }), sourceInfo()]);
    expect(await h.client.findSourceByName('s3-reports')).toMatchObject({ type: 's3' });
    expectRequest(h.calls()[0], { method: 'GET', path: '/api/v1/sources/' });
  });

  it('updateSource PUTs {config} and nothing else', async () => {
    const h = harness();
    const config = { ...dropboxConfig, token: 'sl.fake-fresh-access-token' };
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'PUT' }).reply(200, sourceInfo()).times(2);
    await h.client.updateSource(SOURCE_ID, config, 'dropbox');
    await h.client.updateSourceUntyped(SOURCE_ID, { anything: 'the caller did not name a type' });
    expectRequest(h.calls()[0], { method: 'PUT', path: `/api/v1/sources/${SOURCE_ID}`, body: { config } });
    expectRequest(h.calls()[1], {
      method: 'PUT', path: `/api/v1/sources/${SOURCE_ID}`, body: { config: { anything: 'the caller did not name a type' } },
    });
  });

  it('deleteSource DELETEs the connector and accepts any JSON or an empty body', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'DELETE' }).reply(200, {});
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'DELETE' }).reply(204, '');
    await expect(h.client.deleteSource(SOURCE_ID)).resolves.toBeUndefined();
    await expect(h.client.deleteSource(SOURCE_ID)).resolves.toBeUndefined();
    expectRequest(h.calls()[0], { method: 'DELETE', path: `/api/v1/sources/${SOURCE_ID}` });
  });

  it('createWorkflow POSTs the request as given', async () => {
    const h = harness();
    const request = {
      name: 'docs-sync', workflow_type: 'custom' as const, source_id: SOURCE_ID, destination_id: null,
      workflow_nodes: [{ name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: { model: 'x' } }],
      schedule: 'daily' as const,
    };
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'POST' }).reply(200, workflowInfo());
    expect(await h.client.createWorkflow(request)).toEqual(workflowInfo());
    expectRequest(h.calls()[0], { method: 'POST', path: '/api/v1/workflows/', body: request });
  });

  it('getWorkflow GETs /api/v1/workflows/{id}', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'GET' }).reply(200, workflowInfo());
    expect(await h.client.getWorkflow(WORKFLOW_ID)).toEqual(workflowInfo());
    expectRequest(h.calls()[0], { method: 'GET', path: `/api/v1/workflows/${WORKFLOW_ID}` });
  });

  it('listWorkflows GETs the collection once when the first page is not full', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'GET' }).reply(200, [workflowInfo()]);
    expect(await h.client.listWorkflows()).toEqual([workflowInfo()]);
    expect(h.calls()).toHaveLength(1);
    expectRequest(h.calls()[0], { method: 'GET', path: '/api/v1/workflows/' });
  });

  it('listWorkflows follows full pages with ?page=N until a short one', async () => {
    const h = harness();
    const page = (from: number, count: number): Record<string, unknown>[] =>
      Array.from({ length: count }, (_, i) => workflowInfo({
        id: `00000000-0000-4000-8000-${String(from + i).padStart(12, '0')}`, name: `wf-${from + i}`,
      }));
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'GET' }).reply(200, page(0, 20));
    h.pool.intercept({ path: '/api/v1/workflows/?page=2', method: 'GET' }).reply(200, page(20, 20));
    h.pool.intercept({ path: '/api/v1/workflows/?page=3', method: 'GET' }).reply(200, page(40, 3));
    const all = await h.client.listWorkflows();
    expect(all.map((w) => w.name)).toEqual(Array.from({ length: 43 }, (_, i) => `wf-${i}`));
    expect(h.calls().map((c) => c.searchParams)).toEqual([{}, { page: '2' }, { page: '3' }]);
  });

  it('listWorkflows stops when the service ignores ?page and repeats itself', async () => {
    const h = harness();
    const everything = Array.from({ length: 25 }, (_, i) => workflowInfo({
      id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    }));
    h.pool.intercept({ path: (p) => p.startsWith('/api/v1/workflows/'), method: 'GET' }).reply(200, everything).persist();
    expect(await h.client.listWorkflows()).toHaveLength(25);
    expect(h.calls()).toHaveLength(2);
  });

  it('findWorkflowByName sends the name filter and keeps only exact matches', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/workflows/?name=docs-sync', method: 'GET' })
      .reply(200, [workflowInfo({ id: '7d444840-9dc0-41c2-b1d0-e3c4b5e0b6a1', name: 'docs-sync-old' }), workflowInfo()]);
    expect(await h.client.findWorkflowByName('docs-sync')).toEqual(workflowInfo());
    expectRequest(h.calls()[0], { method: 'GET', path: '/api/v1/workflows/', query: { name: 'docs-sync' } });
  });

  it('updateWorkflow PUTs the update as given', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'PUT' }).reply(200, workflowInfo());
    const update = { source_id: SOURCE_ID, schedule: 'every 4 hours' as const, reprocess_all: true };
    expect(await h.client.updateWorkflow(WORKFLOW_ID, update)).toEqual(workflowInfo());
    expectRequest(h.calls()[0], { method: 'PUT', path: `/api/v1/workflows/${WORKFLOW_ID}`, body: update });
  });
});

describe('workflow update bodies: absent stays absent, null stays null', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['only the field given', { source_id: SOURCE_ID }, `{"source_id":"${SOURCE_ID}"}`],
    ['null sent as null', { schedule: null }, '{"schedule":null}'],
    ['null next to a value', { schedule: null, name: 'renamed' }, '{"schedule":null,"name":"renamed"}'],
    ['an undefined property is absent', { name: 'renamed', schedule: undefined }, '{"name":"renamed"}'],
    ['an empty update is an empty object', {}, '{}'],
    [
      'every field, some null',
      {
        name: null, source_id: SOURCE_ID, destination_id: null, workflow_type: 'custom', workflow_nodes: null,
        schedule: 'every 15 minutes', reprocess_all: false,
      },
      `{"name":null,"source_id":"${SOURCE_ID}","destination_id":null,"workflow_type":"custom",` +
        '"workflow_nodes":null,"schedule":"every 15 minutes","reprocess_all":false}',
    ],
  ];
  it.each(cases)('%s', async (_name, update, raw) => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'PUT' }).reply(200, workflowInfo());
    await h.client.updateWorkflow(WORKFLOW_ID, update);
    expect(h.calls()[0]?.body).toBe(raw);
  });
});

describe('client options', () => {
  it('sends the API key under the configured header name', async () => {
    const h = harness({ apiKeyHeader: 'unstructured-api-key' });
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'GET' }).reply(200, sourceInfo());
    await h.client.getSource(SOURCE_ID);
    expectRequest(h.calls()[0], { method: 'GET', path: `/api/v1/sources/${SOURCE_ID}`, keyHeader: 'unstructured-api-key' });
    expect(h.calls()[0]?.headers).not.toHaveProperty('service-api-key');
  });

  it('uses a given user agent instead of syncauth/<version>', async () => {
    const h = harness({ userAgent: 'my-tool/2.0' });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, []);
    await h.client.listSources();
    expect(h.calls()[0]?.headers).toMatchObject({ 'user-agent': 'my-tool/2.0' });
  });

  it.each([
    ['https://platform.example.com/', ''],
    ['https://platform.example.com/api/v1', ''],
    ['https://platform.example.com/api/v1/', ''],
    ['https://platform.example.com/ingest', '/ingest'],
    ['https://platform.example.com/ingest/api/v1//', '/ingest'],
  ])('base URL %s puts paths under "%s/api/v1/"', async (baseUrl, prefix) => {
    const h = harness({ baseUrl });
    h.pool.intercept({ path: `${prefix}/api/v1/sources/`, method: 'GET' }).reply(200, []);
    await h.client.listSources();
    expect(h.calls()[0]?.path).toBe(`${prefix}/api/v1/sources/`);
  });

  it.each([
    [{ baseUrl: 'platform.example.com' }, 'baseUrl'],
    [{ baseUrl: 'ftp://platform.example.com' }, 'baseUrl'],
    [{ baseUrl: 'https://user:pw@platform.example.com' }, 'baseUrl'],
    [{ baseUrl: 'https://platform.example.com/?x=1' }, 'baseUrl'],
    [{ apiKey: '' }, 'apiKey'],
    [{ apiKey: 'sk-with\nnewline' }, 'apiKey'],
    [{ apiKeyHeader: 'bad header' }, 'apiKeyHeader'],
    [{ retry: { retries: -1 } }, 'retry.retries'],
    [{ timeouts: { headersMs: Number.NaN } }, 'timeouts.headersMs'],
  ])('refuses options %j naming %s', (bad, field) => {
    let thrown: unknown;
    try {
      harness(bad as Partial<ServiceClientOptions>);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect((thrown as ValidationError).issues.map((i) => i.field)).toEqual([field]);
    expect((thrown as ValidationError).message).not.toContain('newline');
  });
});

describe('validation refuses before anything is sent', () => {
  // MockAgent records even the requests no interceptor matched, so an empty history means nothing was sent.
  const cases: [string, (c: ServiceClient) => Promise<unknown>, string[]][] = [
    ['getSource with a non-uuid id', (c) => c.getSource('not-a-uuid'), ['source_id']],
    ['deleteSource with a non-uuid id', (c) => c.deleteSource('123'), ['source_id']],
    ['updateSource with a non-uuid id', (c) => c.updateSourceUntyped('../workflows', { remote_url: 'dropbox://x' }), ['source_id']],
    ['updateSource with a config that is not an object', (c) => c.updateSourceUntyped(SOURCE_ID, [] as unknown as Record<string, unknown>), ['config']],
    ['updateSource with a bad config for its type', (c) => c.updateSourceUntyped(SOURCE_ID, { ...dropboxConfig, remote_url: undefined }, 'dropbox'), ['config.remote_url']],
    ['getWorkflow with a non-uuid id', (c) => c.getWorkflow(''), ['workflow_id']],
    ['updateWorkflow with a non-uuid id', (c) => c.updateWorkflow('wf-1', {}), ['workflow_id']],
    ['createSource with an empty name', (c) => c.createSource({ name: ' ', type: 'dropbox', config: dropboxConfig }), ['name']],
    ['createSource with an unknown type', (c) => c.createSourceUntyped({ name: 'x', type: 'dropbox2', config: {} }), ['type']],
    ['createSource with a config that is not an object', (c) => c.createSourceUntyped({ name: 'x', type: 'dropbox', config: null as unknown as Record<string, unknown> }), ['config']],
    ['createSource with an unknown config field', (c) => c.createSourceUntyped({ name: 'x', type: 'dropbox', config: { ...dropboxConfig, remote_path: 'x' } }), ['config.remote_path']],
    ['createSource with several problems', (c) => c.createSourceUntyped({ name: '', type: 'nope', config: {} }), ['name', 'type']],
    ['listSources with an unknown type', (c) => c.listSources({ sourceType: 'ftp' }), ['source_type']],
    ['findSourceByName with an empty name', (c) => c.findSourceByName(''), ['name']],
    ['createWorkflow without workflow_type', (c) => c.createWorkflow({ name: 'wf' } as never), ['workflow_type']],
    ['createWorkflow with an empty name', (c) => c.createWorkflow({ name: '', workflow_type: 'basic' }), ['name']],
    ['createWorkflow with a bad source_id', (c) => c.createWorkflow({ name: 'wf', workflow_type: 'basic', source_id: 'x' }), ['source_id']],
    ['updateWorkflow with an unknown field', (c) => c.updateWorkflow(WORKFLOW_ID, { sources: [SOURCE_ID] } as never), ['sources']],
    ['updateWorkflow with an unknown node field', (c) => c.updateWorkflow(WORKFLOW_ID, { workflow_nodes: [{ name: 'n', type: 't', subtype: 's', extra: 1 }] } as never), ['workflow_nodes[0].extra']],
    ['updateWorkflow with an unknown schedule', (c) => c.updateWorkflow(WORKFLOW_ID, { schedule: 'hourly' } as never), ['schedule']],
    ['updateWorkflow with a bad destination_id', (c) => c.updateWorkflow(WORKFLOW_ID, { destination_id: 'd' }), ['destination_id']],
    ['updateWorkflow with a bad id and a bad field', (c) => c.updateWorkflow('x', { reprocess_all: 'yes' } as never), ['workflow_id', 'reprocess_all']],
  ];
  it.each(cases)('%s', async (_name, call, fields) => {
    const h = harness();
    const err = await validationError(call(h.client));
    expect(err.issues.map((i) => i.field)).toEqual(fields);
    expect(h.calls()).toHaveLength(0);
  });

  it('names the uuid problem in words a user can act on', async () => {
    const h = harness();
    const err = await validationError(h.client.getWorkflow('wf-1'));
    expect(err.message).toBe('workflow_id: must be a UUID, like 3fa85f64-5717-4562-b3fc-2c963f66afa6');
  });

  it('never echoes a secret of a refused config', async () => {
    const h = harness();
    const err = await validationError(h.client.createSourceUntyped({
      name: 'x', type: 'dropbox', config: { ...dropboxConfig, remote_url: 42 },
    }));
    for (const secret of ['sl.fake-short-lived-access-token', 'fake-dropbox-refresh-token', 'fake-dropbox-app-secret']) {
      expect(err.message).not.toContain(secret);
    }
  });
});

describe('every source type: valid configs go out unchanged, missing required fields never leave', () => {
  it.each([...SOURCE_TYPES])('%s: the valid config is the body sent, deep-equal', async (type) => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'POST' })
      .reply(200, sourceInfo({ name: `my-${type}`, type, config: validConfigs[type] }));
    const created = await h.client.createSourceUntyped({ name: `my-${type}`, type, config: validConfigs[type] });
    expect(created.type).toBe(type);
    const sent = JSON.parse(String(h.calls()[0]?.body)) as { config: unknown };
    expect(sent).toStrictEqual({ name: `my-${type}`, type, config: validConfigs[type] });
    expect(h.calls()[0]?.body).toBe(JSON.stringify({ name: `my-${type}`, type, config: validConfigs[type] }));
  });

  const missing: [SourceType, string][] = SOURCE_TYPES.flatMap((type) => requiredFields[type].map((f) => [type, f] as [SourceType, string]));
  it('covers every type with at least one required field', () => {
    expect(new Set(missing.map(([type]) => type))).toEqual(new Set(SOURCE_TYPES));
  });
  it.each(missing)('%s without %s is refused before any request, naming config.<field>', async (type, field) => {
    const h = harness();
    const config = { ...validConfigs[type] };
    delete config[field];
    const err = await validationError(h.client.createSourceUntyped({ name: `my-${type}`, type, config }));
    expect(err.issues.map((i) => i.field)).toContain(`config.${field}`);
    expect(h.calls()).toHaveLength(0);
    const update = await validationError(h.client.updateSourceUntyped(SOURCE_ID, config, type));
    expect(update.issues.map((i) => i.field)).toContain(`config.${field}`);
    expect(h.calls()).toHaveLength(0);
  });
});

describe('responses', () => {
  it('keeps fields a newer service adds', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'GET' })
      .reply(200, workflowInfo({ template_id: 'tpl-1', job_count: 3 }));
    expect(await h.client.getWorkflow(WORKFLOW_ID)).toMatchObject({ template_id: 'tpl-1', job_count: 3 });
  });

  it('a missing required field is SERVICE_BAD_RESPONSE, naming the field, and is not retried', async () => {
    const h = harness();
    const { created_at: _dropped, ...withoutCreatedAt } = sourceInfo();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'GET' }).reply(200, withoutCreatedAt).persist();
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err.code).toBe('SERVICE_BAD_RESPONSE');
    expect(err.message).toMatch(/^the service's answer to GET \/api\/v1\/sources\/\{source_id\} lacks what this client needs: response\.created_at: /);
    expect(h.calls()).toHaveLength(1);
  });

  it('a list item without its id is SERVICE_BAD_RESPONSE naming the item', async () => {
    const h = harness();
    const { id: _dropped, ...withoutId } = sourceInfo();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, [sourceInfo(), withoutId]);
    const err = await serviceError(h.client.listSources());
    expect(err.code).toBe('SERVICE_BAD_RESPONSE');
    expect(err.message).toContain('response[1].id: ');
  });

  it('a list that is not a bare array is SERVICE_BAD_RESPONSE', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'GET' }).reply(200, { items: [workflowInfo()] });
    expect((await serviceError(h.client.listWorkflows())).code).toBe('SERVICE_BAD_RESPONSE');
  });

  it('an HTML page instead of JSON is SERVICE_BAD_RESPONSE pointing at the base URL', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' })
      .reply(200, '<html>login</html>', { headers: { 'content-type': 'text/html' } });
    const err = await serviceError(h.client.listSources());
    expect(err.code).toBe('SERVICE_BAD_RESPONSE');
    expect(err.message).toBe("the service's answer to GET /api/v1/sources/ was not JSON (content-type text/html)");
    expect(err.hint).toContain('SYNCAUTH_BASE_URL');
  });
});

describe('errors: one class, a stable code, a message that says what happened', () => {
  interface ErrorCase {
    name: string;
    status: number;
    body: unknown;
    headers?: Record<string, string>;
    call: (c: ServiceClient) => Promise<unknown>;
    route: { path: string; method: string };
    code: string;
    message: string;
    exitCode: number;
    extra?: Partial<Pick<ServiceError, 'issues' | 'retryAfterMs' | 'unsupported' | 'detail'>>;
  }
  const getSource = { path: `/api/v1/sources/${SOURCE_ID}`, method: 'GET' };
  const createSource = { path: '/api/v1/sources/', method: 'POST' };
  const createDropbox = (c: ServiceClient): Promise<unknown> =>
    c.createSource({ name: 'dropbox-data', type: 'dropbox', config: dropboxConfig });
  const cases: ErrorCase[] = [
    {
      name: '401', status: 401, body: { detail: 'API key is malformed, please type the API key correctly in the header.' },
      call: (c) => c.getSource(SOURCE_ID), route: getSource, code: 'SERVICE_UNAUTHORIZED', exitCode: 4,
      message: 'API key missing, malformed or not valid for this workspace',
      extra: { detail: 'API key is malformed, please type the API key correctly in the header.' },
    },
    {
      name: '403', status: 403, body: { detail: 'Forbidden' }, call: (c) => c.getSource(SOURCE_ID), route: getSource,
      code: 'SERVICE_FORBIDDEN', exitCode: 1,
      message: `the service does not allow this API key to get source connector ${SOURCE_ID}: Forbidden`,
    },
    {
      name: '404 on a source', status: 404, body: { detail: 'Source connector not found' },
      call: (c) => c.getSource(SOURCE_ID), route: getSource, code: 'SERVICE_NOT_FOUND', exitCode: 1,
      message: `source connector ${SOURCE_ID} not found in this workspace`, extra: { unsupported: false },
    },
    {
      name: '404 on a workflow', status: 404, body: { detail: 'Workflow not found' },
      call: (c) => c.updateWorkflow(WORKFLOW_ID, { schedule: 'daily' }),
      route: { path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'PUT' }, code: 'SERVICE_NOT_FOUND', exitCode: 1,
      message: `workflow ${WORKFLOW_ID} not found in this workspace`,
    },
    {
      name: '404 Not Found: the deployment lacks the route', status: 404, body: { detail: 'Not Found' },
      call: (c) => c.updateSource(SOURCE_ID, dropboxConfig, 'dropbox'),
      route: { path: `/api/v1/sources/${SOURCE_ID}`, method: 'PUT' }, code: 'SERVICE_NOT_FOUND', exitCode: 1,
      message: 'this deployment of the service has no PUT /api/v1/sources/{source_id} route (404 Not Found), ' +
        `so it cannot update source connector ${SOURCE_ID}`,
      extra: { unsupported: true },
    },
    {
      name: '405', status: 405, body: { detail: 'Method Not Allowed' }, call: (c) => c.listSources(),
      route: { path: '/api/v1/sources/', method: 'GET' }, code: 'SERVICE_METHOD_NOT_ALLOWED', exitCode: 1,
      message: 'this deployment of the service does not offer GET /api/v1/sources/ (405 Method Not Allowed), ' +
        'so it cannot list source connectors',
      extra: { unsupported: true },
    },
    {
      name: '409', status: 409, body: { detail: 'a connector named dropbox-data exists' }, call: createDropbox,
      route: createSource, code: 'SERVICE_CONFLICT', exitCode: 1,
      message: 'the service could not create the dropbox source connector "dropbox-data" because of a conflict: ' +
        'a connector named dropbox-data exists',
    },
    {
      name: '412 on create', status: 412, body: { detail: 'bootstrap_server is required' },
      call: (c) => c.createSource({ name: 'k', type: 'kafka-cloud', config: typedConfigs['kafka-cloud'] }),
      route: createSource, code: 'SERVICE_CONFIG_REFUSED', exitCode: 2,
      message: 'the service refused the kafka-cloud config: bootstrap_server is required',
    },
    {
      name: '412 on an update of a known type', status: 412, body: { detail: 'bad folder' },
      call: (c) => c.updateSource(SOURCE_ID, dropboxConfig, 'dropbox'),
      route: { path: `/api/v1/sources/${SOURCE_ID}`, method: 'PUT' }, code: 'SERVICE_CONFIG_REFUSED', exitCode: 2,
      message: 'the service refused the dropbox config: bad folder',
    },
    {
      name: '412 on an update of an unknown type', status: 412, body: { detail: 'bad folder' },
      call: (c) => c.updateSourceUntyped(SOURCE_ID, dropboxConfig),
      route: { path: `/api/v1/sources/${SOURCE_ID}`, method: 'PUT' }, code: 'SERVICE_CONFIG_REFUSED', exitCode: 2,
      message: 'the service refused the source connector config: bad folder',
    },
    {
      name: '422 rendered per field', status: 422,
      body: { detail: [
        { loc: ['body', 'config', 'remote_url'], msg: "String should match pattern '^dropbox://'", type: 'string_pattern_mismatch' },
      ] },
      call: createDropbox, route: createSource, code: 'SERVICE_INVALID_REQUEST', exitCode: 2,
      message: 'the service refused the request to create the dropbox source connector "dropbox-data": ' +
        "config.remote_url: String should match pattern '^dropbox://'",
      extra: { issues: [{ field: 'config.remote_url', message: "String should match pattern '^dropbox://'" }] },
    },
    {
      name: '422 with several fields, path and query locations', status: 422,
      body: { detail: [
        { loc: ['path', 'workflow_id'], msg: 'Input should be a valid UUID', type: 'uuid_parsing' },
        { loc: ['body', 'workflow_nodes', 0, 'subtype'], msg: 'Field required', type: 'missing' },
        { loc: ['body'], msg: 'Input should be an object', type: 'model_type' },
      ] },
      call: (c) => c.updateWorkflow(WORKFLOW_ID, { reprocess_all: true }),
      route: { path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'PUT' }, code: 'SERVICE_INVALID_REQUEST', exitCode: 2,
      message: `the service refused the request to update workflow ${WORKFLOW_ID}:` +
        '\n  - workflow_id: Input should be a valid UUID\n  - workflow_nodes[0].subtype: Field required\n  - Input should be an object',
      extra: { issues: [
        { field: 'workflow_id', message: 'Input should be a valid UUID' },
        { field: 'workflow_nodes[0].subtype', message: 'Field required' },
        { field: '', message: 'Input should be an object' },
      ] },
    },
    {
      name: '422 with a string detail', status: 422, body: { detail: 'workflow is running' },
      call: (c) => c.updateWorkflow(WORKFLOW_ID, {}),
      route: { path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'PUT' }, code: 'SERVICE_INVALID_REQUEST', exitCode: 2,
      message: `the service refused the request to update workflow ${WORKFLOW_ID}: workflow is running`,
    },
    {
      name: '400', status: 400, body: { detail: 'bad' }, call: (c) => c.getSource(SOURCE_ID), route: getSource,
      code: 'SERVICE_BAD_REQUEST', exitCode: 2,
      message: `the service refused the request to get source connector ${SOURCE_ID} (400): bad`,
    },
    {
      name: '410, a status with no class of its own', status: 410, body: 'gone for good',
      call: (c) => c.getSource(SOURCE_ID), route: getSource, code: 'SERVICE_HTTP_ERROR', exitCode: 1,
      message: `the service answered 410 to GET /api/v1/sources/${SOURCE_ID}: gone for good`,
    },
  ];

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const h = harness();
    h.pool.intercept(c.route).reply(c.status, c.body as object, { headers: { ...JSON_HEADERS, ...c.headers } });
    const err = await serviceError(c.call(h.client));
    expect(err.code).toBe(c.code);
    expect(err.status).toBe(c.status);
    expect(err.message).toBe(c.message);
    expect(err.exitCode).toBe(c.exitCode);
    if (c.extra) expect(err).toMatchObject(c.extra);
    // None of these is retried: one request each.
    expect(h.calls()).toHaveLength(1);
    expect(h.delays).toEqual([]);
  });

  it('401 says where the key and its header name come from', async () => {
    const h = harness({ apiKeyHeader: 'unstructured-api-key' });
    h.pool.intercept(getSourceRoute()).reply(401, { detail: 'API key is missing, please provide an API key in the header.' });
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err.hint).toBe('check SYNCAUTH_API_KEY and the header name SYNCAUTH_API_KEY_HEADER (now "unstructured-api-key")');
  });

  it('500 on create is the service refusing the config, once it is sure nothing was created', async () => {
    const h = harness({ retry: { retries: 0 } });
    h.pool.intercept(createSource).reply(500, { detail: 'Invalid Confluence credentials' });
    h.pool.intercept({ path: '/api/v1/sources/?source_type=confluence', method: 'GET' }).reply(200, []);
    const err = await serviceError(h.client.createSource({ name: 'wiki', type: 'confluence', config: typedConfigs.confluence }));
    expect(err.code).toBe('SERVICE_CONFIG_REFUSED');
    expect(err.status).toBe(500);
    expect(err.message).toBe('the service refused the confluence config: Invalid Confluence credentials');
  });

  it('429 carries the wait the service asked for', async () => {
    const h = harness({ retry: { retries: 0 } });
    h.pool.intercept(getSource).reply(429, { detail: 'Too Many Requests' }, { headers: { 'retry-after': '12' } });
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err).toMatchObject({ code: 'SERVICE_RATE_LIMITED', status: 429, retryAfterMs: 12_000 });
    expect(err.message).toBe('the service is rate-limiting this API key (429 Too Many Requests); it asked to wait 12 s');
  });

  it('5xx is SERVICE_UNAVAILABLE once the retries are spent', async () => {
    const h = harness({ retry: { retries: 0 } });
    h.pool.intercept(getSource).reply(503, 'upstream connect error', { headers: { 'content-type': 'text/plain' } });
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, detail: 'upstream connect error' });
    expect(err.message).toBe(`the service could not get source connector ${SOURCE_ID} (503): upstream connect error`);
  });

  it('a failed connection is SERVICE_NETWORK with the cause kept', async () => {
    const h = harness({ retry: { retries: 0 } });
    const cause = connectionRefused();
    h.pool.intercept(getSource).replyWithError(cause);
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err.code).toBe('SERVICE_NETWORK');
    expect(err.status).toBeUndefined();
    expect(err.message).toBe(`GET /api/v1/sources/${SOURCE_ID}: ${ORIGIN} refused the connection`);
    expect(err.cause).toBe(cause);
  });

  it('a redirect is not followed (the key must not travel elsewhere) and points at the right base URL', async () => {
    const h = harness();
    h.pool.intercept(getSource).reply(308, '', { headers: { location: 'https://api.example.net/api/v1/sources/x' } });
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err.code).toBe('SERVICE_BAD_RESPONSE');
    expect(err.hint).toBe('set SYNCAUTH_BASE_URL to the address the service redirects to (https://api.example.net)');
    expect(h.calls()).toHaveLength(1);
  });

  it('keeps the raw body off the enumerable properties, so a logger never prints it', async () => {
    const h = harness();
    const body = { detail: 'conflict', echoed: { app_secret: 'fake-dropbox-app-secret' } };
    h.pool.intercept(createSource).reply(409, body);
    const err = await serviceError(createDropbox(h.client));
    expect(err.body).toEqual(body);
    expect(Object.keys(err)).not.toContain('body');
    expect(JSON.stringify(err)).not.toContain('fake-dropbox-app-secret');
    expect(Object.getOwnPropertyDescriptor(err, 'body')?.enumerable).toBe(false);
  });

  it('masks the API key and config secrets the service echoes back', async () => {
    const h = harness();
    h.pool.intercept(createSource).reply(412, {
      detail: `token fake-dropbox-refresh-token rejected for key ${API_KEY} (app fake-dropbox-app-secret)`,
    });
    const err = await serviceError(createDropbox(h.client));
    expect(err.message).toBe('the service refused the dropbox config: token [redacted] rejected for key [redacted] (app [redacted])');
    expect(err.detail).not.toContain('fake-');
  });

  it('masks secrets echoed in 422 messages and credentials inside URLs', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'POST' }).reply(422, { detail: [
      { loc: ['body', 'config', 'uri'], msg: 'cannot reach mongodb+srv://ingest:hunter22@db.example.net', type: 'value_error' },
      { loc: ['body', 'config', 'uri'], msg: 'Value error, bad uri fake-mongo-password', type: 'value_error', input: 'x' },
    ] });
    const err = await serviceError(h.client.createSource({ name: 'm', type: 'mongodb', config: typedConfigs.mongodb }));
    expect(err.issues).toEqual([
      { field: 'config.uri', message: 'cannot reach mongodb+srv://[redacted]@db.example.net' },
      { field: 'config.uri', message: 'Value error, bad uri [redacted]' },
    ]);
    expect(err.message).not.toMatch(/hunter22|fake-mongo-password/);
  });

  function getSourceRoute(): { path: string; method: string } {
    return getSource;
  }
});

describe('retries of GET, PUT and DELETE', () => {
  it('retries 5xx with capped exponential backoff and full jitter, at most `retries` times', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const h = harness({ retry: { retries: 4, baseDelayMs: 500, maxDelayMs: 3000 } });
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'GET' }).reply(503, { detail: 'busy' }).times(5);
    const err = await serviceError(h.client.getSource(SOURCE_ID));
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(h.calls()).toHaveLength(5);
    // random 0.5 of min(3000, 500 * 2^attempt): 500, 1000, 2000, then the 3000 cap.
    expect(h.delays).toEqual([250, 500, 1000, 1500]);
  });

  it('jitter spans the whole window: random 0 waits nothing, random near 1 waits the window', async () => {
    const random = vi.spyOn(Math, 'random').mockReturnValueOnce(0).mockReturnValueOnce(0.9999);
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(502, '').times(2);
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, []);
    expect(await h.client.listSources()).toEqual([]);
    expect(h.delays).toEqual([0, 999]);
    expect(random).toHaveBeenCalledTimes(2);
  });

  it.each([500, 502, 503, 504])('retries %i and succeeds', async (status) => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'GET' }).reply(status, { detail: 'x' });
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}`, method: 'GET' }).reply(200, workflowInfo());
    expect(await h.client.getWorkflow(WORKFLOW_ID)).toEqual(workflowInfo());
    expect(h.calls()).toHaveLength(2);
    expect(h.delays).toHaveLength(1);
  });

  it('honours Retry-After in seconds on 429', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(429, { detail: 'slow down' }, { headers: { 'retry-after': '7' } });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, []);
    await h.client.listSources();
    expect(h.delays).toEqual([7000]);
  });

  it('honours Retry-After as an HTTP date', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2025-06-01T10:00:00Z'));
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' })
      .reply(429, {}, { headers: { 'retry-after': 'Sun, 01 Jun 2025 10:00:12 GMT' } });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, []);
    await h.client.listSources();
    expect(h.delays).toEqual([12_000]);
  });

  it('caps a long Retry-After at maxDelayMs', async () => {
    const h = harness({ retry: { maxDelayMs: 10_000 } });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(429, {}, { headers: { 'retry-after': '3600' } });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(503, {}, { headers: { 'retry-after': '20' } });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, []);
    await h.client.listSources();
    expect(h.delays).toEqual([10_000, 10_000]);
  });

  it('uses backoff when 429 comes without Retry-After', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0.5);
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(429, {});
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(200, []);
    await h.client.listSources();
    expect(h.delays).toEqual([250]);
  });

  it.each([400, 401, 403, 404, 405, 409, 412, 422])('never retries %i', async (status) => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'PUT' }).reply(status, { detail: 'no' }).persist();
    await serviceError(h.client.updateSource(SOURCE_ID, dropboxConfig, 'dropbox'));
    expect(h.calls()).toHaveLength(1);
    expect(h.delays).toEqual([]);
  });

  it('retries: 0 sends once', async () => {
    const h = harness({ retry: { retries: 0 } });
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' }).reply(503, {}).persist();
    await serviceError(h.client.listSources());
    expect(h.calls()).toHaveLength(1);
  });

  it.each([
    ['a refused connection', connectionRefused],
    ['a connect timeout', () => new undiciErrors.ConnectTimeoutError()],
    ['a reset socket', () => new undiciErrors.SocketError('other side closed')],
    ['a headers timeout', () => new undiciErrors.HeadersTimeoutError()],
    ['a body timeout', () => new undiciErrors.BodyTimeoutError()],
  ])('retries a PUT after %s', async (_name, failure) => {
    const h = harness();
    const path = `/api/v1/workflows/${WORKFLOW_ID}`;
    h.pool.intercept({ path, method: 'PUT' }).replyWithError(failure());
    h.pool.intercept({ path, method: 'PUT' }).reply(200, workflowInfo());
    await h.client.updateWorkflow(WORKFLOW_ID, { schedule: 'weekly' });
    expect(h.calls()).toHaveLength(2);
    expect(h.calls()[1]?.body).toBe('{"schedule":"weekly"}');
  });

  it('does not retry a network failure that will not heal (host not found)', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/sources/', method: 'GET' })
      .replyWithError(Object.assign(new Error('getaddrinfo ENOTFOUND platform.example.com'), { code: 'ENOTFOUND' }));
    const err = await serviceError(h.client.listSources());
    expect(err.message).toBe(`GET /api/v1/sources/: the host of ${ORIGIN} was not found`);
    expect(h.calls()).toHaveLength(1);
  });

  it('a DELETE whose first answer was lost and whose retry finds nothing has succeeded', async () => {
    const h = harness();
    const path = `/api/v1/sources/${SOURCE_ID}`;
    h.pool.intercept({ path, method: 'DELETE' }).replyWithError(new undiciErrors.SocketError('other side closed'));
    h.pool.intercept({ path, method: 'DELETE' }).reply(404, { detail: 'Source not found' });
    await expect(h.client.deleteSource(SOURCE_ID)).resolves.toBeUndefined();
    expect(h.calls()).toHaveLength(2);
  });

  it('a DELETE of a connector that never existed is still SERVICE_NOT_FOUND', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}`, method: 'DELETE' }).reply(404, { detail: 'Source not found' });
    expect((await serviceError(h.client.deleteSource(SOURCE_ID))).code).toBe('SERVICE_NOT_FOUND');
  });
});

describe('creates (POST) are never blindly repeated', () => {
  const create = { path: '/api/v1/sources/', method: 'POST' };
  const lookup = { path: '/api/v1/sources/?source_type=dropbox', method: 'GET' };
  const createDropbox = (c: ServiceClient): ReturnType<ServiceClient['createSource']> =>
    c.createSource({ name: 'dropbox-data', type: 'dropbox', config: dropboxConfig });
  const methods = (h: Harness): string[] => h.calls().map((c) => `${c.method} ${c.path}${Object.keys(c.searchParams).length ? '?' : ''}`);

  it('5xx → looks the connector up by name → found → returns it without a second POST', async () => {
    const h = harness();
    h.pool.intercept(create).reply(502, 'Bad Gateway');
    h.pool.intercept(lookup).reply(200, [sourceInfo({ name: 'someone-else' }), sourceInfo()]);
    expect(await createDropbox(h.client)).toEqual(sourceInfo());
    expect(methods(h)).toEqual(['POST /api/v1/sources/', 'GET /api/v1/sources/?']);
    expectRequest(h.calls()[1], { method: 'GET', path: '/api/v1/sources/', query: { source_type: 'dropbox' } });
    expect(h.delays).toHaveLength(1);
  });

  it('5xx → lookup finds nothing → sends the create once more', async () => {
    const h = harness();
    h.pool.intercept(create).reply(500, { detail: 'Internal Server Error' });
    h.pool.intercept(lookup).reply(200, []);
    h.pool.intercept(create).reply(200, sourceInfo());
    expect(await createDropbox(h.client)).toEqual(sourceInfo());
    expect(methods(h)).toEqual(['POST /api/v1/sources/', 'GET /api/v1/sources/?', 'POST /api/v1/sources/']);
    expect(h.calls()[2]?.body).toBe(h.calls()[0]?.body);
  });

  it.each([
    ['a headers timeout', () => new undiciErrors.HeadersTimeoutError()],
    ['a reset socket', () => new undiciErrors.SocketError('other side closed')],
    ['a body timeout', () => new undiciErrors.BodyTimeoutError()],
  ])('%s is ambiguous too: the lookup decides', async (_name, failure) => {
    const h = harness();
    h.pool.intercept(create).replyWithError(failure());
    h.pool.intercept(lookup).reply(200, [sourceInfo()]);
    expect(await createDropbox(h.client)).toEqual(sourceInfo());
    expect(methods(h)).toEqual(['POST /api/v1/sources/', 'GET /api/v1/sources/?']);
  });

  it('gives up after `retries` creates, having looked up after each', async () => {
    const h = harness({ retry: { retries: 1 } });
    h.pool.intercept(create).reply(503, { detail: 'busy' }).times(2);
    h.pool.intercept(lookup).reply(200, []).times(2);
    const err = await serviceError(createDropbox(h.client));
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(methods(h)).toEqual([
      'POST /api/v1/sources/', 'GET /api/v1/sources/?', 'POST /api/v1/sources/', 'GET /api/v1/sources/?',
    ]);
  });

  it('the last lookup still rescues a create whose answer was lost', async () => {
    const h = harness({ retry: { retries: 0 } });
    h.pool.intercept(create).replyWithError(new undiciErrors.HeadersTimeoutError());
    h.pool.intercept(lookup).reply(200, [sourceInfo()]);
    expect(await createDropbox(h.client)).toEqual(sourceInfo());
  });

  it('when the lookup itself fails, the create error says the connector may exist', async () => {
    const h = harness();
    h.pool.intercept(create).reply(504, 'Gateway Timeout');
    h.pool.intercept(lookup).reply(405, { detail: 'Method Not Allowed' });
    const err = await serviceError(createDropbox(h.client));
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(err.status).toBe(504);
    expect(err.hint).toBe('the dropbox source connector "dropbox-data" may have been created anyway, and checking failed: ' +
      'look for it in syncauth source list before trying again');
    expect(methods(h)).toEqual(['POST /api/v1/sources/', 'GET /api/v1/sources/?']);
  });

  it('429 on create was refused, not ambiguous: wait as asked and send it again, no lookup', async () => {
    const h = harness();
    h.pool.intercept(create).reply(429, {}, { headers: { 'retry-after': '3' } });
    h.pool.intercept(create).reply(200, sourceInfo());
    expect(await createDropbox(h.client)).toEqual(sourceInfo());
    expect(methods(h)).toEqual(['POST /api/v1/sources/', 'POST /api/v1/sources/']);
    expect(h.delays).toEqual([3000]);
  });

  it('a refused connection sent nothing: retry the create directly', async () => {
    const h = harness();
    h.pool.intercept(create).replyWithError(connectionRefused());
    h.pool.intercept(create).replyWithError(new undiciErrors.ConnectTimeoutError());
    h.pool.intercept(create).reply(200, sourceInfo());
    expect(await createDropbox(h.client)).toEqual(sourceInfo());
    expect(methods(h)).toEqual(['POST /api/v1/sources/', 'POST /api/v1/sources/', 'POST /api/v1/sources/']);
  });

  it.each([400, 401, 403, 409, 412, 422])('%i on create is final: no lookup, no retry', async (status) => {
    const h = harness();
    h.pool.intercept(create).reply(status, { detail: 'no' }).persist();
    await serviceError(createDropbox(h.client));
    expect(methods(h)).toEqual(['POST /api/v1/sources/']);
  });

  it('createWorkflow recovers the same way, looking the workflow up by name', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'POST' }).reply(503, {});
    h.pool.intercept({ path: '/api/v1/workflows/?name=docs-sync', method: 'GET' }).reply(200, [workflowInfo()]);
    expect(await h.client.createWorkflow({ name: 'docs-sync', workflow_type: 'custom' })).toEqual(workflowInfo());
    expect(methods(h)).toEqual(['POST /api/v1/workflows/', 'GET /api/v1/workflows/?']);
    expectRequest(h.calls()[1], { method: 'GET', path: '/api/v1/workflows/', query: { name: 'docs-sync' } });
  });

  it('createWorkflow retries once the lookup shows it absent', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'POST' }).replyWithError(new undiciErrors.SocketError('reset'));
    h.pool.intercept({ path: '/api/v1/workflows/?name=docs-sync', method: 'GET' }).reply(200, [workflowInfo({ name: 'docs-sync-2' })]);
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'POST' }).reply(200, workflowInfo());
    expect(await h.client.createWorkflow({ name: 'docs-sync', workflow_type: 'custom' })).toEqual(workflowInfo());
    expect(methods(h)).toEqual(['POST /api/v1/workflows/', 'GET /api/v1/workflows/?', 'POST /api/v1/workflows/']);
  });

  it('500 on a workflow create is not a config refusal', async () => {
    const h = harness({ retry: { retries: 0 } });
    h.pool.intercept({ path: '/api/v1/workflows/', method: 'POST' }).reply(500, { detail: 'oops' });
    h.pool.intercept({ path: '/api/v1/workflows/?name=wf', method: 'GET' }).reply(200, []);
    const err = await serviceError(h.client.createWorkflow({ name: 'wf', workflow_type: 'basic' }));
    expect(err.code).toBe('SERVICE_UNAVAILABLE');
    expect(err.message).toBe('the service could not create the workflow "wf" (500): oops');
  });
});

describe('close()', () => {
  it('leaves a dispatcher it was given open', async () => {
    const h = harness();
    const close = vi.spyOn(h.agent, 'close');
    await h.client.close();
    expect(close).not.toHaveBeenCalled();
  });

  it('refuses requests after close, and a second close is harmless', async () => {
    const client = new ServiceClient({ baseUrl: 'http://127.0.0.1:9', apiKey: API_KEY });
    await client.close();
    await expect(client.close()).resolves.toBeUndefined();
    await expect(client.listSources()).rejects.toThrow('ServiceClient.close() was called');
  });
});

describe('over a real socket on 127.0.0.1', () => {
  interface Served {
    url: string;
    server: Server;
    connections: () => number;
    openSockets: () => number;
    requests: { method: string; url: string; headers: IncomingHttpHeaders }[];
  }

  const servers: Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  async function serve(handler: (res: ServerResponse) => void): Promise<Served> {
    let connections = 0;
    let open = 0;
    const requests: Served['requests'] = [];
    const server = createServer((req, res) => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => handler(res));
    });
    server.on('connection', (socket) => {
      connections += 1;
      open += 1;
      socket.on('close', () => {
        open -= 1;
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, server, connections: () => connections, openSockets: () => open, requests };
  }

  it('reuses keep-alive connections, sends the headers on the wire, and close() ends them', async () => {
    const s = await serve((res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify([sourceInfo()]));
    });
    const client = new ServiceClient({ baseUrl: `${s.url}/api/v1`, apiKey: API_KEY, apiKeyHeader: 'unstructured-api-key' });
    for (let i = 0; i < 4; i++) await client.listSources();
    await client.listSources({ sourceType: 'dropbox' });
    // undici may open a second socket while the first is being released; five new ones would mean no reuse.
    expect(s.connections()).toBeLessThan(3);
    expect(s.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      ...Array<string>(4).fill('GET /api/v1/sources/'), 'GET /api/v1/sources/?source_type=dropbox',
    ]);
    expect(s.requests[0]?.headers).toMatchObject({
      'unstructured-api-key': API_KEY, accept: 'application/json', 'user-agent': `syncauth/${VERSION}`,
    });
    expect(s.requests[0]?.headers).not.toHaveProperty('content-type');
    expect(s.openSockets()).toBeGreaterThan(0);
    await client.close();
    await vi.waitFor(() => expect(s.openSockets()).toBe(0));
  });

  it('a service that never answers hits the real headers timeout: SERVICE_NETWORK', async () => {
    const s = await serve(() => undefined);
    // undici's timers tick about once a second, so this waits about a second whatever the setting below.
    const client = new ServiceClient({ baseUrl: s.url, apiKey: API_KEY, timeouts: { headersMs: 100 }, retry: { retries: 0 } });
    const err = await serviceError(client.listSources());
    await client.close();
    expect(err.code).toBe('SERVICE_NETWORK');
    expect(err.message).toBe(`GET /api/v1/sources/: ${s.url} did not start answering within 0.1 s`);
    expect(s.requests).toHaveLength(1);
  });

  it('a closed port is a refused connection, retried even for a create', async () => {
    const s = await serve(() => undefined);
    const url = s.url;
    servers.splice(servers.indexOf(s.server), 1);
    await new Promise<void>((resolve) => s.server.close(() => resolve()));
    const delays: number[] = [];
    const client = new ServiceClient({
      baseUrl: url, apiKey: API_KEY, retry: { retries: 2 },
      sleep: (ms) => { delays.push(ms); return Promise.resolve(); },
    });
    const err = await serviceError(client.createSource({ name: 'dropbox-data', type: 'dropbox', config: dropboxConfig }));
    await client.close();
    expect(err.code).toBe('SERVICE_NETWORK');
    expect(err.message).toBe(`POST /api/v1/sources/: ${url} refused the connection`);
    expect(delays).toHaveLength(2);
  });
});
