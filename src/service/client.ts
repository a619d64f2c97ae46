// The typed client of the ingestion service (SPEC §1). Every input is checked before anything is sent, every
// answer is checked against the response models, and every failure is a ServiceError with a stable code.
import { retryDelay } from '../backoff.js';
import { setTimeout as delay } from 'node:timers/promises';
import * as z from 'zod';
import type { Dispatcher } from 'undici';
import { ExitCode, SyncauthError, ValidationError, fieldName } from '../errors.js';
import type { FieldIssue } from '../errors.js';
import { remedyHint } from '../remedy.js';
import {
  ServiceError,
  errorFromResponse,
  redact,
  withHint,
} from './errors.js';
import type { RequestContext } from './errors.js';
import {
  DEFAULT_API_KEY_HEADER,
  DEFAULT_TIMEOUTS,
  DEFAULT_USER_AGENT,
  Transport,
  checkCredentials,
  networkFailureKind,
  parseRetryAfter,
  resolveServiceEndpoint,
} from './http.js';
import type { HttpMethod, HttpRequest, HttpResponse } from './http.js';
import { JsonArrayReader } from './json-items.js';
import { lazy } from './lazy.js';
import { checkOptions } from './options.js';
import {
  ConnectionCheckSchema,
  DestinationConnectorInformationSchema,
  DestinationTypeSchema,
  JobInformationSchema,
  RUNNING_JOB_STATES,
  SourceConnectorInformationSchema,
  SourceTypeSchema,
  Uuid,
  WorkflowCreateSchema,
  WorkflowInformationSchema,
  WorkflowUpdateSchema,
} from './models.js';
import type {
  ConnectionCheck,
  DestinationConnectorInformation,
  JobInformation,
  SourceConnectorInformation,
  SourceType,
  WorkflowCreate,
  WorkflowInformation,
  WorkflowUpdate,
} from './models.js';
import { isSecretConfigField, validateSourceConfig } from './source-configs.js';
import type { SourceConfig } from './source-configs.js';

export interface ServiceClientOptions {
  /**
   * The service root, e.g. `https://platform.example.com`. A trailing slash or a trailing `/api/v1` is
   * stripped (the docs publish the API root with `/api/v1`, and every path we send starts with it).
   */
  baseUrl: string;
  apiKey: string;
  /** Default `service-api-key`; real deployments call it `unstructured-api-key`. */
  apiKeyHeader?: string;
  /** Tests pass a MockAgent. Without it the client opens one keep-alive pool for the service's origin. */
  dispatcher?: Dispatcher;
  /**
   * Defaults: connect 10 s, response headers 30 s, idle time between body chunks 30 s, and 60 s for the whole
   * of one exchange (a server trickling its answer byte by byte ends there).
   */
  timeouts?: { connectMs?: number; headersMs?: number; bodyMs?: number; totalMs?: number };
  /** Defaults: 4 retries, backoff from 500 ms doubling up to 30 s, full jitter. */
  retry?: { retries?: number; baseDelayMs?: number; maxDelayMs?: number };
  sleep?: (ms: number) => Promise<void>;
  /** Default `syncauth/<version>`. */
  userAgent?: string;
}

/**
 * A source connector to create, its config typed by its type: `{ name, type: 'dropbox', config: { remote_url, … } }`.
 * A misspelt type, a field of the wrong type or a missing required field does not compile.
 */
export type CreateSourceRequest = {
  [T in SourceType]: { name: string; type: T; config: SourceConfig<T> };
}[SourceType];

/**
 * The escape hatch for a type and config known only at run time (read from a file or a command line): any string
 * and any object compile. They are checked at run time exactly as `createSource` checks them.
 */
export interface UntypedCreateSourceRequest {
  name: string;
  type: string;
  config: Record<string, unknown>;
}

export interface ListSourcesFilter {
  /** Sent as the service's `source_type` filter. */
  sourceType?: string;
  /**
   * Which of the connectors listed to keep. Each is read and checked as it arrives, and one this returns false
   * for is dropped at once: a listing of a large workspace is never held whole for the few that matter.
   */
  where?: (source: SourceConnectorInformation) => boolean;
}

/** What `scanSources` checks of each connector listed: what tells one apart, and its config as sent. */
export interface SourceSummary {
  id: string;
  name: string;
  type: string;
  config: Record<string, unknown>;
}

export interface ListWorkflowsFilter {
  /** Sent as the service's `name` filter; only exact matches are returned. */
  name?: string;
}

export interface CreateDestinationRequest {
  name: string;
  type: string;
  config: Record<string, unknown>;
}

export interface ListJobsFilter {
  /** Only the jobs of this workflow (the service's `workflow_id` filter). */
  workflowId?: string;
  /** The service's `status` filter, e.g. `COMPLETED`. */
  status?: string;
}

