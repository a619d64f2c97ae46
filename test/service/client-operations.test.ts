// The client's connection-check, run, jobs and destinations operations against undici's MockAgent: each request
// is one the public OpenAPI document declares (path, method, parameters, body), reads are retried, POSTs are
// never sent twice when their outcome is unknown, and the check is polled to its end within a deadline.
import { afterEach, describe, expect, it } from 'vitest';
import { MockAgent } from 'undici';
import type { MockCallHistoryLog } from 'undici';
import { ServiceClient } from '../../src/service/client.js';
import { ServiceError } from '../../src/service/errors.js';
import { ValidationError, SyncauthError } from '../../src/errors.js';
import { requestErrors, responseErrors } from '../helpers/openapi.js';

const ORIGIN = 'https://platform.example.com';
const API_KEY = 'sk-test-0123456789abcdef';
const SOURCE_ID = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
const WORKFLOW_ID = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const JOB_ID = '0d3c4b5a-6f7e-4d8c-9b0a-1c2d3e4f5a6b';
const CHECK_ID = '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d';
const DESTINATION_ID = '6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b';
const JSON_HEADERS = { 'content-type': 'application/json' };

const check = (status: string, over: Record<string, unknown> = {}) => ({
  id: CHECK_ID, status, reason: null, created_at: new Date().toISOString(), reported_at: null, ...over,
});
const job = (status = 'SCHEDULED', over: Record<string, unknown> = {}) => ({
  id: JOB_ID, workflow_id: WORKFLOW_ID, workflow_name: 'docs-sync', status, created_at: new Date().toISOString(),
  runtime: null, input_file_ids: null, output_node_files: null, job_type: 'ephemeral', ...over,
});
const destination = (over: Record<string, unknown> = {}) => ({
  id: DESTINATION_ID, name: 'out', type: 's3', config: { remote_url: 's3://bucket/out', anonymous: false, secret: 'dest-secret-77' },
  created_at: '2025-06-01T10:00:00Z', updated_at: null, ...over,
});

const agents: MockAgent[] = [];
afterEach(async () => {
  for (const agent of agents.splice(0)) await agent.close();
});

function harness() {
  const agent = new MockAgent({ enableCallHistory: true });
  agent.disableNetConnect();
  agents.push(agent);
  const delays: number[] = [];
  const client = new ServiceClient({
    baseUrl: ORIGIN, apiKey: API_KEY, dispatcher: agent,
    sleep: (ms) => { delays.push(ms); return Promise.resolve(); },
  });
  return { pool: agent.get(ORIGIN), client, delays, calls: (): MockCallHistoryLog[] => agent.getCallHistory()?.calls() ?? [] };
}

function target(call: MockCallHistoryLog): string {
  const query = new URLSearchParams(call.searchParams).toString();
  return query ? `${call.path}?${query}` : call.path;
}

/** Every request was one the document declares, and every canned answer is valid for it. */
function expectDeclared(calls: MockCallHistoryLog[]): void {
  for (const call of calls) {
    const body = call.body === undefined || call.body === null ? undefined : (JSON.parse(call.body) as unknown);
    expect(requestErrors(call.method, target(call), body), `${call.method} ${target(call)}`).toEqual([]);
  }
}

