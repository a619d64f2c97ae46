// The three v2 RPC routes syncauth calls with an access token: revoke, get_current_account, list_folder.
// Errors follow Dropbox's status split: 400 is plain text (never parsed as JSON), 401 an AuthError union to
// branch on by `.tag` (its `error_summary` suffix varies), 409 the route's own error union, 429 a rate limit
// with Retry-After.
import * as z from 'zod';
import { ValidationError } from '../errors.js';
import { OAuthError, reauthorizeHint, scrub } from './errors.js';
import { checkCredential, endpointUrl, headerValue, parseJsonObject, parseRetryAfter, post } from './http.js';
import type { HttpAnswer, TransportOptions } from './http.js';
import { permissionsHint } from './scopes.js';

/** Options of every v2 call. */
export interface ApiCallOptions extends TransportOptions {
  /** The v2 API base, e.g. https://api.dropboxapi.com (the routes start with /2/). */
  apiUrl: string;
  accessToken: string;
  /** Clock in epoch milliseconds, for an HTTP-date Retry-After; default `Date.now`. */
  now?: () => number;
}

/**
 * Revokes the grant behind the access token: Dropbox disables this token, its refresh token and every other
 * access token of that refresh token. An expired access token cannot revoke (OAUTH_EXPIRED_ACCESS_TOKEN):
 * renew it first.
 */
export async function revokeToken(opts: ApiCallOptions): Promise<void> {
  await rpc(opts, '2/auth/token/revoke', undefined);
}

/** The Dropbox account an access token belongs to; needs the `account_info.read` permission. */
export interface DropboxAccount {
  accountId: string;
  email?: string;
  /** The display name. */
  name?: string;
}

const FullAccount = z.object({
  account_id: z.string().min(1),
  email: z.string().optional(),
  name: z.object({ display_name: z.string().optional() }).optional(),
});

/** Who authorized the app (`/2/users/get_current_account`). */
export async function getCurrentAccount(opts: ApiCallOptions): Promise<DropboxAccount> {
  const route = '2/users/get_current_account';
  const body = parseResult(FullAccount, await rpc(opts, route, undefined), route);
  return {
    accountId: body.account_id,
    ...(body.email !== undefined ? { email: body.email } : {}),
    ...(body.name?.display_name !== undefined ? { name: body.name.display_name } : {}),
  };
}

/** One entry of a folder listing; `tag` is Dropbox's `.tag`: `file`, `folder` or `deleted`. */
export interface FolderEntry {
  name: string;
  tag: string;
}

const ListFolderResult = z.object({
  entries: z.array(z.object({ '.tag': z.string(), name: z.string() })),
  has_more: z.boolean().optional(),
});

/**
 * The first page of a folder of the app folder (`/2/files/list_folder`, not recursive); needs
 * `files.metadata.read`. `path` is `''` for the app folder itself and `'/name'` for a subfolder; `'/'` is
 * taken as `''` because Dropbox refuses it. A missing folder fails with OAUTH_PATH_NOT_FOUND.
 */
export async function listFolder(
  opts: ApiCallOptions & { path: string; /** 1..2000; Dropbox's default when omitted. */ limit?: number },
): Promise<{ entries: FolderEntry[]; hasMore: boolean }> {
  const path = normalizeFolderPath(opts.path);
  const route = '2/files/list_folder';
  const arg: Record<string, unknown> = { path, recursive: false };
  if (opts.limit !== undefined) {
    if (!Number.isInteger(opts.limit) || opts.limit < 1 || opts.limit > 2000) {
      throw new ValidationError([{ field: 'limit', message: 'must be a whole number from 1 to 2000' }]);
    }
    arg.limit = opts.limit;
  }
  const body = parseResult(ListFolderResult, await rpc(opts, route, arg, path), route);
  return {
    entries: body.entries.map((entry) => ({ name: entry.name, tag: entry['.tag'] })),
    hasMore: body.has_more ?? false,
  };
}

