// The ingestion service's source and workflow endpoints (SPEC §1), answering the way a FastAPI app does:
// trailing-slash redirects, 404 `Not Found` / 405 `Method Not Allowed` from the router, a malformed JSON
// body rejected before anything else, then the API key, then one 422 listing every path, query and body
// problem, then the handler's own 404/409/422.
//
// Behaviour the public material does not pin down, and the choice made here:
// - duplicate source names in a workspace: 409 `A source connector named X already exists`;
// - unknown fields in a request body: 422 `extra_forbidden` (the models in models.ts are strict; the real
//   service may ignore them);
// - a source config is stored and echoed as given: whether the real service masks secrets in responses is
//   undocumented;
// - a workflow's source_id / destination_id that is not in the workspace: 404 `Source not found` /
//   `Destination not found`, as for a lookup by id;
// - workflow status: `active` while the workflow has a source and a destination, else `inactive`;
// - deleting a source leaves workflows that point at it unchanged (no cascade), so clients must cope with
//   a workflow naming a source that no longer exists;
// - delete answers 200 `{"detail": "<Kind> with id <id> successfully deleted."}` (the public document only
//   says any JSON; the wording is that of the official SDK's contract-test mock).
import type { Request, Response, Router } from 'express';
import express from 'express';
import { z } from 'zod';
import { SCHEDULE_CRON, SOURCE_TYPES, SourceTypeSchema, WORKFLOW_STATES, WorkflowCreateSchema, WorkflowUpdateSchema } from '../service/models.js';
import type { Schedule, WorkflowNode } from '../service/models.js';
import { validateSourceConfig } from '../service/source-configs.js';
import { bodyText, isoTime, mediaType, queryParams, type EmulatorContext } from './context.js';
import {
  enumError,
  fieldPath,
  literalError,
  missing,
  notAnObject,
  parseUuid,
  sendDetail,
  sendValidation,
  uuidError,
  valueAt,
  zodToDetail,
  type DetailItem,
  type Loc,
} from './fastapi.js';
import { decodeJson } from '../json-decode.js';
import type { StoredSource, StoredWorkflow, StoredWorkflowNode, WorkspaceState } from './types.js';

const CreateSourceSchema = z.strictObject({
  name: z.string(),
  type: SourceTypeSchema,
  config: z.record(z.string(), z.unknown()),
});
const UpdateSourceSchema = z.strictObject({ config: z.record(z.string(), z.unknown()) });

// The schedule is an inline Literal in the public document, so pydantic calls its failure `literal_error`.
const LITERAL_FIELDS = new Set(['schedule']);

// `raw`: a body FastAPI does not decode as JSON (another content type), which no model can be read from.
type Body = { kind: 'none' } | { kind: 'json'; value: unknown } | { kind: 'raw' };

interface Call {
  ctx: EmulatorContext;
  req: Request;
  res: Response;
  ws: WorkspaceState;
  body: Body;
  now: string;
}

type Handler = (call: Call) => void;

