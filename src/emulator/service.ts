// The ingestion service's source and workflow endpoints (SPEC §1), answering the way a FastAPI app does:
// trailing-slash redirects, 404 `Not Found` / 405 `Method Not Allowed` from the router, a malformed JSON
// body rejected before anything else, then the API key, then one 422 listing every path, query and body
// problem, then the handler's own 404/409/422.
//
// Behaviour the public material does not pin down, and the choice made here:
// - duplicate source names in a workspace: 409 `A source connector named X already exists`, unless the
//   `uniqueConnectorNames: false` option makes it a service without that rule (the document only says a name
//   "must be unique for the connector", not that the service enforces it);
// - unknown fields in a request body, or in a connector config, are ignored and dropped, as pydantic models do
//   by default (the document's schemas do not forbid additional properties);
// - a connector config is stored as given (less unknown fields) and answered with the defaults of its type
//   filled in (config-defaults.ts); whether the real service masks secrets in responses is undocumented;
// - a connection check is SCHEDULED for `checkDelayMs`, then SUCCESS or FAILURE with a reason (checks.ts);
//   GET before any check was started: 404 `No connection check found`;
// - a run answers 202 with a job that is SCHEDULED, then IN_PROGRESS, then COMPLETED or FAILED (`jobStepMs`
//   each); a run while a job of the workflow is still running answers 202 `{"detail": "There is a running job
//   in progress. No new job run."}`, as the real service was seen doing (unstructured-python-client#286);
//   cancel answers `{}` and stops a running job (a finished one is left as it is);
// - destination configs are checked for being objects only;
// - a workflow's source_id / destination_id that is not in the workspace: 404 `Source not found` /
//   `Destination not found`, as for a lookup by id;
// - workflow status: `active` while the workflow has a source and a destination, else `inactive`;
// - deleting a source leaves workflows that point at it unchanged (no cascade), so clients must cope with
//   a workflow naming a source that no longer exists;
// - delete answers 200 `{"detail": "<Kind> with id <id> successfully deleted."}` (the public document only
//   says any JSON; the wording is that of the official SDK's contract-test mock).
import type { Request, Response, Router } from 'express';
import express from 'express';
import * as z from 'zod';
import {
  DESTINATION_TYPES, DestinationTypeSchema, SCHEDULE_CRON, SOURCE_TYPES, SourceTypeSchema, WORKFLOW_STATES,
  WorkflowCreateSchema, WorkflowNodeSchema, WorkflowUpdateSchema,
} from '../service/models.js';
import type { Schedule, WorkflowNode } from '../service/models.js';
import { SOURCE_CONFIG_FIELDS, validateSourceConfig } from '../service/source-configs.js';
import { isoDuration, settleCheck, settleJob } from './checks.js';
import { DESTINATION_CONFIG_DEFAULTS, SOURCE_CONFIG_DEFAULTS, withDefaults } from './config-defaults.js';
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
import type { StoredCheck, StoredConnector, StoredJob, StoredWorkflow, StoredWorkflowNode, WorkspaceState } from './types.js';

