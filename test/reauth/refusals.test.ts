// What any client can send the page, as it sends it: a form body past the limit (with and without the public URL
// as Origin), the wrong content type, a compressed or non-UTF-8 body, a chunked body that does not parse, a body
// cut short by a half-closed connection, and one whose connection is gone mid-body. Each gets the refusal any
// wrong request gets (the same 404 bytes as a wrong link, where the client is still there to read it), is logged
// at warn at most, and leaves the page serving: never a 500, never an error-level line.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { memoryRoundStore } from '../../src/reauth/server.js';
import { pathOf, startPageWorld, type PageWorld } from './world.js';

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses what a socket received: the status, the headers, and the body (by its length, or de-chunked). */
function parseRaw(text: string): RawAnswer {
  const split = text.indexOf('\r\n\r\n');
  if (split < 0) throw new Error(`no complete answer: ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
  const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
  let rest = text.slice(split + 4);
  let body = '';
  if (headers['transfer-encoding'] === 'chunked') {
    for (;;) {
      const eol = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, eol), 16);
      if (!size) break;
      body += rest.slice(eol + 2, eol + 2 + size);
      rest = rest.slice(eol + 2 + size + 2);
    }
  } else {
    body = rest.slice(0, Number(headers['content-length'] ?? rest.length));
  }
  return { status: Number(statusLine?.split(' ')[1]), headers, body };
}

/**
 * Writes `bytes` on a fresh connection to the page; then half-closes (`end`), or resets (`destroy`, after the
 * server has had the bytes), and collects whatever comes back until the server closes.
 */
function rawRequest(world: PageWorld, bytes: string, then: 'end' | 'destroy' | 'wait'): Promise<string> {
  const port = Number(new URL(world.publicUrl).port);
  return new Promise((resolve, reject) => {
    let received = '';
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(bytes, () => {
        if (then === 'end') socket.end();
        // The page has read the headers and part of the body when the request shows up in its log.
        else if (then === 'destroy') void waitForRequest(world).then(() => socket.destroy());
      });
    });
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('close', () => resolve(received));
    socket.on('error', (error) => (then === 'destroy' ? resolve(received) : reject(error)));
  });
}

/**
 * A moment for the page to take the headers and the first bytes of the body before the client resets: what is
 * asserted holds either way, the pause only makes it the mid-body reset it means to be.
 */
async function waitForRequest(_world: PageWorld): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 200));
}

function levels(world: PageWorld): { level: number; event: unknown }[] {
  return world.log.records().map((r) => ({ level: r.level as number, event: r.event }));
}

describe('requests the page cannot use', () => {
  it('oversize, unreadable, malformed, cut short and abandoned requests all get the wrong link\'s 404, logged at warn at most', async () => {
    const world = await startPageWorld();
    const live = await world.mint();
    const wrongPath = `/reauthorize/${randomBytes(32).toString('base64url')}`;
    const plain = await world.http(wrongPath);
    expect(plain.status).toBe(404);
    const form = (extra: string) => `state=${'s'.repeat(43)}&code=${extra}`;
    const origin = { origin: world.publicUrl };
    const post = (target: string, body: string | Buffer, headers: Record<string, string>) =>
      world.http(target, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: body as string });

    // Past the 4 KB form limit, with the page's own Origin, to a wrong link and to a live one, a little and a lot.
    for (const target of [wrongPath, pathOf(live)]) {
      for (const size of [5_000, 300_000]) {
        const answer = await post(target, form('c'.repeat(size)), origin);
        expect(answer.status, `${size} bytes to ${target === wrongPath ? 'a wrong' : 'a live'} link`).toBe(404);
        expect(answer.body).toBe(plain.body);
      }
    }
    // Without the Origin: refused as the same small form without it is.
    const smallNoOrigin = await post(wrongPath, form('c'), {});
    const largeNoOrigin = await post(wrongPath, form('c'.repeat(300_000)), {});
    expect(largeNoOrigin.status).toBe(smallNoOrigin.status);
    expect(largeNoOrigin.body).toBe(smallNoOrigin.body);

    // Another content type, a compressed body, bytes that are not UTF-8.
    const unreadable = [
      await post(pathOf(live), form('c'), { ...origin, 'content-type': 'text/plain' }),
      await post(pathOf(live), 'not really gzip', { ...origin, 'content-encoding': 'gzip' }),
      await world.http(pathOf(live), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...origin }, body: Buffer.from([0x73, 0x74, 0x61, 0x74, 0x65, 0x3d, 0xff, 0xfe, 0xc3]) as unknown as string }),
    ];
    for (const answer of unreadable) {
      expect(answer.status).toBe(404);
      expect(answer.body).toBe(plain.body);
    }

    const port = new URL(world.publicUrl).port;
    const head = (length: string) => `POST ${pathOf(live)} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${world.publicUrl}\r\nContent-Type: application/x-www-form-urlencoded\r\n${length}\r\n`;
    // A chunked body whose framing does not parse, and a body shorter than its Content-Length, the client then
    // closing its side (it still reads): both answered with the same 404 page.
    for (const bytes of [`${head('Transfer-Encoding: chunked')}5\r\nstate\r\nZZ\r\n`, `${head('Content-Length: 100')}state=abc`]) {
      const answer = parseRaw(await rawRequest(world, bytes, 'end'));
      expect(answer.status).toBe(404);
      expect(answer.body).toBe(plain.body);
      expect(answer.headers['content-security-policy']).toBe(plain.headers['content-security-policy']);
      expect(answer.headers['cache-control']).toBe('no-store');
    }
    // A whole request followed by bytes that do not parse: the request is answered as it would be, then the
    // connection closes.
    const followed = parseRaw(await rawRequest(world, `GET ${wrongPath} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n\x01\x02 not http\r\n\r\n`, 'wait'));
    expect(followed.status).toBe(404);
    expect(followed.body).toBe(plain.body);
    // A client that resets its connection mid-body: nobody to answer, and nothing worse than a warning.
    await rawRequest(world, `${head('Content-Length: 100')}state=abc`, 'destroy');
    await rawRequest(world, `${head('Content-Length: 5000000')}${form('c'.repeat(10_000))}`, 'destroy');

    // The page still serves, and nothing was logged above a warning.
    expect((await world.http(pathOf(live))).status).toBe(200);
    const logged = levels(world);
    expect(logged.filter((r) => r.level > 40), JSON.stringify(logged)).toEqual([]);
    expect(logged.map((r) => r.event)).not.toContain('reauth.error');
    expect(logged.map((r) => r.event)).toEqual(expect.arrayContaining(['reauth.form_unreadable', 'reauth.malformed']));
  });
});

describe('HEAD', () => {
  it('on a live link: 200 with the page\'s headers and no body, no round begun, never a refusal; on a wrong link: the 404, counted', async () => {
    const inner = memoryRoundStore();
    let remembered = 0;
    const world = await startPageWorld({ rounds: { remember: async (...args) => { remembered += 1; await inner.remember(...args); }, take: (...args) => inner.take(...args) } });
    const live = pathOf(await world.mint());
    // More than the 20 refusals a client is allowed a minute: none of these is one.
    const heads = [];
    for (let i = 0; i < 30; i += 1) heads.push(await world.http(live, { method: 'HEAD' }));
    expect(remembered).toBe(0);
    const page = await world.http(live);
    expect(page.status).toBe(200);
    expect(remembered).toBe(2);
    for (const head of heads) {
      expect(head.status).toBe(200);
      expect(head.body).toBe('');
      for (const name of ['content-type', 'content-security-policy', 'cache-control', 'referrer-policy', 'x-content-type-options', 'x-frame-options']) {
        expect(head.headers[name], name).toBe(page.headers[name]);
      }
    }
    expect(world.log.records().filter((r) => r.event === 'reauth.page_opened')).toHaveLength(1);

    // A wrong link: the headers of the GET's 404, no body; a guess like any other, so it counts.
    const wrong = `/reauthorize/${randomBytes(32).toString('base64url')}`;
    const get404 = await world.http(wrong);
    const head404 = await world.http(wrong, { method: 'HEAD' });
    expect(head404.status).toBe(404);
    expect(head404.body).toBe('');
    expect(head404.headers['content-security-policy']).toBe(get404.headers['content-security-policy']);
    const statuses = [];
    for (let i = 0; i < 25; i += 1) statuses.push((await world.http(`/reauthorize/${randomBytes(32).toString('base64url')}`, { method: 'HEAD' })).status);
    expect(statuses).toContain(429);
    expect(remembered).toBe(2);
  });
});
