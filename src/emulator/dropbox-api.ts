// The few Dropbox v2 RPC routes syncauth calls: token/revoke, users/get_current_account, files/list_folder.
// Bad input is a 400 with a plain-text explanation, auth failures a 401 JSON AuthError, route errors a 409
// JSON union, as on the real API (dropbox-oauth.md §3.2).
import { createHash } from 'node:crypto';
import type { Request, Response, Router } from 'express';
import express from 'express';
import { bodyText, isoTime, mediaType, type EmulatorContext } from './context.js';
import type { EmulatorApp, Grant, IssuedAccessToken } from './types.js';

const JSON_TYPES = new Set(['application/json', 'text/plain; charset=dropbox-cors-hack']);
const PATH_PATTERN = '(/(.|[\\r\\n])*)?|id:.*|(ns:[0-9]+(/(.|[\\r\\n])*)?)';
const PATH_REGEX = new RegExp(`^(?:${PATH_PATTERN})$`);

interface Authenticated {
  token: IssuedAccessToken;
  grant: Grant;
  app: EmulatorApp;
}

export function dropboxApiRouter(ctx: EmulatorContext): Router {
  const router = express.Router();

  router.post('/2/auth/token/revoke', (req, res) => {
    const auth = authenticate(ctx, req, res, 'auth/token/revoke');
    if (!auth || !voidArgument(req, res, 'auth/token/revoke')) return;
    // Revoking one access token disables its refresh token and every other access token of the grant
    // (spec auth.stone).
    if (auth.grant.revokedAt === null) auth.grant.revokedAt = ctx.options.now();
    res.type('application/json').send('null');
  });

  router.post('/2/users/get_current_account', (req, res) => {
    const auth = authenticate(ctx, req, res, 'users/get_current_account');
    if (!auth || !requireScope(auth, res, 'account_info.read') || !voidArgument(req, res, 'users/get_current_account')) return;
    // The account of the grant the token belongs to: each approval names its own.
    const account = ctx.state.accounts.find((a) => a.accountId === auth.grant.accountId) ?? ctx.state.account;
    const [given = '', surname = ''] = account.displayName.split(' ');
    const namespace = account.uid.slice(0, 10);
    res.json({
      account_id: account.accountId,
      name: {
        given_name: given,
        surname,
        familiar_name: given,
        display_name: account.displayName,
        abbreviated_name: `${given.charAt(0)}${surname.charAt(0)}`,
      },
      email: account.email,
      email_verified: true,
      disabled: false,
      country: 'US',
      locale: 'en',
      referral_link: `https://www.dropbox.com/referrals/${account.accountId.slice(5, 20)}`,
      is_paired: false,
      account_type: { '.tag': 'basic' },
      root_info: { '.tag': 'user', root_namespace_id: namespace, home_namespace_id: namespace },
    });
  });

  router.post('/2/files/list_folder', (req, res) => {
    const fn = 'files/list_folder';
    const auth = authenticate(ctx, req, res, fn);
    if (!auth || !requireScope(auth, res, 'files.metadata.read')) return;
    const arg = jsonArgument(req, res, fn);
    if (arg === undefined) return;
    const bad = (message: string): void => {
      badInput(res, fn, `request body: ${message}`);
    };
    if (arg === null || typeof arg !== 'object' || Array.isArray(arg)) {
      bad(`expected object, got ${stoneType(arg)}`);
      return;
    }
    const { path, recursive } = arg as { path?: unknown; recursive?: unknown };
    if (path === undefined) {
      bad("missing required field 'path'");
      return;
    }
    if (typeof path !== 'string') {
      bad(`path: expected string, got ${stoneType(path)}`);
      return;
    }
    if (path === '/') {
      bad('path: Specify the root folder as an empty string rather than as "/".');
      return;
    }
    if (!PATH_REGEX.test(path)) {
      bad(`path: '${path}' did not match pattern '${PATH_PATTERN}'`);
      return;
    }
    if (recursive !== undefined && typeof recursive !== 'boolean') {
      bad(`recursive: expected boolean, got ${stoneType(recursive)}`);
      return;
    }
    const listing = listFolder(ctx, auth.app, path, recursive === true);
    if (typeof listing === 'string') {
      const dots = listing === 'not_found' ? '..' : '...';
      res.status(409).json({ error_summary: `path/${listing}/${dots}`, error: { '.tag': 'path', path: { '.tag': listing } } });
      return;
    }
    res.json({ entries: listing, cursor: `AA${ctx.gen.text(60)}`, has_more: false });
  });

  // Dropbox answers an unknown RPC route with a plain-text 404.
  router.all('/2/{*rest}', (req, res) => {
    res.status(404).type('text/plain').send(`Unknown API function: "${req.path.slice(3)}"`);
  });

  return router;
}

function badInput(res: Response, fn: string, message: string): void {
  res.status(400).type('text/plain').send(`Error in call to API function "${fn}": ${message}`);
}

function authError(res: Response, summary: string, error: Record<string, string>): void {
  res.status(401).setHeader('WWW-Authenticate', 'Bearer realm="Dropbox-API"');
  res.json({ error_summary: summary, error });
}