// Request models as the service reads them: unknown fields are dropped, not refused (z.object strips them).
const CreateSourceSchema = z.object({
  name: z.string(),
  type: SourceTypeSchema,
  config: z.record(z.string(), z.unknown()),
});
const UpdateSourceSchema = z.object({ config: z.record(z.string(), z.unknown()) });
const CreateDestinationSchema = z.object({
  name: z.string(),
  type: DestinationTypeSchema,
  config: z.record(z.string(), z.unknown()),
});
const NodeSchema = z.object(WorkflowNodeSchema.shape);
const CreateWorkflowSchema = z.object({ ...WorkflowCreateSchema.shape, workflow_nodes: z.array(NodeSchema).nullish() });
const UpdateWorkflowSchema = z.object({ ...WorkflowUpdateSchema.shape, workflow_nodes: z.array(NodeSchema).nullish() });

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

  const connectorRoutes = (kind: ConnectorKind): void => {
    router
      .route(kind.collection)
      .get(endpoint(false, (call) => listConnectors(kind, call)))
      .post(endpoint(true, (call) => createConnector(kind, call)))
      .all(methodNotAllowed('GET, POST'));
    router
      .route(`${kind.collection}:${kind.param}`)
      .get(endpoint(false, (call) => getConnector(kind, call)))
      .put(endpoint(true, (call) => updateConnector(kind, call)))
      .delete(endpoint(false, (call) => deleteConnector(kind, call)))
      .all(methodNotAllowed('GET, PUT, DELETE'));
  };

  connectorRoutes(SOURCES);
  router
    .route('/api/v1/sources/:source_id/connection-check')
    .get(endpoint(false, getSourceCheck))
    .post(endpoint(false, createSourceCheck))
    .all(methodNotAllowed('GET, POST'));
  connectorRoutes(DESTINATIONS);
  router
    .route('/api/v1/workflows/:workflow_id/run')
    .post(endpoint(false, runWorkflow))
    .all(methodNotAllowed('POST'));
  router
    .route('/api/v1/jobs/')
    .get(endpoint(false, listJobs))
    .all(methodNotAllowed('GET'));
  router
    .route('/api/v1/jobs/:job_id')
    .get(endpoint(false, getJob))
    .all(methodNotAllowed('GET'));
  router
    .route('/api/v1/jobs/:job_id/cancel')
    .post(endpoint(false, cancelJob))
    .all(methodNotAllowed('POST'));
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
  router.all(['/api/v1/sources', '/api/v1/workflows', '/api/v1/destinations', '/api/v1/jobs'], redirect((p) => `${p}/`));
  router.all(['/api/v1/sources/:id/', '/api/v1/workflows/:id/', '/api/v1/destinations/:id/', '/api/v1/jobs/:id/'], redirect((p) => p.slice(0, -1)));

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

/**
 * The resource named by the path id, with its id; undefined once the 422 (malformed id) or 404 (unknown id)
 * has been sent.
 */
function byPathId<T>(call: Call, param: string, found: (id: string) => T | undefined, notFound: string): { id: string; resource: T } | undefined {
  const items: DetailItem[] = [];
  const id = pathId(call, param, items);
  if (items.length > 0) {
    sendValidation(call.res, items);
    return undefined;
  }
  const resource = found(id);
  if (!resource) {
    sendDetail(call.res, 404, notFound);
    return undefined;
  }
  return { id, resource };
}

/** GET of one resource by its path id: 422 for a malformed id, 404 for an unknown one. */
function getById(call: Call, param: string, found: (id: string) => unknown, notFound: string): void {
  const named = byPathId(call, param, found, notFound);
  if (named) call.res.json(structuredClone(named.resource));
}

/**
 * What differs between the two connector collections. Sources have their config trimmed to the fields of
 * their type and validated per type, and deleting one drops its connection check; destination configs are
 * only checked for being objects.
 */
interface ConnectorKind {
  /** The collection's path, `/api/v1/sources/` / `/api/v1/destinations/`. */
  collection: string;
  /** The path parameter, `source_id` / `destination_id`. */
  param: string;
  /** The list filter, `source_type` / `destination_type`. */
  typeQuery: string;
  types: readonly string[];
  /** `source` / `destination`, as the 409 for a duplicate name writes it. */
  noun: string;
  /** `Source` / `Destination`, as the 404 and the delete answer write it. */
  title: string;
  createSchema: z.ZodType<{ name: string; type: string; config: Record<string, unknown> }>;
  store: (ws: WorkspaceState) => Map<string, StoredConnector>;
  view: (connector: StoredConnector) => StoredConnector;
  /** The config to store for this type, or the problems that refuse it. */
  accept: (type: string, config: Record<string, unknown>) => { config: Record<string, unknown>; problems: DetailItem[] };
  deleted?: (ws: WorkspaceState, id: string) => void;
}

const SOURCES: ConnectorKind = {
  collection: '/api/v1/sources/',
  param: 'source_id',
  typeQuery: 'source_type',
  types: SOURCE_TYPES,
  noun: 'source',
  title: 'Source',
  createSchema: CreateSourceSchema,
  store: (ws) => ws.sources,
  view: sourceView,
  accept: (type, config) => {
    const known = knownConfig(type, config);
    return { config: known, problems: configProblems(type, known) };
  },
  deleted: (ws, id) => ws.checks.delete(id),
};

