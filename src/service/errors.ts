// The one error class of the service client. Callers branch on `kind` (what to do next), `code` (stable
// strings) and `status`; the message is for people: it names the resource, says what to do next and never
// carries a secret.
import { ExitCode, SyncauthError, fieldName } from '../errors.js';
import type { ErrorKind, FieldIssue } from '../errors.js';
import { redact as redactSecrets } from '../redact.js';
import type { RemedyHint } from '../remedy.js';

export const SERVICE_ERROR_CODES = [
  'SERVICE_BAD_REQUEST',
  'SERVICE_UNAUTHORIZED',
  'SERVICE_FORBIDDEN',
  'SERVICE_NOT_FOUND',
  'SERVICE_METHOD_NOT_ALLOWED',
  'SERVICE_CONFLICT',
  'SERVICE_CONFIG_REFUSED',
  'SERVICE_INVALID_REQUEST',
  'SERVICE_RATE_LIMITED',
  'SERVICE_HTTP_ERROR',
  'SERVICE_UNAVAILABLE',
  'SERVICE_NETWORK',
  'SERVICE_BAD_RESPONSE',
] as const;
export type ServiceErrorCode = (typeof SERVICE_ERROR_CODES)[number];

export interface ServiceErrorOptions {
  status?: number;
  detail?: string;
  issues?: FieldIssue[];
  retryAfterMs?: number;
  /** The deployment has no such route (405, or FastAPI's bare 404 "Not Found"): degrade, do not retry. */
  unsupported?: boolean;
  method?: string;
  path?: string;
  hint?: string | RemedyHint;
  cause?: unknown;
  /** The response body as received; kept off the enumerable properties so loggers never serialise it. */
  body?: unknown;
}

export class ServiceError extends SyncauthError {
  declare readonly code: ServiceErrorCode;
  readonly status: number | undefined;
  readonly detail: string | undefined;
  readonly issues: FieldIssue[] | undefined;
  readonly unsupported: boolean;
  readonly method: string | undefined;
  readonly path: string | undefined;
  declare readonly body: unknown;

  constructor(code: ServiceErrorCode, message: string, options: ServiceErrorOptions = {}) {
    super(code, message, {
      kind: kindFor(code, options.status),
      exitCode: exitCodeFor(code),
      retryAfterMs: options.retryAfterMs,
      hint: options.hint,
      cause: options.cause,
    });
    this.status = options.status;
    this.detail = options.detail === undefined ? undefined : redactSecrets(options.detail);
    this.issues = options.issues;
    this.unsupported = options.unsupported ?? false;
    this.method = options.method;
    this.path = options.path;
    Object.defineProperty(this, 'body', { value: options.body, enumerable: false, writable: false });
  }
}

// No answer, a server error, a timeout or an answer that is not the service's own may pass; any other refusal
// (400, 401, 403, 404 of a route, 409, 412, 422) says the request or the key is wrong, and repeating it is noise.
function kindFor(code: ServiceErrorCode, status: number | undefined): ErrorKind {
  if (status === 429) return 'rate_limited';
  if (status === undefined || status >= 500 || status === 408 || code === 'SERVICE_BAD_RESPONSE') return 'transient';
  return 'configuration';
}

// Exit codes that predate kinds and differ from what the kind gives: gh's 4 for a key to authenticate again,
// and 2 for input the service refused, like our own validation. Every other code exits as its kind says.
function exitCodeFor(code: ServiceErrorCode): ExitCode | undefined {
  switch (code) {
    case 'SERVICE_UNAUTHORIZED':
      return ExitCode.authRequired;
    case 'SERVICE_INVALID_REQUEST':
    case 'SERVICE_CONFIG_REFUSED':
    case 'SERVICE_BAD_REQUEST':
      return ExitCode.usage;
    default:
      return undefined;
  }
}

export function isServiceError(err: unknown, code?: ServiceErrorCode): err is ServiceError {
  return err instanceof ServiceError && (code === undefined || err.code === code);
}

/** FastAPI locations start with where the value came from; users know the field, not the transport slot. */
const LOCATION_ROOTS = new Set(['body', 'path', 'query', 'header', 'cookie']);

