// A full exercise of the service client against the emulator, through a recording proxy on 127.0.0.1: every
// request the client makes is one the public OpenAPI document declares, and every answer the emulator gives has a
// status the document declares for it and a body valid against that status's schema.
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { ServiceClient } from '../../src/service/client.js';
import { SOURCE_TYPES } from '../../src/service/models.js';
import { typedConfigs, validConfigs } from '../fixtures/source-configs.js';
import { requestErrors, responseErrors } from '../helpers/openapi.js';

interface Exchange { method: string; url: string; requestBody: unknown; status: number; body: unknown }

let emu: RunningEmulator;
let proxyUrl: string;
let close: () => Promise<void>;
const exchanges: Exchange[] = [];

function parse(text: string): unknown {
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

beforeAll(async () => {
  emu = await startEmulator({ autoApprove: true, checkDelayMs: 50, jobStepMs: 50 });
  const target = new URL(emu.url);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const sent = Buffer.concat(chunks);
      const upstream = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (c: Buffer) => parts.push(c));
        answer.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          exchanges.push({ method: req.method ?? '', url: req.url ?? '', requestBody: parse(sent.toString('utf8')), status: answer.statusCode ?? 0, body: parse(text) });
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          res.end(text);
        });
      });
      upstream.end(sent);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); });
});
afterAll(async () => {
  await close();
  await emu.close();
});

it('every request is declared and every answer is valid against the document', async () => {
  const client = new ServiceClient({ baseUrl: proxyUrl, apiKey: DEFAULT_EMULATOR_API_KEY, sleep: () => new Promise((r) => setTimeout(r, 20)) });
  try {
    const ids: string[] = [];
    for (const type of SOURCE_TYPES) ids.push((await client.createSourceUntyped({ name: `all-${type}`, type, config: validConfigs[type] })).id);
    const dropboxId = ids[SOURCE_TYPES.indexOf('dropbox')] as string;
    await client.listSources();
    await client.listSources({ sourceType: 'dropbox' });
    await client.getSource(dropboxId);
    await client.updateSource(dropboxId, typedConfigs.dropbox, 'dropbox');
    const check = await client.runSourceConnectionCheck(dropboxId, { intervalMs: 20, timeoutMs: 10_000 });
    expect(check.status).toBe('FAILURE');
    await client.runSourceConnectionCheck(ids[SOURCE_TYPES.indexOf('s3')] as string, { intervalMs: 20, timeoutMs: 10_000 });

    const destination = await client.createDestination({ name: 'out', type: 's3', config: { remote_url: 's3://bucket/out' } });
    await client.listDestinations();
    await client.listDestinations({ destinationType: 's3' });
    await client.getDestination(destination.id);

    const workflow = await client.createWorkflow({ name: 'exercise', workflow_type: 'custom', source_id: dropboxId, destination_id: destination.id, schedule: 'daily' });
    await client.listWorkflows();
    await client.findWorkflowByName('exercise');
    await client.getWorkflow(workflow.id);
    await client.updateWorkflow(workflow.id, { schedule: 'every 4 hours', reprocess_all: true });
    const job = await client.runWorkflow(workflow.id);
    await client.listJobs({ workflowId: workflow.id });
    await client.getJob(job.id);
    await client.cancelJob(job.id);
    const second = await client.runWorkflow(workflow.id);
    for (let i = 0; i < 200 && ['SCHEDULED', 'IN_PROGRESS'].includes((await client.getJob(second.id)).status); i++) await new Promise((r) => setTimeout(r, 20));
    await client.listJobs({ status: 'FAILED' });
    // Refusals the client lets through to the service: a 404 and a 409.
    await expect(client.getJob(job.workflow_id)).rejects.toThrow('not found');
    await expect(client.createSource({ name: 'all-s3', type: 's3', config: typedConfigs.s3 })).rejects.toThrow('already exists');
    await client.deleteDestination(destination.id);
    for (const id of ids) await client.deleteSource(id);
  } finally {
    await client.close();
  }

  expect(exchanges.length).toBeGreaterThan(40);
  const operations = new Set<string>();
  for (const x of exchanges) {
    const what = `${x.method} ${x.url} -> ${x.status} ${JSON.stringify(x.body)}`;
    expect(requestErrors(x.method, x.url, x.requestBody), what).toEqual([]);
    if (x.status < 300 || x.status === 422) {
      expect(responseErrors(x.method, x.url, x.status, x.body), what).toEqual([]);
    } else {
      // Errors the framework raises outside the document (401, 404, 409, 429, 5xx) are FastAPI's `{"detail": "…"}`.
      expect(x.body, what).toEqual({ detail: expect.any(String) });
    }
    operations.add(`${x.method} ${x.url.split('?')[0]?.replace(/[0-9a-f-]{36}/g, '{id}')}`);
  }
  expect([...operations].sort()).toEqual([
    'DELETE /api/v1/destinations/{id}', 'DELETE /api/v1/sources/{id}',
    'GET /api/v1/destinations/', 'GET /api/v1/destinations/{id}', 'GET /api/v1/jobs/', 'GET /api/v1/jobs/{id}',
    'GET /api/v1/sources/', 'GET /api/v1/sources/{id}', 'GET /api/v1/sources/{id}/connection-check',
    'GET /api/v1/workflows/', 'GET /api/v1/workflows/{id}',
    'POST /api/v1/destinations/', 'POST /api/v1/jobs/{id}/cancel', 'POST /api/v1/sources/', 'POST /api/v1/sources/{id}/connection-check',
    'POST /api/v1/workflows/', 'POST /api/v1/workflows/{id}/run',
    'PUT /api/v1/sources/{id}', 'PUT /api/v1/workflows/{id}',
  ]);
}, 60_000);
