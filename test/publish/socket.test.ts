// The token socket: what it serves, to whom (another user is refused by the socket's mode unless given the
// group), and what it does with whatever already sits at its path.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, writeFileSync } from 'node:fs';
import { request, type IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { startTokenSocket, type TokenSocket, type TokenSource } from '../../src/publish/index.js';
import { tempDir } from '../helpers/cli.js';

const NOBODY = 65534;
const TOKEN = `sl.u.${'B'.repeat(60)}socket-test-token`;

const opened: TokenSocket[] = [];
afterEach(async () => {
  for (const socket of opened.splice(0)) await socket.close();
});

function captureLog() {
  const lines: string[] = [];
  return { logger: createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(line) } }), lines };
}

/** A source whose tokens the test sets directly. */
function sourceOf(tokens: Record<string, { value: string; expiresAt: number } | undefined>): TokenSource {
  return { token: (profile) => tokens[profile], profiles: () => Object.keys(tokens) };
}

async function open(file: string, source: TokenSource, options: { mode?: number; gid?: number } = {}) {
  const log = captureLog();
  const socket = await startTokenSocket(file, source, { ...options, log: log.logger });
  opened.push(socket);
  return { socket, log };
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function call(socketPath: string, urlPath: string, method = 'GET'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    // A new connection each time (no keep-alive agent): a request after close() must meet the socket file's absence,
    // not a pooled connection the server has just closed.
    const req = request({ socketPath, path: urlPath, method, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const PROBE = `
const http = require('node:http');
const req = http.request({ socketPath: process.argv[1], path: '/v1/token/docs' }, (res) => {
  let body = '';
  res.setEncoding('utf8').on('data', (d) => (body += d));
  res.on('end', () => process.stdout.write(JSON.stringify({ status: res.statusCode, body })));
});
req.on('error', (error) => process.stdout.write(JSON.stringify({ error: error.code })));
req.end();
`;

/** Asks the socket for the token from a process running as nobody/nogroup. */
function callAsNobody(socketPath: string): Promise<{ status?: number; body?: string; error?: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', PROBE, socketPath], { uid: NOBODY, gid: NOBODY, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('close', () => resolve(JSON.parse(out) as { status?: number; body?: string; error?: string }));
  });
}

function refusal(error: unknown): ValidationError {
  expect(error).toBeInstanceOf(ValidationError);
  return error as ValidationError;
}

describe('the token socket', () => {
  it('serves the token alone as text, or as JSON, never cached', async () => {
    const file = path.join(tempDir(), 'token.sock');
    const expiresAt = Date.now() + 3_600_000;
    const { log } = await open(file, sourceOf({ docs: { value: TOKEN, expiresAt } }));

    const text = await call(file, '/v1/token/docs');
    expect(text.status).toBe(200);
    expect(text.body).toBe(TOKEN);
    expect(text.headers['content-type']).toMatch(/^text\/plain/);
    expect(text.headers['cache-control']).toBe('no-store');

    const json = await call(file, '/v1/token/docs?format=json');
    expect(json.status).toBe(200);
    expect(json.headers['content-type']).toBe('application/json');
    expect(json.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(json.body)).toEqual({ access_token: TOKEN, expires_at: new Date(expiresAt).toISOString(), profile: 'docs' });

    // One profile served: the short path names it.
    expect(await call(file, '/v1/token')).toMatchObject({ status: 200, body: TOKEN });
    expect((await call(file, '/v1/token?format=yaml')).status).toBe(400);
    expect(log.lines.join('')).not.toContain(TOKEN);
  });

  it('answers 404 for a profile it does not serve, 503 without an unexpired token, 405 for other methods', async () => {
    const file = path.join(tempDir(), 'token.sock');
    const tokens: Record<string, { value: string; expiresAt: number } | undefined> = {
      docs: { value: TOKEN, expiresAt: Date.now() - 1 },
      media: undefined,
    };
    await open(file, sourceOf(tokens));

    const unknown = await call(file, '/v1/token/nope');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toContain('docs, media');
    expect(unknown.headers['cache-control']).toBe('no-store');
    // Two profiles: the short path cannot choose.
    const ambiguous = await call(file, '/v1/token');
    expect(ambiguous.status).toBe(404);
    expect(ambiguous.body).toContain('docs, media');
    expect((await call(file, '/metrics')).status).toBe(404);

    const expired = await call(file, '/v1/token/docs');
    expect(expired.status).toBe(503);
    expect(expired.body).not.toContain(TOKEN);
    expect(expired.headers['cache-control']).toBe('no-store');
    expect((await call(file, '/v1/token/media?format=json')).status).toBe(503);

    // Renewed: served at once, from the same source.
    tokens.docs = { value: `${TOKEN}-renewed`, expiresAt: Date.now() + 60_000 };
    expect(await call(file, '/v1/token/docs')).toMatchObject({ status: 200, body: `${TOKEN}-renewed` });

    for (const method of ['POST', 'PUT', 'DELETE']) {
      const reply = await call(file, '/v1/token/docs', method);
      expect(reply.status).toBe(405);
      expect(reply.headers.allow).toBe('GET, HEAD');
      expect(reply.body).not.toContain(TOKEN);
    }
  });

  it('answers 503 with Retry-After while the daemon is still starting its profiles, then serves them', async () => {
    const file = path.join(tempDir(), 'token.sock');
    let starting = true;
    await open(file, { ...sourceOf({ a: { value: TOKEN, expiresAt: Date.now() + 60_000 } }), starting: () => starting });
    const early = await call(file, '/v1/token/a');
    expect(early.status).toBe(503);
    expect(early.headers['retry-after']).toBe('1');
    expect(early.body).toBe('the daemon is starting; try again shortly\n');
    starting = false;
    expect(await call(file, '/v1/token/a')).toMatchObject({ status: 200, body: TOKEN });
  });

  it('is 0600 by default: another user cannot connect', async () => {
    const dir = tempDir();
    chmodSync(dir, 0o755);
    const file = path.join(dir, 'token.sock');
    const previousUmask = process.umask(0);
    try {
      await open(file, sourceOf({ docs: { value: TOKEN, expiresAt: Date.now() + 60_000 } }));
      // The narrow umask was for listen() only.
      expect(process.umask()).toBe(0);
    } finally {
      process.umask(previousUmask);
    }
    const info = lstatSync(file);
    expect(info.isSocket()).toBe(true);
    expect(info.mode & 0o777).toBe(0o600);
    expect(await callAsNobody(file)).toEqual({ error: 'EACCES' });
  });

  it('with mode 0660 and group nogroup, a process of that group can connect', async () => {
    const dir = tempDir();
    chmodSync(dir, 0o755);
    const file = path.join(dir, 'token.sock');
    await open(file, sourceOf({ docs: { value: TOKEN, expiresAt: Date.now() + 60_000 } }), { mode: 0o660, gid: NOBODY });
    const info = lstatSync(file);
    expect(info.mode & 0o777).toBe(0o660);
    expect(info.gid).toBe(NOBODY);
    expect(await callAsNobody(file)).toEqual({ status: 200, body: TOKEN });
  });

  it('replaces a stale socket a killed process left behind', async () => {
    const file = path.join(tempDir(), 'token.sock');
    const killed = spawn(
      process.execPath,
      ['-e', `require('node:net').createServer().listen(process.argv[1], () => process.kill(process.pid, 'SIGKILL'))`, file],
      { stdio: 'ignore' },
    );
    const signal = await new Promise((resolve) => killed.once('exit', (_code, sig) => resolve(sig)));
    expect(signal).toBe('SIGKILL');
    expect(lstatSync(file).isSocket()).toBe(true);

    await open(file, sourceOf({ docs: { value: TOKEN, expiresAt: Date.now() + 60_000 } }));
    expect(await call(file, '/v1/token/docs')).toMatchObject({ status: 200, body: TOKEN });
  });

  it('refuses a path where something still listens, or a file that is not a socket', async () => {
    const dir = tempDir();
    const live = path.join(dir, 'live.sock');
    const other = createServer();
    await new Promise<void>((resolve) => other.listen(live, resolve));
    try {
      const error = refusal(await startTokenSocket(live, sourceOf({}), { log: captureLog().logger }).catch((e: unknown) => e));
      expect(error.issues[0]?.field).toBe('--socket');
      expect(error.message).toContain('another process is listening');
      // Still theirs.
      expect(lstatSync(live).isSocket()).toBe(true);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }

    const plain = path.join(dir, 'plain');
    writeFileSync(plain, 'keep me');
    const error = refusal(await startTokenSocket(plain, sourceOf({}), { log: captureLog().logger }).catch((e: unknown) => e));
    expect(error.issues[0]?.field).toBe('--socket');
    expect(error.message).toContain('not a socket');
    expect(lstatSync(plain).isFile()).toBe(true);

    const missingDir = refusal(
      await startTokenSocket(path.join(dir, 'no', 'such', 'dir.sock'), sourceOf({}), { log: captureLog().logger }).catch((e: unknown) => e),
    );
    expect(missingDir.message).toContain(`--socket: cannot create a socket at ${path.join(dir, 'no', 'such', 'dir.sock')}: its directory does not exist`);
  });

  it('close() stops serving and removes the socket file', async () => {
    const file = path.join(tempDir(), 'token.sock');
    const { socket } = await open(file, sourceOf({ docs: { value: TOKEN, expiresAt: Date.now() + 60_000 } }));
    expect(socket.path).toBe(file);
    await call(file, '/v1/token/docs');
    await socket.close();
    expect(existsSync(file)).toBe(false);
    await expect(call(file, '/v1/token/docs')).rejects.toMatchObject({ code: 'ENOENT' });
    // A second close is harmless (the afterEach closes it again).
    await socket.close();
  });
});