describe('requests as the document declares them', () => {
  it('connection check: POST without a body, then GET; answers are valid DagNodeConnectionCheck', async () => {
    const h = harness();
    expect(responseErrors('POST', `/api/v1/sources/${SOURCE_ID}/connection-check`, 202, check('SCHEDULED'))).toEqual([]);
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'POST' }).reply(202, check('SCHEDULED'), { headers: JSON_HEADERS });
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' }).reply(200, check('SCHEDULED'), { headers: JSON_HEADERS });
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' })
      .reply(200, check('FAILURE', { reason: 'expired token', reported_at: new Date().toISOString() }), { headers: JSON_HEADERS });
    const seen: string[] = [];
    const result = await h.client.runSourceConnectionCheck(SOURCE_ID, { intervalMs: 5, onPoll: (c) => seen.push(c.status) });
    expect(result).toMatchObject({ id: CHECK_ID, status: 'FAILURE', reason: 'expired token' });
    expect(seen).toEqual(['SCHEDULED', 'SCHEDULED', 'FAILURE']);
    expect(h.calls().map((c) => c.method)).toEqual(['POST', 'GET', 'GET']);
    expect(h.calls()[0]?.body).toBeUndefined();
    expectDeclared(h.calls());
  });

  it('the wait ignores an older check until the one it started appears', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' })
      .reply(200, check('SUCCESS', { id: SOURCE_ID }), { headers: JSON_HEADERS });
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' }).reply(200, check('FAILURE'), { headers: JSON_HEADERS });
    const result = await h.client.waitForSourceConnectionCheck(SOURCE_ID, { checkId: CHECK_ID, intervalMs: 1 });
    expect(result.status).toBe('FAILURE');
    expect(h.calls()).toHaveLength(2);
  });

  it('the wait ends at its overall deadline with a hint to look again later', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agents.push(agent);
    // Real sleeps here: the deadline is on the monotonic clock.
    const client = new ServiceClient({ baseUrl: ORIGIN, apiKey: API_KEY, dispatcher: agent });
    agent.get(ORIGIN).intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' })
      .reply(200, check('SCHEDULED'), { headers: JSON_HEADERS }).persist();
    const started = performance.now();
    const error = await client.waitForSourceConnectionCheck(SOURCE_ID, { timeoutMs: 300, intervalMs: 50 }).catch((e: unknown) => e);
    const took = performance.now() - started;
    expect(error).toBeInstanceOf(SyncauthError);
    expect((error as SyncauthError).code).toBe('SERVICE_CHECK_PENDING');
    expect((error as SyncauthError).hint).toContain(`syncauth source check ${SOURCE_ID}`);
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(5_000);
  });

  it('run, jobs, cancel and destinations use the declared paths, parameters and bodies', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}/run`, method: 'POST' }).reply(202, job(), { headers: JSON_HEADERS });
    h.pool.intercept({ path: (p) => p.startsWith('/api/v1/jobs/'), method: 'GET' }).reply(200, (opts) =>
      (String(opts.path).includes(JOB_ID) ? job('COMPLETED', { runtime: 'PT2S' }) : [job()])).persist();
    h.pool.intercept({ path: `/api/v1/jobs/${JOB_ID}/cancel`, method: 'POST' }).reply(200, {}, { headers: JSON_HEADERS });
    h.pool.intercept({ path: (p) => p.startsWith('/api/v1/destinations/'), method: 'GET' }).reply(200, (opts) =>
      (String(opts.path).includes(DESTINATION_ID) ? destination() : [destination()])).persist();
    h.pool.intercept({ path: '/api/v1/destinations/', method: 'POST' }).reply(200, destination(), { headers: JSON_HEADERS });
    h.pool.intercept({ path: `/api/v1/destinations/${DESTINATION_ID}`, method: 'DELETE' }).reply(200, {}, { headers: JSON_HEADERS });

    expect((await h.client.runWorkflow(WORKFLOW_ID)).id).toBe(JOB_ID);
    expect(await h.client.listJobs({ workflowId: WORKFLOW_ID, status: 'COMPLETED' })).toHaveLength(1);
    expect((await h.client.getJob(JOB_ID)).status).toBe('COMPLETED');
    expect(await h.client.cancelJob(JOB_ID)).toEqual({});
    expect(await h.client.listDestinations({ destinationType: 's3' })).toHaveLength(1);
    expect((await h.client.getDestination(DESTINATION_ID)).name).toBe('out');
    const created = await h.client.createDestination({ name: 'out', type: 's3', config: { remote_url: 's3://bucket/out' } });
    expect(created.id).toBe(DESTINATION_ID);
    await h.client.deleteDestination(DESTINATION_ID);

    const calls = h.calls();
    expect(calls.map((c) => `${c.method} ${target(c)}`)).toEqual([
      `POST /api/v1/workflows/${WORKFLOW_ID}/run`,
      `GET /api/v1/jobs/?workflow_id=${WORKFLOW_ID}&status=COMPLETED`,
      `GET /api/v1/jobs/${JOB_ID}`,
      `POST /api/v1/jobs/${JOB_ID}/cancel`,
      'GET /api/v1/destinations/?destination_type=s3',
      `GET /api/v1/destinations/${DESTINATION_ID}`,
      'POST /api/v1/destinations/',
      `DELETE /api/v1/destinations/${DESTINATION_ID}`,
    ]);
    expect(JSON.parse(calls[6]?.body as string)).toEqual({ name: 'out', type: 's3', config: { remote_url: 's3://bucket/out' } });
    expectDeclared(calls);
    expect(responseErrors('POST', `/api/v1/workflows/${WORKFLOW_ID}/run`, 202, job())).toEqual([]);
    expect(responseErrors('GET', '/api/v1/destinations/', 200, [destination()])).toEqual([]);
  });

  it('refuses bad input before sending anything', async () => {
    const h = harness();
    const bad: [string, () => Promise<unknown>][] = [
      ['check', () => h.client.checkSourceConnection('nope')],
      ['run', () => h.client.runWorkflow('wf-1')],
      ['jobs filter', () => h.client.listJobs({ workflowId: 'x' })],
      ['cancel', () => h.client.cancelJob('123')],
      ['destination type', () => h.client.createDestination({ name: 'd', type: 'dropbox', config: {} })],
      ['destination config', () => h.client.createDestination({ name: 'd', type: 's3', config: [] as never })],
      ['destination list type', () => h.client.listDestinations({ destinationType: 'ftp' })],
    ];
    for (const [what, run] of bad) await expect(run(), what).rejects.toBeInstanceOf(ValidationError);
    expect(h.calls()).toEqual([]);
  });
});

describe('errors and retries', () => {
  it('a run refused because a job is running (a 2xx with detail) is a conflict naming the job list', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}/run`, method: 'POST' })
      .reply(202, { detail: 'There is a running job in progress. No new job run.' }, { headers: JSON_HEADERS });
    const error = (await h.client.runWorkflow(WORKFLOW_ID).catch((e: unknown) => e)) as ServiceError;
    expect(error).toBeInstanceOf(ServiceError);
    expect(error.code).toBe('SERVICE_CONFLICT');
    expect(error.message).toContain('There is a running job in progress');
    expect(error.hint).toContain(`syncauth jobs list --workflow ${WORKFLOW_ID}`);
  });

  it('an unknown job is a 404 naming the job', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/jobs/${JOB_ID}`, method: 'GET' }).reply(404, { detail: 'Job not found' }, { headers: JSON_HEADERS });
    const error = (await h.client.getJob(JOB_ID).catch((e: unknown) => e)) as ServiceError;
    expect(error.code).toBe('SERVICE_NOT_FOUND');
    expect(error.message).toBe(`job ${JOB_ID} not found in this workspace`);
  });

  it('reads are retried on 503', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' }).reply(503, { detail: 'busy' }, { headers: JSON_HEADERS });
    h.pool.intercept({ path: `/api/v1/sources/${SOURCE_ID}/connection-check`, method: 'GET' }).reply(200, check('SUCCESS'), { headers: JSON_HEADERS });
    expect((await h.client.getSourceConnectionCheck(SOURCE_ID)).status).toBe('SUCCESS');
    expect(h.calls()).toHaveLength(2);
  });

  it('a run whose outcome is unknown (500) is not sent again when a job of the workflow is running', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/workflows/${WORKFLOW_ID}/run`, method: 'POST' }).reply(500, 'Internal Server Error');
    h.pool.intercept({ path: `/api/v1/jobs/?workflow_id=${WORKFLOW_ID}`, method: 'GET' }).reply(200, [job('IN_PROGRESS')], { headers: JSON_HEADERS });
    expect((await h.client.runWorkflow(WORKFLOW_ID)).id).toBe(JOB_ID);
    expect(h.calls().filter((c) => c.method === 'POST')).toHaveLength(1);
  });

  it('a check whose outcome is unknown is looked up; only when no recent check exists is it sent again', async () => {
    const h = harness();
    const path = `/api/v1/sources/${SOURCE_ID}/connection-check`;
    h.pool.intercept({ path, method: 'POST' }).reply(502, { detail: 'bad gateway' }, { headers: JSON_HEADERS });
    h.pool.intercept({ path, method: 'GET' }).reply(200, check('SUCCESS', { created_at: '2020-01-01T00:00:00Z' }), { headers: JSON_HEADERS });
    h.pool.intercept({ path, method: 'POST' }).reply(202, check('SCHEDULED'), { headers: JSON_HEADERS });
    expect((await h.client.checkSourceConnection(SOURCE_ID)).status).toBe('SCHEDULED');
    expect(h.calls().map((c) => c.method)).toEqual(['POST', 'GET', 'POST']);

    const again = harness();
    again.pool.intercept({ path, method: 'POST' }).reply(502, { detail: 'bad gateway' }, { headers: JSON_HEADERS });
    again.pool.intercept({ path, method: 'GET' }).reply(200, check('SCHEDULED'), { headers: JSON_HEADERS });
    expect((await again.client.checkSourceConnection(SOURCE_ID)).id).toBe(CHECK_ID);
    expect(again.calls().map((c) => c.method)).toEqual(['POST', 'GET']);
  });

  it('a cancel whose outcome is unknown is not repeated once the job has stopped', async () => {
    const h = harness();
    h.pool.intercept({ path: `/api/v1/jobs/${JOB_ID}/cancel`, method: 'POST' }).reply(504, { detail: 'timeout' }, { headers: JSON_HEADERS });
    h.pool.intercept({ path: `/api/v1/jobs/${JOB_ID}`, method: 'GET' }).reply(200, job('STOPPED'), { headers: JSON_HEADERS });
    expect(await h.client.cancelJob(JOB_ID)).toMatchObject({ status: 'STOPPED' });
    expect(h.calls().filter((c) => c.method === 'POST')).toHaveLength(1);
  });

  it('a destination create that failed after sending finds the one that was made instead of making two', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/destinations/', method: 'POST' }).reply(500, 'Internal Server Error');
    h.pool.intercept({ path: '/api/v1/destinations/?destination_type=s3', method: 'GET' }).reply(200, [destination()], { headers: JSON_HEADERS });
    const made = await h.client.createDestination({ name: 'out', type: 's3', config: { remote_url: 's3://bucket/out', secret: 'dest-secret-77' } });
    expect(made.id).toBe(DESTINATION_ID);
    expect(h.calls().filter((c) => c.method === 'POST')).toHaveLength(1);
  });

  it('a destination config secret the service echoes in an error is masked', async () => {
    const h = harness();
    h.pool.intercept({ path: '/api/v1/destinations/', method: 'POST' })
      .reply(422, { detail: [{ loc: ['body', 'config', 'secret'], msg: 'bad value dest-secret-77', type: 'value_error' }] }, { headers: JSON_HEADERS });
    const error = (await h.client.createDestination({ name: 'o', type: 's3', config: { remote_url: 's3://b', secret: 'dest-secret-77' } })
      .catch((e: unknown) => e)) as ServiceError;
    expect(error.code).toBe('SERVICE_INVALID_REQUEST');
    expect(error.message).not.toContain('dest-secret-77');
  });
});