function normalizeFolderPath(path: string): string {
  if (typeof path !== 'string') throw new ValidationError([{ field: 'path', message: "must be '' or start with '/'" }]);
  const trimmed = path.replace(/\/+$/, '');
  if (trimmed !== '' && !trimmed.startsWith('/')) {
    throw new ValidationError([{ field: 'path', message: "must be '' for the app folder or start with '/', like '/data'" }]);
  }
  return trimmed;
}

/**
 * One POST to `{apiUrl}/{route}`. Void-argument routes get no body and no content type: a JSON content type
 * without a body, or a form type, is refused by Dropbox.
 */
async function rpc(opts: ApiCallOptions, route: string, arg: unknown, folder?: string): Promise<unknown> {
  const base = endpointUrl(opts.apiUrl, 'apiUrl');
  checkCredential(opts.accessToken, 'accessToken');
  const url = new URL(base.toString());
  url.pathname = `${base.pathname.replace(/\/+$/, '')}/${route}`;
  url.search = '';
  const headers: Record<string, string> = { authorization: `Bearer ${opts.accessToken}`, accept: 'application/json' };
  if (arg !== undefined) headers['content-type'] = 'application/json';
  const answer = await post({
    url,
    headers,
    ...(arg !== undefined ? { body: JSON.stringify(arg) } : {}),
    peer: 'the Dropbox API',
    dispatcher: opts.dispatcher,
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
  if (answer.status >= 200 && answer.status <= 299) {
    const text = answer.text.trim();
    if (text === '' || text === 'null') return null;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new OAuthError('OAUTH_BAD_RESPONSE', `the Dropbox API answered /${route} with a body that is not JSON`, {
        status: answer.status,
        hint: 'check that the API URL points at Dropbox (https://api.dropboxapi.com)',
        body: answer.text,
      });
    }
  }
  throw apiError(answer, route, [opts.accessToken], folder, (opts.now ?? Date.now)());
}

function parseResult<T>(schema: z.ZodType<T>, value: unknown, route: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const fields = [...new Set(parsed.error.issues.map((i) => i.path.join('.') || '(body)'))].join(', ');
  throw new OAuthError('OAUTH_BAD_RESPONSE', `the Dropbox API answered /${route} with missing or invalid fields: ${fields}`, {
    hint: 'check that the API URL points at Dropbox (https://api.dropboxapi.com)',
    body: value,
  });
}

function tagOf(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const tag = (value as Record<string, unknown>)['.tag'];
  return typeof tag === 'string' ? tag : undefined;
}

function apiError(answer: HttpAnswer, route: string, secrets: string[], folder: string | undefined, now: number): OAuthError {
  const status = answer.status;
  const where = `/${route}`;
  // 400s are plain text ("Error in call to API function …"); only the other statuses carry JSON.
  const json = status === 400 ? undefined : parseJsonObject(answer.text);
  const error = json?.error;
  const tag = tagOf(error);
  const summary = typeof json?.error_summary === 'string' ? scrub(json.error_summary, secrets) : undefined;
  const base = { status, body: answer.text, ...(tag !== undefined ? { error: tag } : {}), ...(summary !== undefined ? { errorDescription: summary } : {}) };

  if (status === 400) {
    const text = scrub(answer.text, secrets);
    if (/access token is malformed/i.test(text)) {
      return new OAuthError('OAUTH_INVALID_ACCESS_TOKEN', `the Dropbox API refused the access token as malformed (${where})`, {
        ...base,
        errorDescription: text,
        hint: 'the value used is not an access token (an authorization code or refresh token?); renew the access token',
      });
    }
    return new OAuthError('OAUTH_HTTP_ERROR', `the Dropbox API refused the request to ${where} (HTTP 400)${text ? `: ${text}` : ''}`, {
      ...base,
      errorDescription: text || undefined,
      hint: 'this is a bug in syncauth or an API URL that is not Dropbox; please report it with the command used',
    });
  }
  if (status === 401) {
    if (tag === 'expired_access_token') {
      return new OAuthError('OAUTH_EXPIRED_ACCESS_TOKEN', `the access token has expired (${where})`, {
        ...base,
        hint: 'renew the access token (they live 4 hours) and try again',
      });
    }
    if (tag === 'missing_scope') {
      const raw = (error as Record<string, unknown>).required_scope;
      const requiredScope = typeof raw === 'string' ? scrub(raw, secrets) : undefined;
      return new OAuthError(
        'OAUTH_MISSING_SCOPE',
        `the app lacks the Dropbox permission ${requiredScope ?? '(unnamed)'} needed for ${where}`,
        { ...base, ...(requiredScope !== undefined ? { requiredScope } : {}), hint: requiredScope
            ? permissionsHint([requiredScope])
            : "check the app's Permissions tab in the Dropbox App Console, then authorize again" },
      );
    }
    return new OAuthError(
      'OAUTH_INVALID_ACCESS_TOKEN',
      `the Dropbox API refused the access token (${tag ?? 'HTTP 401'}; ${where}): it was revoked, or the app was disconnected from the account`,
      { ...base, hint: reauthorizeHint() },
    );
  }
  if (status === 403) {
    return new OAuthError('OAUTH_ACCESS_FORBIDDEN', `the Dropbox API denied access to ${where} (${tag ?? 'HTTP 403'})`, {
      ...base,
      hint: 'check that the Dropbox app is a scoped App-folder app and the account may use it',
    });
  }
  if (status === 409) {
    const pathError = error !== null && typeof error === 'object' ? (error as Record<string, unknown>).path : undefined;
    if (tag === 'path' && tagOf(pathError) === 'not_found') {
      const name = folder ? `the folder ${scrub(folder, secrets)}` : 'the folder';
      return new OAuthError('OAUTH_PATH_NOT_FOUND', `${name} does not exist in the app folder`, {
        ...base,
        hint: 'create it inside Apps/<app folder> in Dropbox, or fix the remote URL (dropbox://<subfolder>)',
      });
    }
    return new OAuthError('OAUTH_API_ERROR', `the Dropbox API refused ${where}: ${summary ?? tag ?? 'HTTP 409'}`, {
      ...base,
      hint: folder !== undefined ? 'check the remote URL (dropbox://<subfolder>)' : 'check the request',
    });
  }
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], now) ?? bodyRetryAfter(error);
    return new OAuthError('OAUTH_RATE_LIMITED', `the Dropbox API is limiting requests (HTTP 429; ${where})`, {
      ...base,
      retryAfterMs,
      hint: retryAfterMs === undefined ? 'try again later' : `try again in ${Math.ceil(retryAfterMs / 1000)} s`,
    });
  }
  if (status >= 500) {
    return new OAuthError('OAUTH_SERVER_ERROR', `the Dropbox API failed (HTTP ${status}; ${where})`, {
      ...base,
      retryAfterMs: parseRetryAfter(answer.headers['retry-after'], now),
      hint: 'Dropbox had a problem; try again in a few minutes',
    });
  }
  const type = headerValue(answer.headers, 'content-type') ?? 'no content type';
  return new OAuthError('OAUTH_HTTP_ERROR', `the Dropbox API answered ${where} with HTTP ${status} (${scrub(type, secrets)})`, {
    ...base,
    kind: 'configuration',
    hint: 'check that the API URL points at Dropbox (https://api.dropboxapi.com)',
  });
}

/** Dropbox's RateLimitError carries `retry_after` in seconds next to the header. */
function bodyRetryAfter(error: unknown): number | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const seconds = (error as Record<string, unknown>).retry_after;
  return typeof seconds === 'number' && seconds >= 0 ? seconds * 1000 : undefined;
}