const DESTINATIONS: ConnectorKind = {
  collection: '/api/v1/destinations/',
  param: 'destination_id',
  typeQuery: 'destination_type',
  types: DESTINATION_TYPES,
  noun: 'destination',
  title: 'Destination',
  createSchema: CreateDestinationSchema,
  store: (ws) => ws.destinations,
  view: destinationView,
  accept: (_type, config) => ({ config, problems: [] }),
};

function listConnectors(kind: ConnectorKind, call: Call): void {
  const type = queryParams(call.req).get(kind.typeQuery);
  if (type !== null && !kind.types.includes(type)) {
    sendValidation(call.res, [enumError(['query', kind.typeQuery], kind.types)]);
    return;
  }
  call.res.json([...kind.store(call.ws).values()].filter((c) => type === null || c.type === type).map(kind.view));
}

function createConnector(kind: ConnectorKind, call: Call): void {
  const items: DetailItem[] = [];
  const body = modelBody(call.body, kind.createSchema, items);
  if (!body) {
    sendValidation(call.res, items);
    return;
  }
  const { config, problems } = kind.accept(body.type, body.config);
  if (problems.length > 0) {
    sendValidation(call.res, problems);
    return;
  }
  const store = kind.store(call.ws);
  if (call.ctx.options.uniqueConnectorNames && [...store.values()].some((c) => c.name === body.name)) {
    sendDetail(call.res, 409, `A ${kind.noun} connector named ${body.name} already exists`);
    return;
  }
  const connector: StoredConnector = {
    id: newId(call),
    name: body.name,
    type: body.type,
    config: structuredClone(config),
    created_at: call.now,
    updated_at: null,
  };
  store.set(connector.id, connector);
  call.res.json(kind.view(connector));
}

function getConnector(kind: ConnectorKind, call: Call): void {
  getById(call, kind.param, (id) => {
    const connector = kind.store(call.ws).get(id);
    return connector && kind.view(connector);
  }, `${kind.title} not found`);
}

function updateConnector(kind: ConnectorKind, call: Call): void {
  const items: DetailItem[] = [];
  const id = pathId(call, kind.param, items);
  const body = modelBody(call.body, UpdateSourceSchema, items);
  if (items.length > 0 || !body) {
    sendValidation(call.res, items);
    return;
  }
  const connector = kind.store(call.ws).get(id);
  if (!connector) {
    sendDetail(call.res, 404, `${kind.title} not found`);
    return;
  }
  const { config, problems } = kind.accept(connector.type, body.config);
  if (problems.length > 0) {
    sendValidation(call.res, problems);
    return;
  }
  connector.config = structuredClone(config);
  connector.updated_at = call.now;
  call.res.json(kind.view(connector));
}