export function serviceRouter(ctx: EmulatorContext): Router {
  // Strict routing: `/api/v1/sources` and `/api/v1/sources/` are different paths, as in Starlette.
  const router = express.Router({ strict: true });
  const header = ctx.options.apiKeyHeader.toLowerCase();

  const endpoint = (takesBody: boolean, handler: Handler) => (req: Request, res: Response): void => {
    let body: Body = { kind: 'none' };
    if (takesBody) {
      const text = bodyText(req);
      const type = mediaType(req);
      if (text.length > 0) {
        if (type === '' || type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))) {
          const decoded = decodeJson(text);
          if (!decoded.ok) {
            sendValidation(res, [
              { loc: ['body', decoded.failure.pos], msg: 'JSON decode error', type: 'json_invalid', ctx: { error: decoded.failure.msg } },
            ]);
            return;
          }
          body = { kind: 'json', value: decoded.value };
        } else {
          body = { kind: 'raw' };
        }
      }
    }
    const key = req.headers[header];
    const keyValue = Array.isArray(key) ? key[0] : key;
    if (!keyValue) {
      sendDetail(res, 401, 'API key is missing, please provide an API key in the header.');
      return;
    }
    const ws = ctx.state.apiKeys.get(keyValue);
    if (!ws) {
      sendDetail(res, 401, 'API key is invalid, please provide a valid API key in the header.');
      return;
    }
    handler({ ctx, req, res, ws, body, now: isoTime(ctx.options.now()) });
  };

  const methodNotAllowed = (allow: string) => (_req: Request, res: Response): void => {
    res.setHeader('Allow', allow);
    sendDetail(res, 405, 'Method Not Allowed');
  };

  router
    .route('/api/v1/sources/')
    .get(endpoint(false, listSources))
    .post(endpoint(true, createSource))
    .all(methodNotAllowed('GET, POST'));
  router
    .route('/api/v1/sources/:source_id')
    .get(endpoint(false, getSource))
    .put(endpoint(true, updateSource))
    .delete(endpoint(false, deleteSource))
    .all(methodNotAllowed('GET, PUT, DELETE'));
  router
    .route('/api/v1/workflows/')
    .get(endpoint(false, listWorkflows))
    .post(endpoint(true, createWorkflow))
    .all(methodNotAllowed('GET, POST'));
  router
    .route('/api/v1/workflows/:workflow_id')
    .get(endpoint(false, getWorkflow))
    .put(endpoint(true, updateWorkflow))
    .delete(endpoint(false, deleteWorkflow))
    .all(methodNotAllowed('GET, PUT, DELETE'));

  // Starlette's redirect_slashes: a path that matches only with the trailing slash toggled is redirected
  // with 307, which keeps the method and body.
  const redirect = (toggle: (path: string) => string) => (req: Request, res: Response): void => {
    const query = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?')) : '';
    res.redirect(307, `${req.protocol}://${req.get('host') ?? '127.0.0.1'}${toggle(req.path)}${query}`);
  };
  router.all(['/api/v1/sources', '/api/v1/workflows'], redirect((p) => `${p}/`));
  router.all(['/api/v1/sources/:id/', '/api/v1/workflows/:id/'], redirect((p) => p.slice(0, -1)));

  return router;
}

// ---------------------------------------------------------------------------------------------------------------
// Shared validation

function pathId(call: Call, name: string, items: DetailItem[]): string {
  const raw = String(call.req.params[name] ?? '');
  const id = parseUuid(raw);
  if (id === null) items.push(uuidError(['path', name], raw));
  return id ?? '';
}

/** Validates a JSON body against a zod model; the parsed value, or undefined with the problems added. */
function modelBody<T>(body: Body, schema: z.ZodType<T>, items: DetailItem[]): T | undefined {
  if (body.kind === 'none') {
    items.push(missing(['body']));
    return undefined;
  }
  if (body.kind === 'raw') {
    items.push(notAnObject(['body']));
    return undefined;
  }
  if (body.value === null || typeof body.value !== 'object' || Array.isArray(body.value)) {
    items.push(notAnObject(['body']));
    return undefined;
  }
  const parsed = schema.safeParse(body.value);
  if (parsed.success) return parsed.data;
  items.push(...zodToDetail(parsed.error, body.value, ['body'], LITERAL_FIELDS));
  return undefined;
}

