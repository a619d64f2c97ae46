// The sinks (src/publish/sink.ts) through their one interface: the token file, a template and the socket each
// check where they are, name the paths they lock, publish a profile's token and withdraw it, as a list.
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { checkSinks, publishAll, sinkLockRequests, sinksForProfile, SocketSink, TemplateSink, TokenFileSink, withdrawAll, type PublishedToken, type Sink } from '../../src/publish/sink.js';
import { TokenPublisher } from '../../src/publish/publisher.js';
import { TemplateRenderer } from '../../src/publish/template.js';
import { tempDir } from '../helpers/cli.js';

const TOKEN = `sl.u.${'C'.repeat(60)}sink-test-token`;
const log = createLogger({ level: 'silent' as never, destination: { write: () => undefined } });

const closing: Sink[] = [];
afterEach(async () => {
  for (const sink of closing.splice(0)) await sink.close();
});

function tokenFor(profile: string, now = Date.now()): PublishedToken {
  return { profile, accessToken: TOKEN, expiresAt: now + 3_600_000, now };
}

/** GET /v1/token/<profile> over the socket: the status and the body. */
function ask(socket: string, profile: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path: `/v1/token/${profile}`, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the sinks as one list', () => {
  it('each kind publishes a profile\'s token and withdraws it through the interface', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tmpl');
    writeFileSync(source, 'TOKEN={{access_token}}\nPROFILE={{profile}}\n');
    const socketPath = path.join(dir, 's.sock');
    const socket = new SocketSink(socketPath, '--socket');
    const sinks: Sink[] = [
      new TokenFileSink(path.join(dir, '{profile}.token'), '--token-file'),
      new TemplateSink({ source, dest: path.join(dir, '{profile}.env'), mode: 0o600 }, '--template', log),
      socket,
    ];
    closing.push(...sinks);
    expect(sinks.map((sink) => sink.kind)).toEqual(['token file', 'template', 'socket']);
    await checkSinks(sinks, ['a', 'b']);
    await socket.open({ log });

    await publishAll(sinks, tokenFor('a'));
    expect(readFileSync(path.join(dir, 'a.token'), 'utf8')).toBe(TOKEN);
    expect(statSync(path.join(dir, 'a.token')).mode & 0o777).toBe(0o600);
    expect(existsSync(path.join(dir, 'a.token.expires_at'))).toBe(true);
    expect(readFileSync(path.join(dir, 'a.env'), 'utf8')).toBe(`TOKEN=${TOKEN}\nPROFILE=a\n`);
    const served = await ask(socketPath, 'a');
    expect(served.status).toBe(200);
    expect(served.body).toContain(TOKEN);
    expect((await ask(socketPath, 'b')).status).not.toBe(200);

    await withdrawAll(sinks, 'a');
    expect(existsSync(path.join(dir, 'a.token'))).toBe(false);
    expect(existsSync(path.join(dir, 'a.token.expires_at'))).toBe(false);
    // A template stays: it carries the expiry.
    expect(existsSync(path.join(dir, 'a.env'))).toBe(true);
    expect((await ask(socketPath, 'a')).status).not.toBe(200);
  });

  it('each kind refuses where it cannot serve, naming its setting', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tmpl');
    writeFileSync(source, '{{access_token}}');
    const refusal = async (sink: Sink, profiles: string[]): Promise<ValidationError> => {
      const error = await sink.check(profiles).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      return error as ValidationError;
    };
    // Several profiles cannot share one path.
    expect((await refusal(new TokenFileSink(path.join(dir, 'one.token'), 'SYNCAUTH_TOKEN_FILE'), ['a', 'b'])).issues[0]?.field).toBe('SYNCAUTH_TOKEN_FILE');
    expect((await refusal(new TokenFileSink(path.join(dir, 'missing', 'x.token'), '--token-file'), ['a'])).message).toContain('does not exist');
    expect((await refusal(new TemplateSink({ source, dest: path.join(dir, 'one.env'), mode: 0o600 }, '--template', log), ['a', 'b'])).issues[0]?.field).toBe('--template');
    // Something that is not a socket sits at the socket's path.
    mkdirSync(path.join(dir, 'taken'));
    expect((await refusal(new SocketSink(path.join(dir, 'taken'), '--socket'), ['a'])).message).toContain('is not a socket');
  });

  it('the paths to lock are each profile\'s, each once, named by the setting that gave them; placement keeps the kind and its access', () => {
    const sinks: Sink[] = [
      new TokenFileSink('/run/x/{profile}.token', '--token-file', { mode: 0o640, gid: 1234 }),
      new TemplateSink({ source: '/etc/t', dest: '/run/x/{profile}.env', mode: 0o600 }, '--template', log),
      new SocketSink('/run/x/s.sock', '--socket', { gid: 1234 }),
    ];
    expect(sinkLockRequests(sinks, ['a', 'b'])).toEqual([
      { path: '/run/x/a.token', field: '--token-file' },
      { path: '/run/x/b.token', field: '--token-file' },
      { path: '/run/x/a.env', field: '--template' },
      { path: '/run/x/b.env', field: '--template' },
      { path: '/run/x/s.sock', field: '--socket' },
    ]);
    expect(sinks.map((sink) => sink.placement())).toEqual([
      { path: '/run/x/{profile}.token', field: '--token-file', gid: 1234 },
      { path: '/run/x/{profile}.env', field: '--template' },
      { path: '/run/x/s.sock', field: '--socket', gid: 1234 },
    ]);
    const moved = sinks.map((sink) => sink.placedAt(sink.path.replace('/run/x/', '/run/x/syncauth-1000/')));
    expect(moved.map((sink) => [sink.kind, sink.path, sink.field])).toEqual([
      ['token file', '/run/x/syncauth-1000/{profile}.token', '--token-file'],
      ['template', '/run/x/syncauth-1000/{profile}.env', '--template'],
      ['socket', '/run/x/syncauth-1000/s.sock', '--socket'],
    ]);
    expect(moved[0]?.placement().gid).toBe(1234);
  });

  it('a sink that fails does not keep the others from publishing', async () => {
    const dir = tempDir();
    const good = new TokenFileSink(path.join(dir, '{profile}.token'), '--token-file');
    const bad = new TokenFileSink(path.join(dir, 'gone', '{profile}.token'), 'SYNCAUTH_TOKEN_FILE');
    await expect(publishAll([bad, good], tokenFor('a'))).rejects.toThrow();
    expect(readFileSync(path.join(dir, 'a.token'), 'utf8')).toBe(TOKEN);
  });

  it('a profile\'s list: its own token file replaces the shared one, its own templates add to the shared ones', () => {
    const sharedFile = new TokenFileSink('/run/x/{profile}.token', 'tokenFile');
    const sharedTemplate = new TemplateSink({ source: '/etc/t', dest: '/run/x/{profile}.env', mode: 0o600 }, '--template', log);
    const socket = new SocketSink('/run/x/s.sock', '--socket');
    const shared: Sink[] = [sharedFile, sharedTemplate, socket];
    const ownFile = new TokenFileSink('/srv/docs/token', 'profiles.docs.sinks.token_file');
    const ownTemplate = new TemplateSink({ source: '/etc/docs', dest: '/srv/docs/rclone.conf', mode: 0o600 }, 'profiles.docs.sinks.templates', log);

    expect(sinksForProfile(shared)).toEqual(shared);
    expect(sinksForProfile(shared, [ownTemplate])).toEqual([sharedFile, sharedTemplate, socket, ownTemplate]);
    expect(sinksForProfile(shared, [ownFile, ownTemplate])).toEqual([sharedTemplate, socket, ownFile, ownTemplate]);
    // Without a shared token file, its own is its only one.
    expect(sinksForProfile([sharedTemplate], [ownFile])).toEqual([sharedTemplate, ownFile]);
  });

  it('the token file withdraws only what it wrote or claimed, tells when its files were replaced, and adopts what an earlier run left', async () => {
    const dir = tempDir();
    const sink = new TokenFileSink(path.join(dir, '{profile}.token'), '--token-file');
    const file = path.join(dir, 'a.token');
    await sink.publish(tokenFor('a'));
    expect(await sink.intact('a')).toBe(true);
    writeFileSync(`${file}.new`, 'written by someone else', { mode: 0o600 });
    await rename(`${file}.new`, file);
    expect(await sink.intact('a')).toBe(false);
    await sink.withdraw('a');
    // The token file someone replaced stays; its expiry, still the sink's own, goes.
    expect(readFileSync(file, 'utf8')).toBe('written by someone else');
    expect(existsSync(`${file}.expires_at`)).toBe(false);

    // A run after it finds what an earlier one left: adopted, and its own to withdraw.
    const earlier = new TokenFileSink(path.join(dir, '{profile}.token'), '--token-file');
    await earlier.publish(tokenFor('b'));
    const later = new TokenFileSink(path.join(dir, '{profile}.token'), '--token-file');
    expect((await later.adopt('b', { read: true, log }))?.value).toBe(TOKEN);
    expect(await later.intact('b')).toBe(true);
    await later.withdraw('b');
    expect(existsSync(path.join(dir, 'b.token'))).toBe(false);
    // Claimed without reading (a parked profile): its own to withdraw all the same.
    await earlier.publish(tokenFor('c'));
    const parked = new TokenFileSink(path.join(dir, '{profile}.token'), '--token-file');
    expect(await parked.adopt('c', { read: false, log })).toBeUndefined();
    await parked.withdraw('c');
    expect(existsSync(path.join(dir, 'c.token'))).toBe(false);
    expect(existsSync(path.join(dir, 'c.token.expires_at'))).toBe(false);
  });

  it('a template settles once its renders have ended, and tells when its file was replaced', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tmpl');
    writeFileSync(source, 'TOKEN={{access_token}}\n');
    const renderer = new TemplateRenderer([], log);
    const sink = new TemplateSink({ source, dest: path.join(dir, '{profile}.env'), mode: 0o600 }, '--template', log, undefined, { renderer });
    closing.push(sink);
    void sink.publish(tokenFor('a'));
    await sink.settled();
    expect(readFileSync(path.join(dir, 'a.env'), 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
    expect(await sink.intact('a')).toBe(true);
    writeFileSync(path.join(dir, 'a.env.new'), 'edited\n');
    await rename(path.join(dir, 'a.env.new'), path.join(dir, 'a.env'));
    expect(await sink.intact('a')).toBe(false);
    // A shared renderer is its maker's to stop: closing one sink leaves the others rendering.
    await sink.close();
    const other = new TemplateSink({ source, dest: path.join(dir, '{profile}.other'), mode: 0o600 }, '--template', log, undefined, { renderer });
    await other.publish(tokenFor('a'));
    expect(existsSync(path.join(dir, 'a.other'))).toBe(true);
  });

  it('a socket given a source answers from the token held now, whatever was published', async () => {
    const dir = tempDir();
    const held = new Map<string, { value: string; expiresAt: number }>();
    const socketPath = path.join(dir, 's.sock');
    const socket = new SocketSink(socketPath, '--socket', {}, { profiles: () => [...held.keys()], token: (profile) => held.get(profile) });
    closing.push(socket);
    await socket.open({ log });
    await socket.publish(tokenFor('a'));
    expect((await ask(socketPath, 'a')).status).not.toBe(200);
    held.set('a', { value: 'held-now', expiresAt: Date.now() + 3_600_000 });
    expect(await ask(socketPath, 'a')).toEqual({ status: 200, body: 'held-now' });
    await socket.withdraw('a');
    expect((await ask(socketPath, 'a')).body).toBe('held-now');
  });
});