function authenticate(ctx: EmulatorContext, req: Request, res: Response, fn: string): Authenticated | null {
  const header = req.headers.authorization;
  if (!header) {
    badInput(res, fn, 'Must provide HTTP header "Authorization" or URL parameter "authorization".');
    return null;
  }
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) {
    // The real message quotes the header back; it may hold a secret, so it is left out here.
    badInput(res, fn, 'Invalid authorization value in HTTP header "Authorization".  Expecting "Bearer <oauth2-access-token>".');
    return null;
  }
  const token = ctx.state.accessTokens.get(m[1] ?? '');
  const grant = token && ctx.state.grants.get(token.grantId);
  const app = grant && ctx.options.apps.find((a) => a.appKey === grant.appKey);
  if (!token || !grant || !app || grant.revokedAt !== null) {
    authError(res, 'invalid_access_token/...', { '.tag': 'invalid_access_token' });
    return null;
  }
  if (token.expiresAt <= ctx.options.now()) {
    authError(res, 'expired_access_token/.', { '.tag': 'expired_access_token' });
    return null;
  }
  return { token, grant, app };
}

function requireScope(auth: Authenticated, res: Response, scope: string): boolean {
  if (auth.token.scopes.includes(scope)) return true;
  authError(res, 'missing_scope/..', { '.tag': 'missing_scope', required_scope: scope });
  return false;
}

/** Void routes take no body or the JSON literal `null`. */
function voidArgument(req: Request, res: Response, fn: string): boolean {
  const text = bodyText(req).trim();
  if (text === '') return true;
  const arg = jsonArgument(req, res, fn);
  if (arg === undefined) return false;
  if (arg !== null) {
    badInput(res, fn, 'request body: expected null, got value');
    return false;
  }
  return true;
}

/** The parsed JSON argument, or undefined after answering 400. */
function jsonArgument(req: Request, res: Response, fn: string): unknown {
  const contentType = (req.headers['content-type'] ?? '').toLowerCase().replace(/\s*;\s*/g, '; ');
  if (mediaType(req) !== 'application/json' && !JSON_TYPES.has(contentType)) {
    badInput(
      res,
      fn,
      `Bad HTTP "Content-Type" header: "${req.headers['content-type'] ?? ''}".  Expecting one of "application/json", "application/json; charset=utf-8", "text/plain; charset=dropbox-cors-hack".`,
    );
    return undefined;
  }
  try {
    return JSON.parse(bodyText(req)) as unknown;
  } catch {
    badInput(res, fn, 'request body: could not decode input as JSON');
    return undefined;
  }
}

function stoneType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'list';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'float';
  if (typeof value === 'object') return 'object';
  return typeof value;
}

interface Node {
  display: string;
  kind: 'folder' | 'file';
}

/** The app folder's tree, keyed by lower-case path: Dropbox paths are case-insensitive. */
function appTree(app: EmulatorApp): Map<string, Node> {
  const tree = new Map<string, Node>();
  for (const [folder, files] of Object.entries(app.folders ?? {})) {
    const parts = folder.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const display = `/${parts.slice(0, i).join('/')}`;
      tree.set(display.toLowerCase(), { display, kind: 'folder' });
    }
    const base = parts.length > 0 ? `/${parts.join('/')}` : '';
    for (const file of files) {
      const display = `${base}/${file}`;
      tree.set(display.toLowerCase(), { display, kind: 'file' });
    }
  }
  return tree;
}

function listFolder(
  ctx: EmulatorContext,
  app: EmulatorApp,
  path: string,
  recursive: boolean,
): Record<string, unknown>[] | 'not_found' | 'not_folder' | 'malformed_path' {
  if (path.startsWith('id:') || path.startsWith('ns:')) return 'not_found';
  if (path.endsWith('/')) return 'malformed_path';
  const tree = appTree(app);
  const lower = path.toLowerCase();
  if (lower !== '') {
    const node = tree.get(lower);
    if (!node) return 'not_found';
    if (node.kind === 'file') return 'not_folder';
  }
  const modified = `${isoTime(ctx.options.now()).slice(0, 19)}Z`;
  const entries: Record<string, unknown>[] = [];
  for (const [key, node] of tree) {
    if (!key.startsWith(`${lower}/`)) continue;
    const rest = key.slice(lower.length + 1);
    if (!recursive && rest.includes('/')) continue;
    const digest = createHash('sha256').update(`${app.appKey}\0${key}`).digest();
    const name = node.display.slice(node.display.lastIndexOf('/') + 1);
    const common = { name, path_lower: key, path_display: node.display, id: `id:${digest.subarray(0, 16).toString('base64url')}` };
    if (node.kind === 'folder') {
      entries.push({ '.tag': 'folder', ...common });
    } else {
      entries.push({
        '.tag': 'file',
        ...common,
        client_modified: modified,
        server_modified: modified,
        rev: digest.subarray(16, 24).toString('hex').replace(/^0/, '1'),
        size: digest.readUInt16BE(24) + 1,
        is_downloadable: true,
        content_hash: digest.toString('hex'),
      });
    }
  }
  return entries;
}
