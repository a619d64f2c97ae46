// Test helpers for the OAuth module: a MockAgent that records every request exactly as sent, a free
// loopback port, and a raw HTTP client that can set any Host header.
import { request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import { MockAgent } from 'undici';
import { expect } from 'vitest';
import { OAuthError } from '../../src/oauth/index.js';
import type { MockInterceptor } from 'undici/types/mock-interceptor.js';
import { freePort } from '../helpers/ports.mjs';

export const DROPBOX_API = 'https://api.dropboxapi.com';
export const TOKEN_URL = `${DROPBOX_API}/oauth2/token`;

export interface RecordedRequest {
  method: string;
  path: string;
  /** Lower-cased names. */
  headers: Record<string, string>;
  body: string | undefined;
}

export interface MockReply {
  status: number;
  body?: string | object;
  headers?: Record<string, string>;
  /** Milliseconds before the answer. */
  delayMs?: number;
}

export interface MockDropbox {
  agent: MockAgent;
  requests: RecordedRequest[];
  /** Answers the next request to `path` (any method) with `reply`. */
  on(path: string, reply: MockReply): void;
  /** Fails the next request to `path` at the network level. */
  failNetwork(path: string, error: Error): void;
  close(): Promise<void>;
}

function normalizeHeaders(headers: MockInterceptor.MockResponseCallbackOptions['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (!headers) return out;
  const entries: [string, string][] =
    typeof (headers as { entries?: unknown }).entries === 'function' && !Array.isArray(headers)
      ? [...(headers as unknown as Map<string, string>).entries()]
      : Array.isArray(headers)
        ? pairs(headers as string[])
        : Object.entries(headers as Record<string, string>);
  for (const [k, v] of entries) out[k.toLowerCase()] = String(v);
  return out;
}

function pairs(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] as string, flat[i + 1] as string]);
  return out;
}

/** A MockAgent standing in for Dropbox; nothing ever reaches the network (disableNetConnect). */
export function mockDropbox(origin = DROPBOX_API): MockDropbox {
  const agent = new MockAgent();
  agent.disableNetConnect();
  const pool = agent.get(origin);
  const requests: RecordedRequest[] = [];
  return {
    agent,
    requests,
    on(path, reply) {
      const scope = pool.intercept({ path, method: () => true }).reply((opts) => {
        requests.push({
          method: opts.method,
          path: opts.path,
          headers: normalizeHeaders(opts.headers),
          body: opts.body === undefined || opts.body === null ? undefined : String(opts.body),
        });
        const data = reply.body === undefined ? '' : typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
        const headers =
          reply.headers ?? (typeof reply.body === 'object' ? { 'content-type': 'application/json' } : {});
        return { statusCode: reply.status, data, responseOptions: { headers } };
      });
      if (reply.delayMs !== undefined) scope.delay(reply.delayMs);
    },
    failNetwork(path, error) {
      pool.intercept({ path, method: () => true }).replyWithError(error);
    },
    close: () => agent.close(),
  };
}

/** A free port on 127.0.0.1, never 53682 (the real default): its block lies below the ephemeral range. */
export { freePort };

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request to 127.0.0.1:port with full control of the method, target and Host header. */
export function rawRequest(
  port: number,
  target: string,
  options: { method?: string; host?: string } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path: target,
        method: options.method ?? 'GET',
        agent: false,
        headers: { host: options.host ?? `127.0.0.1:${port}` },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** Serialisations a secret could leak through. */
export function renderings(err: unknown): string[] {
  const e = err as Error & { hint?: string };
  return [String(err), JSON.stringify(err), e.message, e.hint ?? '', e.stack ?? ''];
}

/** The OAuthError a promise rejects with; fails the test when it resolves or rejects with anything else. */
export async function failure(promise: Promise<unknown>): Promise<OAuthError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OAuthError);
  return err as OAuthError;
}