export interface WaitForCheckOptions {
  /** The check the POST started; an older one the GET may still return is not its result. */
  checkId?: string;
  /** Overall deadline for the wait; default 120 s. */
  timeoutMs?: number;
  /** Longest pause between polls (the first ones are shorter); default 2 s. */
  intervalMs?: number;
  /** Called with every answer, for progress output. */
  onPoll?: (check: ConnectionCheck) => void;
}

/** What a list answer that is not an array is checked against, for the message the other lists give. */
const AnyListSchema = lazy(() => z.array(z.unknown()));

/** What names a connector collection in requests; sources and destinations are read and deleted alike. */
interface ConnectorRoutes<T> {
  kind: 'source' | 'destination';
  /** The path parameter and field name of an id: `source_id` / `destination_id`. */
  param: string;
  /** The collection path, `/api/v1/sources/` / `/api/v1/destinations/`. */
  collection: string;
  /** The list filter's query parameter, `source_type` / `destination_type`. */
  typeQuery: string;
  typeSchema: z.ZodType<string>;
  schema: z.ZodType<T>;
}

const SOURCE_ROUTES: ConnectorRoutes<SourceConnectorInformation> = {
  kind: 'source',
  param: 'source_id',
  collection: '/api/v1/sources/',
  typeQuery: 'source_type',
  typeSchema: SourceTypeSchema,
  schema: SourceConnectorInformationSchema,
};

const DESTINATION_ROUTES: ConnectorRoutes<DestinationConnectorInformation> = {
  kind: 'destination',
  param: 'destination_id',
  collection: '/api/v1/destinations/',
  typeQuery: 'destination_type',
  typeSchema: DestinationTypeSchema,
  schema: DestinationConnectorInformationSchema,
};
const JobListSchema = lazy(() => z.array(JobInformationSchema));
/** A run answered with `{"detail": …}` instead of a job: one is already running (unstructured-python-client#286). */
const RunRefusedSchema = lazy(() => z.looseObject({ detail: z.string() }));
/** A POST whose answer was lost is matched with what the service holds by time; allow for the clocks' skew. */
const CLOCK_SKEW_MS = 120_000;
const WorkflowListSchema = lazy(() => z.array(WorkflowInformationSchema));

/** The service pages workflow lists (default page size 20) without an envelope: a full page may have more after it. */
const WORKFLOW_PAGE_SIZE = 20;
/** A service that ignores `page` and keeps inventing ids must not keep us here forever. */
const MAX_WORKFLOW_PAGES = 500;
const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

interface Operation extends HttpRequest {
  context: RequestContext;
}

export class ServiceClient {
  readonly #transport: Transport;
  readonly #apiKey: string;
  readonly #apiKeyHeader: string;
  readonly #retries: number;
  readonly #baseDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #sleep: (ms: number) => Promise<void>;