/** Per-type config check, as the service runs it after the request model passed. */
function configProblems(type: string, config: Record<string, unknown>): DetailItem[] {
  const result = validateSourceConfig(type, config);
  if (result.ok) return [];
  const input = { type, config };
  return result.issues.map((issue) => {
    const path = issue.field === '' ? [] : fieldPath(issue.field);
    const loc: Loc = ['body', ...path];
    return valueAt(input, path) === undefined && path.length > 0
      ? missing(loc)
      : { loc, msg: `Value error, ${issue.message}`, type: 'value_error' };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Sources

function listSources(call: Call): void {
  const sourceType = queryParams(call.req).get('source_type');
  if (sourceType !== null && !(SOURCE_TYPES as readonly string[]).includes(sourceType)) {
    sendValidation(call.res, [enumError(['query', 'source_type'], SOURCE_TYPES)]);
    return;
  }
  const all = [...call.ws.sources.values()].filter((s) => sourceType === null || s.type === sourceType);
  call.res.json(structuredClone(all));
}

function createSource(call: Call): void {
  const items: DetailItem[] = [];
  const body = modelBody(call.body, CreateSourceSchema, items);
  if (!body) {
    sendValidation(call.res, items);
    return;
  }
  const problems = configProblems(body.type, body.config);
  if (problems.length > 0) {
    sendValidation(call.res, problems);
    return;
  }
  if ([...call.ws.sources.values()].some((s) => s.name === body.name)) {
    sendDetail(call.res, 409, `A source connector named ${body.name} already exists`);
    return;
  }
  const source: StoredSource = {
    id: newId(call),
    name: body.name,
    type: body.type,
    config: structuredClone(body.config),
    created_at: call.now,
    updated_at: null,
  };
  call.ws.sources.set(source.id, source);
  call.res.json(structuredClone(source));
}

/** GET of one resource by its path id: 422 for a malformed id, 404 for an unknown one. */
function getById(call: Call, param: 'source_id' | 'workflow_id', found: (id: string) => unknown, notFound: string): void {
  const items: DetailItem[] = [];
  const id = pathId(call, param, items);
  if (items.length > 0) {
    sendValidation(call.res, items);
    return;
  }
  const resource = found(id);
  if (!resource) {
    sendDetail(call.res, 404, notFound);
    return;
  }
  call.res.json(structuredClone(resource));
}

function getSource(call: Call): void {
  getById(call, 'source_id', (id) => call.ws.sources.get(id), 'Source not found');
}

function updateSource(call: Call): void {
  const items: DetailItem[] = [];
  const id = pathId(call, 'source_id', items);
  const body = modelBody(call.body, UpdateSourceSchema, items);
  if (items.length > 0 || !body) {
    sendValidation(call.res, items);
    return;
  }
  const source = call.ws.sources.get(id);
  if (!source) {
    sendDetail(call.res, 404, 'Source not found');
    return;
  }
  const problems = configProblems(source.type, body.config);
  if (problems.length > 0) {
    sendValidation(call.res, problems);
    return;
  }
  source.config = structuredClone(body.config);
  source.updated_at = call.now;
  call.res.json(structuredClone(source));
}

function deleteSource(call: Call): void {
  const items: DetailItem[] = [];
  const id = pathId(call, 'source_id', items);
  if (items.length > 0) {
    sendValidation(call.res, items);
    return;
  }
  if (!call.ws.sources.delete(id)) {
    sendDetail(call.res, 404, 'Source not found');
    return;
  }
  call.res.json({ detail: `Source with id ${id} successfully deleted.` });
}

// ---------------------------------------------------------------------------------------------------------------
// Workflows

const SORTABLE = new Set(['id', 'name', 'created_at', 'updated_at', 'status', 'workflow_type']);

function listWorkflows(call: Call): void {
  const q = queryParams(call.req);
  const items: DetailItem[] = [];
  const uuidQuery = (name: string): string | null => {
    const raw = q.get(name);
    if (raw === null) return null;
    const id = parseUuid(raw);
    if (id === null) items.push(uuidError(['query', name], raw));
    return id;
  };
  const intQuery = (name: string, fallback: number): number => {
    const raw = q.get(name);
    if (raw === null) return fallback;
    if (!/^\s*[+-]?\d+\s*$/.test(raw)) {
      items.push({ loc: ['query', name], msg: 'Input should be a valid integer, unable to parse string as an integer', type: 'int_parsing' });
      return fallback;
    }
    return Number(raw);
  };
  const sourceId = uuidQuery('source_id');
  const destinationId = uuidQuery('destination_id');
  const status = q.get('status');
  if (status !== null && !(WORKFLOW_STATES as readonly string[]).includes(status)) items.push(enumError(['query', 'status'], WORKFLOW_STATES));
  const page = intQuery('page', 1);
  const pageSize = intQuery('page_size', 20);
  const direction = q.get('sort_direction') ?? 'asc';
  if (direction !== 'asc' && direction !== 'desc') items.push(literalError(['query', 'sort_direction'], ['asc', 'desc']));
  if (items.length > 0) {
    sendValidation(call.res, items);
    return;
  }
  const name = q.get('name');
  const sortBy = q.get('sort_by') ?? 'id';
  const key = SORTABLE.has(sortBy) ? (sortBy as keyof StoredWorkflow) : 'id';
  const found = [...call.ws.workflows.values()]
    .filter((w) => sourceId === null || w.sources.includes(sourceId))
    .filter((w) => destinationId === null || w.destinations.includes(destinationId))
    .filter((w) => status === null || w.status === status)
    .filter((w) => name === null || w.name === name)
    .sort((a, b) => {
      const order = String(a[key] ?? '').localeCompare(String(b[key] ?? ''));
      return direction === 'asc' ? order : -order;
    });
  const size = Math.max(pageSize, 1);
  const start = (Math.max(page, 1) - 1) * size;
  call.res.json(structuredClone(found.slice(start, start + size)));
}

function getWorkflow(call: Call): void {
  getById(call, 'workflow_id', (id) => call.ws.workflows.get(id), 'Workflow not found');
}

function createWorkflow(call: Call): void {
  const items: DetailItem[] = [];
  const body = modelBody(call.body, WorkflowCreateSchema, items);
  if (!body) {
    sendValidation(call.res, items);
    return;
  }
  if (!referencesExist(call, body.source_id, body.destination_id)) return;
  const workflow: StoredWorkflow = {
    id: newId(call),
    name: body.name,
    sources: body.source_id ? [body.source_id.toLowerCase()] : [],
    destinations: body.destination_id ? [body.destination_id.toLowerCase()] : [],
    workflow_type: body.workflow_type,
    workflow_nodes: nodesWithIds(call, body.workflow_nodes ?? []),
    schedule: scheduleOf(body.schedule ?? null),
    status: 'inactive',
    created_at: call.now,
    updated_at: null,
    reprocess_all: body.reprocess_all ?? false,
  };
  workflow.status = statusOf(workflow);
  call.ws.workflows.set(workflow.id, workflow);
  call.res.json(structuredClone(workflow));
}

function updateWorkflow(call: Call): void {
  const items: DetailItem[] = [];
  const id = pathId(call, 'workflow_id', items);
  const body = modelBody(call.body, WorkflowUpdateSchema, items);
  if (items.length > 0 || !body) {
    sendValidation(call.res, items);
    return;
  }
  const workflow = call.ws.workflows.get(id);
  if (!workflow) {
    sendDetail(call.res, 404, 'Workflow not found');
    return;
  }
  if (!referencesExist(call, body.source_id, body.destination_id)) return;
  // An absent field leaves the value as it is; an explicit null clears it.
  const sent = (field: string): boolean => call.body.kind === 'json' && Object.hasOwn(call.body.value as object, field);
  // `name` is required in WorkflowInformation, so a null name cannot clear it: it is left unchanged.
  if (sent('name') && body.name != null) workflow.name = body.name;
  if (sent('source_id')) workflow.sources = body.source_id ? [body.source_id.toLowerCase()] : [];
  if (sent('destination_id')) workflow.destinations = body.destination_id ? [body.destination_id.toLowerCase()] : [];
  if (sent('workflow_type')) workflow.workflow_type = body.workflow_type ?? null;
  if (sent('workflow_nodes')) workflow.workflow_nodes = nodesWithIds(call, body.workflow_nodes ?? []);
  if (sent('schedule')) workflow.schedule = scheduleOf(body.schedule ?? null);
  if (sent('reprocess_all')) workflow.reprocess_all = body.reprocess_all ?? null;
  workflow.status = statusOf(workflow);
  workflow.updated_at = call.now;
  call.res.json(structuredClone(workflow));
}

function deleteWorkflow(call: Call): void {
  const items: DetailItem[] = [];
  const id = pathId(call, 'workflow_id', items);
  if (items.length > 0) {
    sendValidation(call.res, items);
    return;
  }
  if (!call.ws.workflows.delete(id)) {
    sendDetail(call.res, 404, 'Workflow not found');
    return;
  }
  call.res.json({ detail: `Workflow with id ${id} successfully deleted.` });
}

function referencesExist(call: Call, sourceId: string | null | undefined, destinationId: string | null | undefined): boolean {
  if (sourceId && !call.ws.sources.has(sourceId.toLowerCase())) {
    sendDetail(call.res, 404, 'Source not found');
    return false;
  }
  if (destinationId && !call.ws.destinations.has(destinationId.toLowerCase())) {
    sendDetail(call.res, 404, 'Destination not found');
    return false;
  }
  return true;
}

function scheduleOf(schedule: Schedule | null): StoredWorkflow['schedule'] {
  if (schedule === null) return null;
  return { crontab_entries: [{ cron_expression: SCHEDULE_CRON[schedule] }] };
}

function nodesWithIds(call: Call, nodes: WorkflowNode[]): StoredWorkflowNode[] {
  return nodes.map((n) => ({
    id: n.id ? n.id.toLowerCase() : call.ctx.gen.uuid(),
    name: n.name,
    type: n.type,
    subtype: n.subtype,
    settings: n.settings ? structuredClone(n.settings) : null,
  }));
}

function statusOf(workflow: StoredWorkflow): StoredWorkflow['status'] {
  return workflow.sources.length > 0 && workflow.destinations.length > 0 ? 'active' : 'inactive';
}

function newId(call: Call): string {
  return call.ctx.gen.uuid();
}