function deleteConnector(kind: ConnectorKind, call: Call): void {
  const items: DetailItem[] = [];
  const id = pathId(call, kind.param, items);
  if (items.length > 0) {
    sendValidation(call.res, items);
    return;
  }
  if (!kind.store(call.ws).delete(id)) {
    sendDetail(call.res, 404, `${kind.title} not found`);
    return;
  }
  kind.deleted?.(call.ws, id);
  call.res.json({ detail: `${kind.title} with id ${id} successfully deleted.` });
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
  const body = modelBody(call.body, CreateWorkflowSchema, items);
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
  const body = modelBody(call.body, UpdateWorkflowSchema, items);
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

// ---------------------------------------------------------------------------------------------------------------
// Answers: configs with their defaults

function sourceView(source: StoredConnector): StoredConnector {
  return { ...structuredClone(source), config: withDefaults(SOURCE_CONFIG_DEFAULTS, source.type, source.config) };
}

function destinationView(destination: StoredConnector): StoredConnector {
  return { ...structuredClone(destination), config: withDefaults(DESTINATION_CONFIG_DEFAULTS, destination.type, destination.config) };
}

/** The config less the fields its type does not have, which the service's models drop. */
function knownConfig(type: string, config: Record<string, unknown>): Record<string, unknown> {
  const fields = (SOURCE_CONFIG_FIELDS as Record<string, readonly string[] | undefined>)[type];
  if (!fields) return config;
  return Object.fromEntries(Object.entries(config).filter(([key]) => fields.includes(key)));
}

// ---------------------------------------------------------------------------------------------------------------
// Connection checks

function checkView(check: StoredCheck): Record<string, unknown> {
  const { id, status, reason, created_at, reported_at } = check;
  return { id, status, reason, created_at, reported_at };
}

function createSourceCheck(call: Call): void {
  const named = byPathId(call, 'source_id', (id) => call.ws.sources.get(id), 'Source not found');
  if (!named) return;
  const { id } = named;
  const check: StoredCheck = {
    id: newId(call),
    status: 'SCHEDULED',
    reason: null,
    created_at: call.now,
    reported_at: null,
    sourceId: id,
    dueAt: call.ctx.options.now() + call.ctx.options.checkDelayMs,
  };
  call.ws.checks.set(id, check);
  call.res.status(202).json(checkView(check));
}

function getSourceCheck(call: Call): void {
  const named = byPathId(call, 'source_id', (id) => call.ws.sources.get(id), 'Source not found');
  if (!named) return;
  const { id } = named;
  const check = call.ws.checks.get(id);
  if (!check) {
    sendDetail(call.res, 404, 'No connection check found');
    return;
  }
  settleCheck(call.ctx, call.ws, check);
  call.res.json(checkView(check));
}

// ---------------------------------------------------------------------------------------------------------------
// Runs and jobs

function jobView(call: Call, job: StoredJob): Record<string, unknown> {
  settleJob(call.ctx, call.ws, job);
  const { id, workflow_id, workflow_name, status, created_at, runtime, input_file_ids, output_node_files, job_type } = job;
  return structuredClone({ id, workflow_id, workflow_name, status, created_at, runtime, input_file_ids, output_node_files, job_type });
}

function runWorkflow(call: Call): void {
  const named = byPathId(call, 'workflow_id', (id) => call.ws.workflows.get(id), 'Workflow not found');
  if (!named) return;
  const { id, resource: workflow } = named;
  const running = [...call.ws.jobs.values()].some((j) => {
    settleJob(call.ctx, call.ws, j);
    return j.workflow_id === id && (j.status === 'SCHEDULED' || j.status === 'IN_PROGRESS');
  });
  if (running) {
    call.res.status(202).json({ detail: 'There is a running job in progress. No new job run.' });
    return;
  }
  const job: StoredJob = {
    id: newId(call),
    workflow_id: id,
    workflow_name: workflow.name,
    status: 'SCHEDULED',
    created_at: call.now,
    runtime: null,
    input_file_ids: null,
    output_node_files: null,
    job_type: 'ephemeral',
    startedAt: call.ctx.options.now(),
    failure: null,
  };
  call.ws.jobs.set(job.id, job);
  call.res.status(202).json(jobView(call, job));
}

function listJobs(call: Call): void {
  const q = queryParams(call.req);
  const items: DetailItem[] = [];
  let workflowId: string | null = null;
  const raw = q.get('workflow_id');
  if (raw !== null) {
    workflowId = parseUuid(raw);
    if (workflowId === null) items.push(uuidError(['query', 'workflow_id'], raw));
  }
  if (items.length > 0) {
    sendValidation(call.res, items);
    return;
  }
  // The documentation writes the states in lower case (`completed`, `in progress`); the answers in upper case.
  const status = q.get('status')?.trim().toUpperCase().replace(/\s+/g, '_') ?? null;
  const jobs = [...call.ws.jobs.values()]
    .filter((j) => workflowId === null || j.workflow_id === workflowId)
    .map((j) => jobView(call, j))
    .filter((j) => status === null || j.status === status);
  call.res.json(jobs);
}

function getJob(call: Call): void {
  getById(call, 'job_id', (id) => {
    const job = call.ws.jobs.get(id);
    return job && jobView(call, job);
  }, 'Job not found');
}

function cancelJob(call: Call): void {
  const named = byPathId(call, 'job_id', (id) => call.ws.jobs.get(id), 'Job not found');
  if (!named) return;
  const job = named.resource;
  settleJob(call.ctx, call.ws, job);
  if (job.status === 'SCHEDULED' || job.status === 'IN_PROGRESS') {
    job.status = 'STOPPED';
    job.runtime = isoDuration(call.ctx.options.now() - job.startedAt);
  }
  call.res.json({});
}