  constructor(options: ServiceClientOptions) {
    checkOptions('new ServiceClient', options);
    const endpoint = resolveServiceEndpoint(options.baseUrl);
    this.#apiKeyHeader = options.apiKeyHeader ?? DEFAULT_API_KEY_HEADER;
    checkCredentials(options.apiKey, this.#apiKeyHeader);
    this.#apiKey = options.apiKey;
    this.#retries = nonNegative(options.retry?.retries, 4, 'retry.retries');
    this.#baseDelayMs = nonNegative(options.retry?.baseDelayMs, 500, 'retry.baseDelayMs');
    this.#maxDelayMs = nonNegative(options.retry?.maxDelayMs, 30_000, 'retry.maxDelayMs');
    this.#sleep = options.sleep ?? ((ms) => delay(ms));
    this.#transport = new Transport({
      endpoint,
      apiKey: options.apiKey,
      apiKeyHeader: this.#apiKeyHeader,
      userAgent: options.userAgent ?? DEFAULT_USER_AGENT,
      timeouts: {
        connectMs: nonNegative(options.timeouts?.connectMs, DEFAULT_TIMEOUTS.connectMs, 'timeouts.connectMs'),
        headersMs: nonNegative(options.timeouts?.headersMs, DEFAULT_TIMEOUTS.headersMs, 'timeouts.headersMs'),
        bodyMs: nonNegative(options.timeouts?.bodyMs, DEFAULT_TIMEOUTS.bodyMs, 'timeouts.bodyMs'),
        totalMs: nonNegative(options.timeouts?.totalMs, DEFAULT_TIMEOUTS.totalMs, 'timeouts.totalMs'),
      },
      dispatcher: options.dispatcher,
    });
  }

  // ---- source connectors ----

  /** Creates a source connector; the request is typed per connector type (see `createSourceUntyped`). */
  async createSource(request: CreateSourceRequest): Promise<SourceConnectorInformation> {
    return this.createSourceUntyped(request);
  }

  /** `createSource` for a type and config the compiler cannot know; the same checks run before anything is sent. */
  async createSourceUntyped(request: UntypedCreateSourceRequest): Promise<SourceConnectorInformation> {
    const issues: FieldIssue[] = [];
    if (typeof request.name !== 'string' || request.name.trim() === '') {
      issues.push({ field: 'name', message: 'must not be empty' });
    }
    const checked = validateSourceConfig(request.type, request.config);
    if (!checked.ok) issues.push(...checked.issues);
    if (issues.length > 0) throw new ValidationError(issues);
    const { name, type, config } = request;
    const op = this.#operation('POST', '/api/v1/sources/', '/api/v1/sources/', {
      action: `create the ${type} source connector "${name}"`,
      creatingSourceType: type,
      configType: type,
      secrets: secretValues(config),
      body: { name, type, config },
    });
    return this.#create(op, SourceConnectorInformationSchema, {
      what: `the ${type} source connector "${name}"`,
      listCommand: `syncauth source list`,
      lookup: () => this.findSourceByName(name, type),
    });
  }

  async getSource(id: string): Promise<SourceConnectorInformation> {
    return this.#getConnector(SOURCE_ROUTES, id);
  }

  async listSources(filter: ListSourcesFilter = {}): Promise<SourceConnectorInformation[]> {
    checkOptions('listSources', filter);
    const { where } = filter;
    return this.#listConnectors(SOURCE_ROUTES, filter.sourceType, (item, index) => {
      const source = checkedItem(SourceConnectorInformationSchema, item, index);
      return where === undefined || where(source) ? source : undefined;
    });
  }

  /**
   * The listing read for a few fields of each connector: each is checked only for what `SourceSummary` names
   * as it arrives, and what `pick` makes of it is kept (nothing, when it returns undefined). What `pick` keeps
   * should not be the summary itself, which holds the whole config.
   */
  async scanSources<R>(filter: { sourceType?: string }, pick: (source: SourceSummary) => R | undefined): Promise<R[]> {
    checkOptions('scanSources', filter);
    return this.#listConnectors(SOURCE_ROUTES, filter.sourceType, (item, index) => pick(sourceSummary(item, index)));
  }

  /**
   * The connector called `name` (of `type`, when given). Should the workspace hold several, the newest is
   * the one a previous run of this tool most likely created.
   */
  async findSourceByName(name: string, type?: string): Promise<SourceConnectorInformation | undefined> {
    checkName(name);
    const where = (s: SourceConnectorInformation): boolean => s.name === name && (type === undefined || s.type === type);
    return newest(await this.listSources(type === undefined ? { where } : { sourceType: type, where }));
  }

  /**
   * Full replace of the config (the service cannot change a connector's name or type), typed by the connector's
   * type, which is also checked at run time (see `updateSourceUntyped`).
   */
  async updateSource<T extends SourceType>(id: string, config: SourceConfig<T>, type: T): Promise<SourceConnectorInformation> {
    return this.updateSourceUntyped(id, config, type);
  }

  /**
   * `updateSource` for a config the compiler cannot know. With a type, the config is checked against it as
   * `updateSource` does; without one it is sent as given (the service's generic, untyped config).
   */
  async updateSourceUntyped(id: string, config: Record<string, unknown>, type?: string): Promise<SourceConnectorInformation> {
    const issues = idIssues([['source_id', id]]);
    if (!isPlainObject(config)) issues.push({ field: 'config', message: 'must be a JSON object' });
    else if (type !== undefined) {
      const checked = validateSourceConfig(type, config);
      if (!checked.ok) issues.push(...checked.issues);
    }
    if (issues.length > 0) throw new ValidationError(issues);
    const op = this.#operation('PUT', '/api/v1/sources/{source_id}', `/api/v1/sources/${id}`, {
      action: `update source connector ${id}`,
      resource: { kind: 'source', id },
      configType: type ?? '',
      secrets: secretValues(config),
      body: { config },
    });
    return this.#parse(op, await this.#send(op), SourceConnectorInformationSchema);
  }

  async deleteSource(id: string): Promise<void> {
    await this.#deleteConnector(SOURCE_ROUTES, id);
  }

  // ---- connection checks ----

  /** Starts the service's connection check of a source connector; the answer is usually still SCHEDULED. */
  async checkSourceConnection(id: string): Promise<ConnectionCheck> {
    checkIds([['source_id', id]]);
    const op = this.#operation('POST', '/api/v1/sources/{source_id}/connection-check', `/api/v1/sources/${id}/connection-check`, {
      action: `check the connection of source connector ${id}`,
      resource: { kind: 'source', id },
    });
    const sentAt = Date.now();
    return this.#create(op, ConnectionCheckSchema, {
      what: `a connection check of source connector ${id}`,
      listCommand: `the latest check (syncauth source check ${id})`,
      // A check as recent as this request is the one it started; an older one means it never arrived.
      lookup: async () => {
        const latest = await this.#latestSourceCheck(id);
        return latest && Date.parse(latest.created_at) >= sentAt - CLOCK_SKEW_MS ? latest : undefined;
      },
    });
  }

  /** The latest connection check of a source connector. */
  async getSourceConnectionCheck(id: string): Promise<ConnectionCheck> {
    checkIds([['source_id', id]]);
    const op = this.#operation('GET', '/api/v1/sources/{source_id}/connection-check', `/api/v1/sources/${id}/connection-check`, {
      action: `get the connection check of source connector ${id}`,
      resource: { kind: 'source', id },
    });
    return this.#parse(op, await this.#send(op), ConnectionCheckSchema);
  }

  async #latestSourceCheck(id: string): Promise<ConnectionCheck | undefined> {
    try {
      return await this.getSourceConnectionCheck(id);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'SERVICE_NOT_FOUND' && !err.unsupported) return undefined;
      throw err;
    }
  }

  /**
   * Polls the latest check of the connector until it is no longer SCHEDULED (SUCCESS, FAILURE or a state this
   * client does not know), within an overall deadline measured on the monotonic clock. Each poll is itself bounded
   * by the request deadlines, so the wait can overrun the deadline by at most one request.
   */
  async waitForSourceConnectionCheck(id: string, options: WaitForCheckOptions = {}): Promise<ConnectionCheck> {
    checkOptions('waitForSourceConnectionCheck', options);
    checkIds([['source_id', id]]);
    const timeoutMs = nonNegative(options.timeoutMs, 120_000, 'timeoutMs');
    const intervalMs = nonNegative(options.intervalMs, 2_000, 'intervalMs');
    const deadline = performance.now() + timeoutMs;
    // Quick checks answer quickly: the pause starts short and doubles up to the interval.
    let pause = Math.min(250, intervalMs);
    for (;;) {
      const check = await this.getSourceConnectionCheck(id);
      options.onPoll?.(check);
      const ours = options.checkId === undefined || check.id === options.checkId;
      if (ours && check.status !== 'SCHEDULED') return check;
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new SyncauthError('SERVICE_CHECK_PENDING', `the connection check of source connector ${id} had not finished after ${Math.round(timeoutMs / 1000)} s`, {
          exitCode: ExitCode.error,
          hint: remedyHint({ action: 'run', command: `source check ${id}` }, (command) => `the service may be busy; see the result later with \`${command}\``),
        });
      }
      await this.#sleep(Math.min(pause, left));
      pause = Math.min(pause * 2, intervalMs);
    }
  }

  /** Starts a connection check and waits for its result (see waitForSourceConnectionCheck). */
  async runSourceConnectionCheck(id: string, options: Omit<WaitForCheckOptions, 'checkId'> = {}): Promise<ConnectionCheck> {
    checkOptions('runSourceConnectionCheck', options);
    const started = await this.checkSourceConnection(id);
    options.onPoll?.(started);
    if (started.status !== 'SCHEDULED') return started;
    return this.waitForSourceConnectionCheck(id, { ...options, checkId: started.id });
  }

  // ---- workflows ----

  async createWorkflow(request: WorkflowCreate): Promise<WorkflowInformation> {
    const checked = WorkflowCreateSchema.safeParse(request);
    if (!checked.success) throw new ValidationError(zodIssues(checked.error));
    const op = this.#operation('POST', '/api/v1/workflows/', '/api/v1/workflows/', {
      action: `create the workflow "${request.name}"`,
      body: request,
    });
    return this.#create(op, WorkflowInformationSchema, {
      what: `the workflow "${request.name}"`,
      listCommand: 'the service\'s workflow list',
      lookup: () => this.findWorkflowByName(request.name),
    });
  }

  async getWorkflow(id: string): Promise<WorkflowInformation> {
    checkIds([['workflow_id', id]]);
    const op = this.#operation('GET', '/api/v1/workflows/{workflow_id}', `/api/v1/workflows/${id}`, {
      action: `get workflow ${id}`,
      resource: { kind: 'workflow', id },
    });
    return this.#parse(op, await this.#send(op), WorkflowInformationSchema);
  }

  /** Every workflow (or every one with the given name), following the service's pages. */
  async listWorkflows(filter: ListWorkflowsFilter = {}): Promise<WorkflowInformation[]> {
    checkOptions('listWorkflows', filter);
    if (filter.name !== undefined) checkName(filter.name);
    const found = new Map<string, WorkflowInformation>();
    for (let page = 1; page <= MAX_WORKFLOW_PAGES; page++) {
      const query: Record<string, string> = {};
      if (filter.name !== undefined) query.name = filter.name;
      // The first request leaves paging to the service's defaults, so a deployment without paging still works.
      if (page > 1) query.page = String(page);
      const op = this.#operation('GET', '/api/v1/workflows/', '/api/v1/workflows/', {
        action: 'list workflows',
        query,
      });
      const batch = this.#parse(op, await this.#send(op), WorkflowListSchema);
      let added = 0;
      for (const workflow of batch) {
        if (!found.has(workflow.id)) {
          found.set(workflow.id, workflow);
          added += 1;
        }
      }
      // A short page is the last one; a page of nothing new means the service ignores `page`.
      if (batch.length < WORKFLOW_PAGE_SIZE || added === 0) break;
    }
    const all = [...found.values()];
    return filter.name === undefined ? all : all.filter((w) => w.name === filter.name);
  }

  /** The workflow called `name`; the newest when there are several. */
  async findWorkflowByName(name: string): Promise<WorkflowInformation | undefined> {
    return newest(await this.listWorkflows({ name }));
  }

  /** Sends exactly the given fields: an absent field stays absent, `null` is sent as `null`. */
  async updateWorkflow(id: string, update: WorkflowUpdate): Promise<WorkflowInformation> {
    const issues = idIssues([['workflow_id', id]]);
    const checked = WorkflowUpdateSchema.safeParse(update);
    if (!checked.success) issues.push(...zodIssues(checked.error));
    if (issues.length > 0) throw new ValidationError(issues);
    const op = this.#operation('PUT', '/api/v1/workflows/{workflow_id}', `/api/v1/workflows/${id}`, {
      action: `update workflow ${id}`,
      resource: { kind: 'workflow', id },
      body: update,
    });
    return this.#parse(op, await this.#send(op), WorkflowInformationSchema);
  }

  /**
   * Starts a job for the workflow now. A service that already runs one answers with a `detail` instead of a
   * job; that is a SERVICE_CONFLICT here, naming the job list to look at.
   */
  async runWorkflow(id: string): Promise<JobInformation> {
    checkIds([['workflow_id', id]]);
    // The document's body is an optional multipart form for local files; a remote source takes none.
    const op = this.#operation('POST', '/api/v1/workflows/{workflow_id}/run', `/api/v1/workflows/${id}/run`, {
      action: `run workflow ${id}`,
      resource: { kind: 'workflow', id },
    });
    const sentAt = Date.now();
    const answer = await this.#create(op, z.union([JobInformationSchema, RunRefusedSchema]), {
      what: `a job of workflow ${id}`,
      listCommand: `syncauth jobs list --workflow ${id}`,
      // A job running now is either the one this run started or one that would have refused it.
      lookup: async () => (await this.listJobs({ workflowId: id })).find((job) =>
        RUNNING_JOB_STATES.includes(job.status) || Date.parse(job.created_at) >= sentAt - CLOCK_SKEW_MS),
    });
    if ('workflow_id' in answer) return answer as JobInformation;
    throw new ServiceError('SERVICE_CONFLICT', `the service started no new job for workflow ${id}: ${redact(answer.detail as string, [this.#apiKey])}`, {
      status: 200,
      method: 'POST',
      path: op.context.path,
      detail: answer.detail as string,
      hint: remedyHint({ action: 'run', command: `jobs list --workflow ${id}` }, (command) => `a job of this workflow is probably still running; see \`${command}\``),
    });
  }

  // ---- jobs ----

  async listJobs(filter: ListJobsFilter = {}): Promise<JobInformation[]> {
    checkOptions('listJobs', filter);
    const query: Record<string, string> = {};
    if (filter.workflowId !== undefined) {
      checkIds([['workflow_id', filter.workflowId]]);
      query.workflow_id = filter.workflowId;
    }
    if (filter.status !== undefined) {
      if (filter.status.trim() === '') throw new ValidationError([{ field: 'status', message: 'must not be empty' }]);
      query.status = filter.status;
    }
    const op = this.#operation('GET', '/api/v1/jobs/', '/api/v1/jobs/', { action: 'list jobs', query });
    return this.#parse(op, await this.#send(op), JobListSchema);
  }

  async getJob(id: string): Promise<JobInformation> {
    checkIds([['job_id', id]]);
    const op = this.#operation('GET', '/api/v1/jobs/{job_id}', `/api/v1/jobs/${id}`, {
      action: `get job ${id}`,
      resource: { kind: 'job', id },
    });
    return this.#parse(op, await this.#send(op), JobInformationSchema);
  }

  /** Asks the service to stop the job; what it answers (any JSON) is returned as is. */
  async cancelJob(id: string): Promise<unknown> {
    checkIds([['job_id', id]]);
    const op = this.#operation('POST', '/api/v1/jobs/{job_id}/cancel', `/api/v1/jobs/${id}/cancel`, {
      action: `cancel job ${id}`,
      resource: { kind: 'job', id },
    });
    return this.#create(op, z.unknown(), {
      what: `the cancellation of job ${id}`,
      listCommand: `syncauth jobs show ${id}`,
      // A job that no longer runs needs no second request; one that still runs may be asked again.
      lookup: async () => {
        const job = await this.getJob(id);
        return RUNNING_JOB_STATES.includes(job.status) ? undefined : job;
      },
    });
  }

  // ---- destination connectors ----

  async createDestination(request: CreateDestinationRequest): Promise<DestinationConnectorInformation> {
    const issues: FieldIssue[] = [];
    if (typeof request.name !== 'string' || request.name.trim() === '') issues.push({ field: 'name', message: 'must not be empty' });
    const type = DestinationTypeSchema.safeParse(request.type);
    if (!type.success) issues.push(...zodIssues(type.error, 'type'));
    if (!isPlainObject(request.config)) issues.push({ field: 'config', message: 'must be a JSON object' });
    if (issues.length > 0) throw new ValidationError(issues);
    const { name, config } = request;
    const op = this.#operation('POST', '/api/v1/destinations/', '/api/v1/destinations/', {
      action: `create the ${request.type} destination connector "${name}"`,
      secrets: secretValues(config),
      body: { name, type: request.type, config },
    });
    return this.#create(op, DestinationConnectorInformationSchema, {
      what: `the ${request.type} destination connector "${name}"`,
      listCommand: 'syncauth destination list',
      lookup: async () => newest((await this.listDestinations({ destinationType: request.type }))
        .filter((d) => d.name === name && d.type === request.type)),
    });
  }

  async getDestination(id: string): Promise<DestinationConnectorInformation> {
    return this.#getConnector(DESTINATION_ROUTES, id);
  }

  async listDestinations(filter: { destinationType?: string } = {}): Promise<DestinationConnectorInformation[]> {
    checkOptions('listDestinations', filter);
    return this.#listConnectors(DESTINATION_ROUTES, filter.destinationType, (item, index) => checkedItem(DestinationConnectorInformationSchema, item, index));
  }

  async deleteDestination(id: string): Promise<void> {
    await this.#deleteConnector(DESTINATION_ROUTES, id);
  }

  /** Closes the connection pool this client opened; a dispatcher passed in stays open for its owner. */
  async close(): Promise<void> {
    await this.#transport.close();
  }

  /**
   * Gives up on every request in flight at once (each fails as SERVICE_NETWORK, not retried) and refuses new
   * ones. For an owner whose own deadline passed, or that is stopping; close() still releases the pool.
   */
  cancel(): void {
    this.#transport.cancel();
  }

  // ---- connector plumbing ----

  async #getConnector<T>(routes: ConnectorRoutes<T>, id: string): Promise<T> {
    checkIds([[routes.param, id]]);
    const op = this.#operation('GET', `${routes.collection}{${routes.param}}`, `${routes.collection}${id}`, {
      action: `get ${routes.kind} connector ${id}`,
      resource: { kind: routes.kind, id },
    });
    return this.#parse(op, await this.#send(op), routes.schema);
  }

  /**
   * A connector listing, read item by item as it arrives (the service pages none of them): `read` checks each
   * and returns what to keep of it, or undefined to drop it, or throws ItemIssues. Neither the answer's text
   * nor the whole array is ever held.
   */
  async #listConnectors<T, R>(routes: ConnectorRoutes<T>, typeFilter: string | undefined, read: (item: unknown, index: number) => R | undefined): Promise<R[]> {
    const query: Record<string, string> = {};
    if (typeFilter !== undefined) {
      const type = routes.typeSchema.safeParse(typeFilter);
      if (!type.success) throw new ValidationError(zodIssues(type.error, routes.typeQuery));
      query[routes.typeQuery] = type.data;
    }
    const op = this.#operation('GET', routes.collection, routes.collection, {
      action: `list ${routes.kind} connectors`,
      query,
    });
    // One reader per attempt: an attempt cut off part way leaves nothing behind in the next one's result.
    let attempt: { reader: JsonArrayReader; kept: R[] } | undefined;
    const response = await this.#send(op, undefined, () => {
      const kept: R[] = [];
      const reader = new JsonArrayReader((item, index) => {
        const value = read(item, index);
        if (value !== undefined) kept.push(value);
      });
      attempt = { reader, kept };
      return (chunk) => reader.write(chunk);
    });
    if (!response.streamed || attempt === undefined) return this.#parse(op, response, AnyListSchema).flatMap((item, index) => read(item, index) ?? []);
    let outcome;
    try {
      outcome = attempt.reader.end();
    } catch (error) {
      if (!(error instanceof ItemIssues)) throw error;
      throw this.#badResponse(op, response.status, error.issues, error.item);
    }
    if (outcome.kind === 'array') return attempt.kept;
    // Not an array, or not JSON at all (a login page, a proxy's error): the message any answer would get.
    const text = outcome.kind === 'other' ? outcome.text : '';
    const whole = { ...response, text, json: outcome.kind === 'other' ? parseJsonText(text) : undefined };
    return this.#parse(op, whole, AnyListSchema).flatMap((item, index) => read(item, index) ?? []);
  }

  async #deleteConnector<T>(routes: ConnectorRoutes<T>, id: string): Promise<void> {
    checkIds([[routes.param, id]]);
    const op = this.#operation('DELETE', `${routes.collection}{${routes.param}}`, `${routes.collection}${id}`, {
      action: `delete ${routes.kind} connector ${id}`,
      resource: { kind: routes.kind, id },
    });
    let mayHaveDeleted = false;
    try {
      await this.#send(op, (failure) => {
        if (outcomeUnknown(failure)) mayHaveDeleted = true;
      });
    } catch (err) {
      // An earlier attempt whose answer was lost deleted it; the retry's 404 is that success, seen late.
      if (mayHaveDeleted && err instanceof ServiceError && err.code === 'SERVICE_NOT_FOUND' && !err.unsupported) return;
      throw err;
    }
  }

  // ---- plumbing ----

  #operation(
    method: HttpMethod,
    route: string,
    path: string,
    details: Pick<RequestContext, 'action' | 'resource' | 'creatingSourceType' | 'configType'> & {
      query?: Record<string, string>;
      body?: unknown;
      secrets?: string[];
    },
  ): Operation {
    const { query, body, secrets = [], ...context } = details;
    const request: HttpRequest = { method, path, query, body };
    return {
      ...request,
      context: {
        ...context,
        method,
        route,
        path: this.#transport.target(request),
        apiKeyHeader: this.#apiKeyHeader,
        secrets: [this.#apiKey, ...secrets],
      },
    };
  }

  /** One exchange; a non-2xx answer becomes a ServiceError. `onBody` reads a 2xx answer as it arrives. */
  async #sendOnce(op: Operation, onBody?: () => (chunk: Buffer) => void): Promise<HttpResponse> {
    const response = await this.#transport.send(op, onBody);
    if (response.status >= 200 && response.status < 300) return response;
    const location = response.headers.location;
    throw errorFromResponse(
      {
        status: response.status,
        json: response.json,
        text: response.text,
        retryAfterMs: parseRetryAfter(response.headers['retry-after'], Date.now()),
        location: Array.isArray(location) ? location[0] : location,
      },
      op.context,
    );
  }

  /** GET, PUT and DELETE: the same request twice has the effect of once, so transient failures are retried. */
  async #send(op: Operation, onFailure?: (failure: ServiceError) => void, onBody?: () => (chunk: Buffer) => void): Promise<HttpResponse> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#sendOnce(op, onBody);
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        onFailure?.(err);
        const kind = networkFailureKind(err);
        const retryable = RETRYABLE_STATUS.has(err.status ?? 0) || (kind !== undefined && kind !== 'permanent');
        if (!retryable || attempt >= this.#retries) throw err;
        await this.#sleep(this.#backoff(attempt, err.retryAfterMs));
      }
    }
  }

  /**
   * POST creates a resource each time it arrives, so a failure after the request may have arrived is never
   * answered by sending it again: the resource is looked up by name first, and only its absence allows
   * another attempt. A 429 or a failure to connect means nothing arrived, and is simply retried.
   */
  async #create<T>(
    op: Operation,
    schema: z.ZodType<T>,
    recovery: { what: string; listCommand: string; lookup: () => Promise<T | undefined> },
  ): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let response: HttpResponse;
      try {
        response = await this.#sendOnce(op);
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        const kind = networkFailureKind(err);
        if (err.status === 429 || kind === 'before-sending') {
          if (attempt >= this.#retries) throw err;
          await this.#sleep(this.#backoff(attempt, err.retryAfterMs));
          continue;
        }
        if (!outcomeUnknown(err)) throw err;
        // Give a create still in flight on the service time to land before asking whether it did.
        await this.#sleep(this.#backoff(attempt, err.retryAfterMs));
        let existing: T | undefined;
        try {
          existing = await recovery.lookup();
        } catch {
          throw withHint(
            err,
            `${recovery.what} may have been created anyway, and checking failed: look for it in ${recovery.listCommand} before trying again`,
          );
        }
        if (existing !== undefined) return existing;
        if (attempt >= this.#retries) throw err;
        continue;
      }
      return this.#parse(op, response, schema);
    }
  }

  #parse<T>(op: Operation, response: HttpResponse, schema: z.ZodType<T>): T {
    const { method, route } = op.context;
    if (response.json === undefined) {
      const type = response.headers['content-type'];
      throw new ServiceError(
        'SERVICE_BAD_RESPONSE',
        `the service's answer to ${method} ${route} was not JSON${type ? ` (content-type ${String(type)})` : ''}`,
        {
          status: response.status,
          method,
          path: op.context.path,
          body: response.text,
          hint: 'check that SYNCAUTH_BASE_URL points at the service itself, not at a web page or proxy',
        },
      );
    }
    const parsed = schema.safeParse(response.json);
    if (parsed.success) return parsed.data;
    throw this.#badResponse(op, response.status, zodIssues(parsed.error, 'response'), response.json);
  }

  #badResponse(op: Operation, status: number, issues: FieldIssue[], body: unknown): ServiceError {
    const { method, route } = op.context;
    const shown = issues.slice(0, 5).map((i) => `${i.field}: ${i.message}`).join('; ');
    return new ServiceError(
      'SERVICE_BAD_RESPONSE',
      `the service's answer to ${method} ${route} lacks what this client needs: ${shown}${issues.length > 5 ? '; …' : ''}`,
      {
        status,
        method,
        path: op.context.path,
        body,
        hint: 'the service may run an incompatible version; report this with the service version',
      },
    );
  }

  /** Capped exponential backoff with full jitter; a Retry-After from the service wins, within the same cap. */
  #backoff(attempt: number, retryAfterMs: number | undefined): number {
    const policy = { baseMs: this.#baseDelayMs, maxMs: this.#maxDelayMs, jitter: 'full', retryAfter: 'cap' } as const;
    return retryDelay(policy, attempt + 1, Math.random, retryAfterMs);
  }
}