/** Renders FastAPI's 422 `detail: [{loc, msg, type}]` as one issue per field. */
export function issuesFromValidationDetail(detail: unknown): FieldIssue[] | undefined {
  if (!Array.isArray(detail)) return undefined;
  const issues: FieldIssue[] = [];
  for (const entry of detail as unknown[]) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { loc, msg } = entry as { loc?: unknown; msg?: unknown };
    const path = Array.isArray(loc)
      ? (loc as unknown[]).filter((p): p is string | number => typeof p === 'string' || typeof p === 'number')
      : [];
    if (typeof path[0] === 'string' && LOCATION_ROOTS.has(path[0])) path.shift();
    issues.push({ field: fieldName(path), message: typeof msg === 'string' ? msg : 'is not valid' });
  }
  return issues;
}

/** Issues to follow a colon: one on the same line, several as a list below it. */
export function renderIssues(issues: readonly FieldIssue[]): string {
  const line = (i: FieldIssue): string => (i.field ? `${i.field}: ${i.message}` : i.message);
  if (issues.length === 1) return ` ${line(issues[0] as FieldIssue)}`;
  return issues.map((i) => `\n  - ${line(i)}`).join('');
}

export type ResourceKind = 'source' | 'workflow' | 'destination' | 'job';

const RESOURCE_NAMES: Record<ResourceKind, string> = {
  source: 'source connector',
  workflow: 'workflow',
  destination: 'destination connector',
  job: 'job',
};

/** What a request was for, so that a failure can be told in the user's terms. */
export interface RequestContext {
  method: string;
  /** The route template, e.g. `/api/v1/sources/{source_id}`. */
  route: string;
  /** The path as sent. */
  path: string;
  /** What the user asked for, completing "could not …", e.g. `update workflow 3fa8…`. */
  action: string;
  resource?: { kind: ResourceKind; id: string };
  /** Set when creating a source connector, whose refusals name the type. */
  creatingSourceType?: string;
  /** Set when the request carries a connector config (create or update); `''` when its type is unknown. */
  configType?: string;
  apiKeyHeader: string;
  /** Values that must not appear in a message even if the service echoes them. */
  secrets: readonly string[];
}

export interface ResponseFacts {
  status: number;
  json: unknown;
  text: string;
  retryAfterMs: number | undefined;
  location: string | undefined;
}

const MAX_DETAIL = 300;