describe('the publisher over each profile\'s list', () => {
  function holder(name: string) {
    return {
      name,
      token: { value: TOKEN, expiresAt: Date.now() + 3_600_000 } as { value: string; expiresAt: number } | undefined,
      removed: false,
      holdsToken: () => true,
      fileChain: Promise.resolve(),
      published: undefined as { value: string; expiresAt: number } | undefined,
      fileFailed: false,
    };
  }

  it('publishes to a profile\'s own token file instead of the shared one, and to its own templates besides the shared ones', async () => {
    const dir = tempDir();
    mkdirSync(path.join(dir, 'docs'));
    const source = path.join(dir, 'env.tmpl');
    writeFileSync(source, 'TOKEN={{access_token}}\n');
    const renderer = new TemplateRenderer([{ source, dest: path.join(dir, '{profile}.env'), mode: 0o600 }], log);
    const own = { tokenFile: path.join(dir, 'docs', 'token'), tokenFileAccess: { mode: 0o640 }, templates: [{ source, dest: path.join(dir, 'docs', 'own.env'), mode: 0o600 }] };
    const publisher = new TokenPublisher({ template: path.join(dir, '{profile}.token'), templates: renderer, profileSinks: new Map([['docs', own]]), now: Date.now, log });
    expect(publisher.listOf('docs').map((sink) => [sink.kind, sink.path])).toEqual([
      ['template', path.join(dir, '{profile}.env')],
      ['token file', path.join(dir, 'docs', 'token')],
      ['template', path.join(dir, 'docs', 'own.env')],
    ]);
    expect(publisher.pathOf('docs')).toBe(path.join(dir, 'docs', 'token'));
    expect(publisher.pathOf('other')).toBe(path.join(dir, 'other.token'));

    const docs = holder('docs');
    const other = holder('other');
    await publisher.publish(docs);
    await publisher.publish(other);
    await publisher.rendersSettled();
    expect(readFileSync(path.join(dir, 'docs', 'token'), 'utf8')).toBe(TOKEN);
    expect(statSync(path.join(dir, 'docs', 'token')).mode & 0o777).toBe(0o640);
    expect(existsSync(path.join(dir, 'docs.token'))).toBe(false);
    expect(readFileSync(path.join(dir, 'docs.env'), 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
    expect(readFileSync(path.join(dir, 'docs', 'own.env'), 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
    expect(readFileSync(path.join(dir, 'other.token'), 'utf8')).toBe(TOKEN);
    expect(existsSync(path.join(dir, 'other.env'))).toBe(true);
    expect([docs.published?.value, other.published?.value]).toEqual([TOKEN, TOKEN]);
    expect(await publisher.intact(docs)).toBe(true);

    await publisher.unpublish(docs);
    expect(existsSync(path.join(dir, 'docs', 'token'))).toBe(false);
    expect(existsSync(path.join(dir, 'docs', 'own.env'))).toBe(true);
    expect(readFileSync(path.join(dir, 'other.token'), 'utf8')).toBe(TOKEN);
    renderer.stop();
    await publisher.close();
  });
});