/** Why an item of a listing cannot be used; the listing's reader turns it into SERVICE_BAD_RESPONSE. */
class ItemIssues extends Error {
  constructor(readonly issues: FieldIssue[], readonly item: unknown) {
    super('an item of the listing lacks what this client needs');
  }
}

/** One item of a listing checked against its model; the fields named as `response[i].field`. */
function checkedItem<T>(schema: z.ZodType<T>, item: unknown, index: number): T {
  const parsed = schema.safeParse(item);
  if (parsed.success) return parsed.data;
  throw new ItemIssues(zodIssues(parsed.error, `response[${index}]`), item);
}

/** A connector of a listing checked only for what SourceSummary names: no copy is made of it. */
function sourceSummary(item: unknown, index: number): SourceSummary {
  if (!isPlainObject(item)) throw new ItemIssues([{ field: `response[${index}]`, message: `Invalid input: expected object, received ${kindOf(item)}` }], item);
  const issues: FieldIssue[] = [];
  for (const field of ['id', 'name', 'type'] as const) {
    if (typeof item[field] !== 'string') issues.push({ field: `response[${index}].${field}`, message: `Invalid input: expected string, received ${kindOf(item[field])}` });
  }
  if (!isPlainObject(item.config)) issues.push({ field: `response[${index}].config`, message: `Invalid input: expected record, received ${kindOf(item.config)}` });
  if (issues.length > 0) throw new ItemIssues(issues, item);
  return item as unknown as SourceSummary;
}

