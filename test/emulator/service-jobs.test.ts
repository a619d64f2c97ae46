// The emulator's connection checks, runs, jobs and destinations, and how lenient it is: unknown fields are
// ignored and configs are answered with their defaults, as the service does. Every answer with a status the
// document declares is checked against it (helpers.call).
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { DEFAULT_APP } from '../../src/emulator/index.js';
import { DESTINATION_CONFIG_DEFAULTS, SOURCE_CONFIG_DEFAULTS } from '../../src/emulator/config-defaults.js';
import { SOURCE_TYPES, DESTINATION_TYPES } from '../../src/service/constants.js';
import { validConfigs } from '../fixtures/source-configs.js';
import { OPENAPI_PATH, responseErrors } from '../helpers/openapi.js';
import { call, emulator, manualClock, obtainTokens } from './helpers.js';

type Doc = { components: { schemas: Record<string, { properties?: Record<string, { default?: unknown }>; required?: string[] }> } };
const doc = JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')) as Doc;
const schemas = doc.components.schemas;

// The response model of each source type's config in the document (slack has none).
const SOURCE_MODELS: Record<string, string | undefined> = {
  azure: 'AzureSourceConnectorConfig', box: 'BoxSourceConnectorConfig', confluence: 'ConfluenceSourceConnectorConfig',
  couchbase: 'CouchbaseSourceConnectorConfig', databricks_volumes: 'DatabricksVolumesConnectorConfig',
  dropbox: 'DropboxSourceConnectorConfig', elasticsearch: 'ElasticsearchConnectorConfig', gcs: 'GCSSourceConnectorConfig',
  google_drive: 'GoogleDriveSourceConnectorConfig', 'kafka-cloud': 'KafkaCloudSourceConnectorConfig',
  mongodb: 'MongoDBConnectorConfig', onedrive: 'OneDriveSourceConnectorConfig', outlook: 'OutlookSourceConnectorConfig',
  postgres: 'PostgresSourceConnectorConfig', s3: 'S3SourceConnectorConfig', salesforce: 'SalesforceSourceConnectorConfig',
  sharepoint: 'SharePointSourceConnectorConfig', slack: undefined, snowflake: 'SnowflakeSourceConnectorConfig',
  jira: 'JiraSourceConnectorConfig', zendesk: 'ZendeskSourceConnectorConfig',
};
const DESTINATION_MODELS: Record<string, string | undefined> = {
  astradb: 'AstraDBConnectorConfig', azure_ai_search: 'AzureAISearchConnectorConfig', couchbase: 'CouchbaseDestinationConnectorConfig',
  databricks_volumes: 'DatabricksVolumesConnectorConfig', databricks_volume_delta_tables: 'DatabricksVDTDestinationConnectorConfig',
  delta_table: 'DeltaTableConnectorConfig', elasticsearch: 'ElasticsearchConnectorConfig', gcs: 'GCSDestinationConnectorConfig',
  'kafka-cloud': 'KafkaCloudDestinationConnectorConfig', milvus: 'MilvusDestinationConnectorConfig', mongodb: 'MongoDBConnectorConfig',
  motherduck: undefined, neo4j: 'Neo4jDestinationConnectorConfig', onedrive: 'OneDriveDestinationConnectorConfig',
  pinecone: 'PineconeDestinationConnectorConfig', postgres: 'PostgresDestinationConnectorConfig', redis: 'RedisDestinationConnectorConfig',
  'qdrant-cloud': 'QdrantCloudDestinationConnectorConfig', s3: 'S3DestinationConnectorConfig', snowflake: 'SnowflakeDestinationConnectorConfig',
  'weaviate-cloud': 'WeaviateDestinationConnectorConfig', ibm_watsonx_s3: 'IBMWatsonxS3DestinationConnectorConfig',
};

/** The defaults the document declares on a request model, plus null for what its response model requires without one. */
function documentDefaults(model: string | undefined): Record<string, unknown> {
  if (!model) return {};
  const input = schemas[`${model}Input`];
  const out: Record<string, unknown> = {};
  for (const [name, prop] of Object.entries(input?.properties ?? {})) if ('default' in prop) out[name] = prop.default;
  for (const name of schemas[model]?.required ?? []) {
    if (!(name in out) && !(input?.required ?? []).includes(name)) out[name] = null;
  }
  return out;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...doc, $id: 'doc.json' });
