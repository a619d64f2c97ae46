// Shared steps of the emulator tests: start and stop, drive the OAuth flow over real HTTP, call the service
// and check every answer against the public OpenAPI document.
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, expect } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator } from '../../src/emulator/index.js';
import type { EmulatorOptions, RunningEmulator } from '../../src/emulator/index.js';
import { responseErrors } from '../helpers/openapi.js';

const running: RunningEmulator[] = [];

/** Starts an emulator that is closed after the current test. */
export async function emulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const emu = await startEmulator(options);
  running.push(emu);
  return emu;
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((e) => e.close()));
});

/** A clock the test moves by hand. */
export function manualClock(start = Date.parse('2030-01-01T00:00:00Z')): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

export const REDIRECT = DEFAULT_APP.redirectUris[0] as string;

export function basicAuth(key: string = DEFAULT_APP.appKey, secret: string = DEFAULT_APP.appSecret): string {
  return `Basic ${Buffer.from(`${key}:${secret}`).toString('base64')}`;
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(64).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export function authorizeUrl(emu: RunningEmulator, params: Record<string, string | null> = {}): URL {
  const url = new URL(emu.authorizeUrl);
  const all: Record<string, string | null> = {
    client_id: DEFAULT_APP.appKey,
    response_type: 'code',
    token_access_type: 'offline',
    redirect_uri: REDIRECT,
    state: 'state-123',
    ...params,
  };
  for (const [k, v] of Object.entries(all)) if (v !== null) url.searchParams.set(k, v);
  return url;
}

/** Authorize with `autoApprove` on and return the code from the redirect. */
export async function approvedCode(emu: RunningEmulator, params: Record<string, string | null> = {}): Promise<string> {
  const res = await fetch(authorizeUrl(emu, params), { redirect: 'manual' });
  expect(res.status).toBe(302);
  const code = new URL(res.headers.get('location') ?? '').searchParams.get('code');
  expect(code).toBeTruthy();
  return code as string;
}

export interface TokenAnswer {
  status: number;
  headers: Headers;
  text: string;
  json: Record<string, unknown> | null;
}

export async function postToken(
  emu: RunningEmulator,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<TokenAnswer> {
  const res = await fetch(emu.tokenUrl, { method: 'POST', headers, body: new URLSearchParams(form) });
  const text = await res.text();
  let json: Record<string, unknown> | null;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** The whole happy path: authorize (auto-approved), exchange with Basic auth. */
export async function obtainTokens(
  emu: RunningEmulator,
  params: Record<string, string | null> = {},
): Promise<{ access_token: string; refresh_token?: string; scope: string; expires_in: number }> {
  const code = await approvedCode(emu, params);
  const form: Record<string, string> = { code, grant_type: 'authorization_code' };
  const redirect = params.redirect_uri === undefined ? REDIRECT : params.redirect_uri;
  if (redirect !== null) form.redirect_uri = redirect;
  const answer = await postToken(emu, form, { authorization: basicAuth() });
  expect(answer.status, answer.text).toBe(200);
  return answer.json as { access_token: string; refresh_token?: string; scope: string; expires_in: number };
}

export async function rpc(
  emu: RunningEmulator,
  route: string,
  token: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; text: string; json: unknown }> {
  const h: Record<string, string> = { ...headers };
  if (token !== null) h.authorization = `Bearer ${token}`;
  if (body !== undefined && !h['content-type']) h['content-type'] = 'application/json';
  const res = await fetch(`${emu.apiUrl}/2/${route}`, {
    method: 'POST',
    headers: h,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export interface ServiceAnswer {
  status: number;
  headers: Headers;
  body: unknown;
  text: string;
}

/**
 * One service call. Answers whose status the public document declares for the operation (200, 422) are
 * checked against it; `apiKey: null` sends no key.
 */
export async function call(
  emu: RunningEmulator,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string; apiKey?: string | null; headers?: Record<string, string>; redirect?: 'follow' | 'manual' } = {},
): Promise<ServiceAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  const apiKey = options.apiKey === undefined ? DEFAULT_EMULATOR_API_KEY : options.apiKey;
  if (apiKey !== null) headers[emu.options.apiKeyHeader] = apiKey;
  let payload: string | undefined;
  if (options.rawBody !== undefined) payload = options.rawBody;
  else if (options.body !== undefined) payload = JSON.stringify(options.body);
  if (payload !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(`${emu.url}${path}`, { method, headers, body: payload, redirect: options.redirect ?? 'follow' });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.status === 200 || res.status === 422) {
    const finalPath = new URL(res.url).pathname + new URL(res.url).search;
    expect(responseErrors(method, finalPath, res.status, body), `${method} ${path} -> ${res.status} ${text}`).toEqual([]);
  }
  return { status: res.status, headers: res.headers, body, text };
}

export function detailLocs(answer: ServiceAnswer): unknown[] {
  return ((answer.body as { detail: { loc: unknown[] }[] }).detail ?? []).map((d) => d.loc);
}