function kindOf(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
}

function parseJsonText(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function outcomeUnknown(err: ServiceError): boolean {
  return networkFailureKind(err) === 'outcome-unknown' || (err.status !== undefined && err.status >= 500);
}

function nonNegative(value: number | undefined, fallback: number, field: string): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) {
    throw new ValidationError([{ field, message: 'must be a finite number, 0 or more' }]);
  }
  return value;
}

function idIssues(ids: [field: string, value: unknown][]): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const [field, value] of ids) {
    const parsed = Uuid.safeParse(value);
    if (!parsed.success) issues.push(...zodIssues(parsed.error, field));
  }
  return issues;
}

function checkIds(ids: [field: string, value: unknown][]): void {
  const issues = idIssues(ids);
  if (issues.length > 0) throw new ValidationError(issues);
}

function checkName(name: unknown): void {
  if (typeof name !== 'string' || name.trim() === '') {
    throw new ValidationError([{ field: 'name', message: 'must not be empty' }]);
  }
}

/** zod issues as field issues; a refused unknown key is named itself rather than its parent. */
function zodIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        issues.push({ field: fieldName([...issue.path, key], prefix), message: 'is not a field of this request' });
      }
    } else {
      issues.push({ field: fieldName(issue.path, prefix), message: issue.message });
    }
  }
  return issues;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** String values of secret fields (the same rule that masks configs for display), so an echo can be masked. */
function secretValues(config: unknown): string[] {
  const out: string[] = [];
  const walk = (value: unknown, secret: boolean): void => {
    if (typeof value === 'string') {
      if (secret) out.push(value, ...urlPassword(value));
    } else if (Array.isArray(value)) {
      for (const item of value) walk(item, secret);
    } else if (isPlainObject(value)) {
      for (const [key, item] of Object.entries(value)) walk(item, secret || isSecretConfigField(key));
    }
  };
  walk(config, false);
  return out;
}

/** The password inside a connection URI, which a service may quote on its own. */
function urlPassword(value: string): string[] {
  try {
    const { password } = new URL(value);
    return password ? [decodeURIComponent(password)] : [];
  } catch {
    return [];
  }
}

function newest<T extends { created_at: string }>(items: T[]): T | undefined {
  let best: T | undefined;
  for (const item of items) {
    if (best === undefined || Date.parse(item.created_at) > Date.parse(best.created_at)) best = item;
  }
  return best;
}