/** Errors of a config against its type's own response model (the document's anyOf also allows any object). */
function typedErrors(model: string, config: unknown): string[] {
  const validate = ajv.getSchema(`doc.json#/components/schemas/${model}`);
  if (!validate) throw new Error(`no schema ${model}`);
  return validate(config) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''}`);
}

describe('config defaults', () => {
  it('the table is the one the document declares, for every source and destination type', () => {
    for (const type of SOURCE_TYPES) expect(SOURCE_CONFIG_DEFAULTS[type], type).toEqual(documentDefaults(SOURCE_MODELS[type]));
    for (const type of DESTINATION_TYPES) expect(DESTINATION_CONFIG_DEFAULTS[type], type).toEqual(documentDefaults(DESTINATION_MODELS[type]));
  });

  it('every source answer carries its defaults and fits its own type\'s response model; what was sent wins', async () => {
    const emu = await emulator();
    for (const type of SOURCE_TYPES) {
      const created = await call(emu, 'POST', '/api/v1/sources/', { body: { name: `d-${type}`, type, config: validConfigs[type] } });
      expect(created.status, `${type}: ${created.text}`).toBe(200);
      const config = (created.body as { config: Record<string, unknown> }).config;
      expect(config).toEqual({ ...SOURCE_CONFIG_DEFAULTS[type], ...validConfigs[type] });
      const model = SOURCE_MODELS[type];
      if (model) expect(typedErrors(model, config), type).toEqual([]);
    }
    const bare = await call(emu, 'POST', '/api/v1/sources/', { body: { name: 'bare', type: 'dropbox', config: { remote_url: 'dropbox://data', token: 'sl.u.x' } } });
    const id = (bare.body as { id: string }).id;
    expect((bare.body as { config: unknown }).config).toEqual({ recursive: true, remote_url: 'dropbox://data', token: 'sl.u.x' });
    expect((await call(emu, 'GET', `/api/v1/sources/${id}`)).body).toMatchObject({ config: { recursive: true } });
    // What was stored is what was sent: the defaults are the answer's.
    expect(emu.state.workspaces.get('default')?.sources.get(id)?.config).toEqual({ remote_url: 'dropbox://data', token: 'sl.u.x' });
  });

  it('unknown fields in a body or a config are ignored and dropped, not refused', async () => {
    const emu = await emulator();
    const created = await call(emu, 'POST', '/api/v1/sources/', {
      body: { name: 'lenient', type: 'dropbox', config: { remote_url: 'dropbox://data', token: 'sl.u.x', colour: 'red' }, owner: 'me' },
    });
    expect(created.status, created.text).toBe(200);
    expect(created.body).not.toHaveProperty('owner');
    expect((created.body as { config: object }).config).not.toHaveProperty('colour');
    const workflow = await call(emu, 'POST', '/api/v1/workflows/', {
      body: { name: 'w', workflow_type: 'custom', template_id: null, workflow_nodes: [{ name: 'P', type: 'partition', subtype: 'fast', colour: 'red' }] },
    });
    expect(workflow.status, workflow.text).toBe(200);
    expect((workflow.body as { workflow_nodes: object[] }).workflow_nodes[0]).not.toHaveProperty('colour');
  });
});

async function dropboxSource(emu: Awaited<ReturnType<typeof emulator>>, config: Record<string, unknown>, name = 'box'): Promise<string> {
  const created = await call(emu, 'POST', '/api/v1/sources/', { body: { name, type: 'dropbox', config: { remote_url: 'dropbox://data', recursive: true, ...config } } });
  expect(created.status, created.text).toBe(200);
  return (created.body as { id: string }).id;
}

async function checkOf(emu: Awaited<ReturnType<typeof emulator>>, id: string, advance: () => void) {
  const started = await call(emu, 'POST', `/api/v1/sources/${id}/connection-check`);
  expect(started.status).toBe(202);
  expect(responseErrors('POST', `/api/v1/sources/${id}/connection-check`, 202, started.body)).toEqual([]);
  expect(started.body).toMatchObject({ status: 'SCHEDULED', reason: null, reported_at: null });
  const pending = await call(emu, 'GET', `/api/v1/sources/${id}/connection-check`);
  expect(pending.body).toMatchObject({ id: (started.body as { id: string }).id, status: 'SCHEDULED' });
  advance();
  const done = await call(emu, 'GET', `/api/v1/sources/${id}/connection-check`);
  expect(done.status).toBe(200);
  return done.body as { id: string; status: string; reason: string | null; reported_at: string | null };
}

describe('connection checks', () => {
  it('succeed with a live access token or a grant Dropbox renews; fail with a reason for a bad, expired or revoked one', async () => {
    const clock = manualClock();
    const emu = await emulator({ autoApprove: true, now: clock.now, checkDelayMs: 1_000, tokenLifetimeSeconds: 60 });
    const advance = () => clock.advance(1_000);
    const tokens = await obtainTokens(emu);
    const triple = { refresh_token: tokens.refresh_token, app_key: DEFAULT_APP.appKey, app_secret: DEFAULT_APP.appSecret };

    expect(await checkOf(emu, await dropboxSource(emu, { token: tokens.access_token }, 'live'), advance)).toMatchObject({ status: 'SUCCESS', reason: null });
    expect(await checkOf(emu, await dropboxSource(emu, { token: 'sl.u.made-up' }, 'bad'), advance)).toMatchObject({
      status: 'FAILURE', reason: expect.stringContaining('invalid_access_token'),
    });
    const wrongFolder = await dropboxSource(emu, { token: tokens.access_token, remote_url: 'dropbox://nope' }, 'folder');
    expect((await checkOf(emu, wrongFolder, advance)).reason).toContain('/nope');
    const wrongSecret = await dropboxSource(emu, { ...triple, app_secret: 'wrong' }, 'secret');
    expect((await checkOf(emu, wrongSecret, advance)).reason).toContain('invalid_client');

    clock.advance(120_000);
    const expiredId = await dropboxSource(emu, { token: tokens.access_token }, 'expired');
    const expired = await checkOf(emu, expiredId, advance);
    expect(expired).toMatchObject({ status: 'FAILURE', reason: expect.stringContaining('expired_access_token') });
    expect(expired.reported_at).not.toBeNull();
    // With the refresh token, app key and secret the service renews the expired token itself.
    const renewing = await dropboxSource(emu, { token: tokens.access_token, ...triple }, 'renewing');
    expect((await checkOf(emu, renewing, advance)).status).toBe('SUCCESS');
    emu.revokeGrant(tokens.refresh_token as string);
    expect(await checkOf(emu, renewing, advance)).toMatchObject({ status: 'FAILURE', reason: expect.stringContaining('invalid_grant') });
  });

  it('GET before any check is 404; an unknown source is 404; a bad id is 422', async () => {
    const emu = await emulator();
    const id = await dropboxSource(emu, { token: 'sl.u.x' });
    expect((await call(emu, 'GET', `/api/v1/sources/${id}/connection-check`)).body).toEqual({ detail: 'No connection check found' });
    expect((await call(emu, 'POST', '/api/v1/sources/3fa85f64-5717-4562-b3fc-2c963f66afa6/connection-check')).status).toBe(404);
    expect((await call(emu, 'POST', '/api/v1/sources/nope/connection-check')).status).toBe(422);
  });
});

describe('runs and jobs', () => {
  it('a run makes a job that goes SCHEDULED, IN_PROGRESS, COMPLETED; another run meanwhile starts none', async () => {
    const clock = manualClock();
    const emu = await emulator({ autoApprove: true, now: clock.now, jobStepMs: 1_000 });
    const tokens = await obtainTokens(emu);
    const sourceId = await dropboxSource(emu, { token: tokens.access_token });
    const workflowId = emu.seeded?.workflowId as string;
    await call(emu, 'PUT', `/api/v1/workflows/${workflowId}`, { body: { source_id: sourceId } });

    const run = await call(emu, 'POST', `/api/v1/workflows/${workflowId}/run`);
    expect(run.status).toBe(202);
    expect(responseErrors('POST', `/api/v1/workflows/${workflowId}/run`, 202, run.body)).toEqual([]);
    const job = run.body as { id: string; status: string; workflow_id: string; workflow_name: string };
    expect(job).toMatchObject({ status: 'SCHEDULED', workflow_id: workflowId, workflow_name: 'default workflow', job_type: 'ephemeral' });

    const again = await call(emu, 'POST', `/api/v1/workflows/${workflowId}/run`);
    expect(again.body).toEqual({ detail: 'There is a running job in progress. No new job run.' });
    expect(emu.state.workspaces.get('default')?.jobs.size).toBe(1);

    clock.advance(1_000);
    expect((await call(emu, 'GET', `/api/v1/jobs/${job.id}`)).body).toMatchObject({ status: 'IN_PROGRESS' });
    clock.advance(1_000);
    expect((await call(emu, 'GET', `/api/v1/jobs/${job.id}`)).body).toMatchObject({ status: 'COMPLETED', runtime: 'PT2S' });
    const listed = await call(emu, 'GET', `/api/v1/jobs/?workflow_id=${workflowId}&status=completed`);
    expect((listed.body as { id: string }[]).map((j) => j.id)).toEqual([job.id]);
    expect((await call(emu, 'GET', '/api/v1/jobs/?status=FAILED')).body).toEqual([]);
    expect((await call(emu, 'GET', '/api/v1/jobs/?workflow_id=nope')).status).toBe(422);
  });

  it('a job whose source cannot be read fails; cancel stops a running job and leaves a finished one', async () => {
    const clock = manualClock();
    const emu = await emulator({ now: clock.now, jobStepMs: 1_000 });
    const sourceId = await dropboxSource(emu, { token: 'sl.u.made-up' });
    const workflowId = emu.seeded?.workflowId as string;
    await call(emu, 'PUT', `/api/v1/workflows/${workflowId}`, { body: { source_id: sourceId } });
    const first = (await call(emu, 'POST', `/api/v1/workflows/${workflowId}/run`)).body as { id: string };
    const cancelled = await call(emu, 'POST', `/api/v1/jobs/${first.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual({});
    expect((await call(emu, 'GET', `/api/v1/jobs/${first.id}`)).body).toMatchObject({ status: 'STOPPED' });
    const second = (await call(emu, 'POST', `/api/v1/workflows/${workflowId}/run`)).body as { id: string };
    clock.advance(2_000);
    expect((await call(emu, 'GET', `/api/v1/jobs/${second.id}`)).body).toMatchObject({ status: 'FAILED' });
    await call(emu, 'POST', `/api/v1/jobs/${second.id}/cancel`);
    expect((await call(emu, 'GET', `/api/v1/jobs/${second.id}`)).body).toMatchObject({ status: 'FAILED' });
    expect((await call(emu, 'GET', '/api/v1/jobs/3fa85f64-5717-4562-b3fc-2c963f66afa6')).body).toEqual({ detail: 'Job not found' });
    expect((await call(emu, 'POST', '/api/v1/workflows/3fa85f64-5717-4562-b3fc-2c963f66afa6/run')).status).toBe(404);
  });
});