export function errorFromResponse(res: ResponseFacts, ctx: RequestContext): ServiceError {
  const raw = res.json;
  const rawDetail = typeof raw === 'object' && raw !== null ? (raw as { detail?: unknown }).detail : undefined;
  const clean = (text: string): string => redact(text, ctx.secrets);
  let detail: string | undefined;
  if (typeof rawDetail === 'string') detail = clean(rawDetail);
  else if (raw === undefined && res.text.trim() !== '' && !res.text.trimStart().startsWith('<')) {
    // A proxy's plain-text error page is still worth showing; an HTML page is not.
    detail = clean(res.text.replace(/\s+/g, ' ').trim());
  }
  if (detail !== undefined && detail.length > MAX_DETAIL) detail = `${detail.slice(0, MAX_DETAIL)}…`;
  const base = { status: res.status, method: ctx.method, path: ctx.path, body: raw ?? res.text } as const;
  const withDetail = (more: ServiceErrorOptions = {}): ServiceErrorOptions => ({ ...base, detail, ...more });
  const suffix = detail === undefined ? '' : `: ${detail}`;
  const { status } = res;

  if (status >= 300 && status < 400) {
    return new ServiceError('SERVICE_BAD_RESPONSE', `the service redirected ${ctx.method} ${ctx.path} (${status})`, withDetail({
      hint: `set SYNCAUTH_BASE_URL to the address the service redirects to${res.location ? ` (${originOf(res.location)})` : ''}`,
    }));
  }
  if (status === 401) {
    return new ServiceError('SERVICE_UNAUTHORIZED', 'API key missing, malformed or not valid for this workspace', withDetail({
      hint: `check SYNCAUTH_API_KEY and the header name SYNCAUTH_API_KEY_HEADER (now "${ctx.apiKeyHeader}")`,
    }));
  }
  if (status === 403) {
    return new ServiceError('SERVICE_FORBIDDEN', `the service does not allow this API key to ${ctx.action}${suffix}`, withDetail({
      hint: 'check that SYNCAUTH_API_KEY belongs to the workspace that owns the resource',
    }));
  }
  if (status === 404) {
    // FastAPI answers an unknown route with exactly this detail; a missing resource gets a message of its own.
    if (rawDetail === 'Not Found') {
      return new ServiceError(
        'SERVICE_NOT_FOUND',
        `this deployment of the service has no ${ctx.method} ${ctx.route} route (404 Not Found), so it cannot ${ctx.action}`,
        withDetail({ unsupported: true, hint: 'check SYNCAUTH_BASE_URL: it should be the service root, like https://platform.example.com' }),
      );
    }
    if (ctx.resource) {
      const what = RESOURCE_NAMES[ctx.resource.kind];
      return new ServiceError('SERVICE_NOT_FOUND', `${what} ${ctx.resource.id} not found in this workspace`, withDetail({
        hint: `check the id, and that SYNCAUTH_API_KEY belongs to the workspace that has this ${what}`,
      }));
    }
    return new ServiceError('SERVICE_NOT_FOUND', `the service could not ${ctx.action} (404)${suffix}`, withDetail());
  }
  if (status === 405) {
    return new ServiceError(
      'SERVICE_METHOD_NOT_ALLOWED',
      `this deployment of the service does not offer ${ctx.method} ${ctx.route} (405 Method Not Allowed), so it cannot ${ctx.action}`,
      withDetail({ unsupported: true }),
    );
  }
  if (status === 409) {
    return new ServiceError('SERVICE_CONFLICT', `the service could not ${ctx.action} because of a conflict${suffix}`, withDetail());
  }
  if (status === 412 || (status === 500 && ctx.creatingSourceType !== undefined)) {
    const type = ctx.creatingSourceType ?? ctx.configType;
    const config = type ? `${type} config` : 'source connector config';
    return new ServiceError('SERVICE_CONFIG_REFUSED', `the service refused the ${config}: ${detail ?? `status ${status}`}`, withDetail({
      hint: 'fix the config (see the per-type fields in the documentation) and send it again',
    }));
  }
  if (status === 422) {
    const issues = issuesFromValidationDetail(rawDetail)?.map((i) => ({ field: i.field, message: clean(i.message) }));
    const why = issues && issues.length > 0 ? renderIssues(issues) : ` ${detail ?? 'no detail given'}`;
    return new ServiceError('SERVICE_INVALID_REQUEST', `the service refused the request to ${ctx.action}:${why}`, withDetail(
      issues ? { issues } : {},
    ));
  }
  if (status === 429) {
    const wait = res.retryAfterMs === undefined ? '' : `; it asked to wait ${Math.ceil(res.retryAfterMs / 1000)} s`;
    return new ServiceError('SERVICE_RATE_LIMITED', `the service is rate-limiting this API key (429 Too Many Requests)${wait}`, withDetail({
      retryAfterMs: res.retryAfterMs,
      hint: 'wait a minute and try again',
    }));
  }
  if (status >= 500) {
    return new ServiceError('SERVICE_UNAVAILABLE', `the service could not ${ctx.action} (${status})${suffix}`, withDetail({
      retryAfterMs: res.retryAfterMs,
      hint: 'the service is having trouble; try again later',
    }));
  }
  if (status === 400) {
    return new ServiceError('SERVICE_BAD_REQUEST', `the service refused the request to ${ctx.action} (400)${suffix}`, withDetail());
  }
  return new ServiceError('SERVICE_HTTP_ERROR', `the service answered ${status} to ${ctx.method} ${ctx.path}${suffix}`, withDetail());
}

function originOf(location: string): string {
  try {
    return new URL(location).origin;
  } catch {
    return 'see the Location header';
  }
}

/** The process's redaction step, with the secrets of one request added, and credentials in URLs cut out. */
export function redact(text: string, secrets: readonly string[]): string {
  const out = redactSecrets(text, secrets);
  // Credentials inside any URL the service echoes (database URIs and the like).
  return out.replace(/([a-z][a-z0-9+.-]*:\/\/)[^/\s@]+@/gi, '$1[redacted]@');
}

export function withHint(err: ServiceError, hint: string): ServiceError {
  const { status, detail, issues, retryAfterMs, method, path, unsupported, cause, body } = err;
  return new ServiceError(err.code, err.message, {
    status, detail, issues, retryAfterMs, method, path, unsupported, hint, cause, body,
  });
}