describe('destinations', () => {
  it('list, create, get, update, delete; answers with defaults; a bad type is 422', async () => {
    const emu = await emulator();
    const seeded = await call(emu, 'GET', '/api/v1/destinations/');
    expect((seeded.body as { id: string }[]).map((d) => d.id)).toEqual([emu.seeded?.destinationId]);
    const created = await call(emu, 'POST', '/api/v1/destinations/', { body: { name: 'out', type: 'redis', config: { host: 'r.example.com', password: 'p' } } });
    expect(created.status, created.text).toBe(200);
    const dest = created.body as { id: string; config: Record<string, unknown> };
    expect(dest.config).toEqual({ port: 6379, database: 0, ssl: true, batch_size: 100, host: 'r.example.com', password: 'p' });
    expect((await call(emu, 'GET', '/api/v1/destinations/?destination_type=redis')).body).toHaveLength(1);
    expect((await call(emu, 'GET', '/api/v1/destinations/?destination_type=ftp')).status).toBe(422);
    expect((await call(emu, 'POST', '/api/v1/destinations/', { body: { name: 'x', type: 'dropbox', config: {} } })).status).toBe(422);
    expect((await call(emu, 'POST', '/api/v1/destinations/', { body: { name: 'out', type: 's3', config: { remote_url: 's3://b' } } })).status).toBe(409);
    const updated = await call(emu, 'PUT', `/api/v1/destinations/${dest.id}`, { body: { config: { host: 'r2.example.com', port: 6380 } } });
    expect((updated.body as { config: object }).config).toMatchObject({ host: 'r2.example.com', port: 6380, ssl: true });
    expect((await call(emu, 'DELETE', `/api/v1/destinations/${dest.id}`)).status).toBe(200);
    expect((await call(emu, 'GET', `/api/v1/destinations/${dest.id}`)).body).toEqual({ detail: 'Destination not found' });
  });
});
