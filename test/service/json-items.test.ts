// A listing read as it arrives: the elements of a JSON array, however the body is cut into chunks, each parsed
// on its own; anything that is not a JSON array kept whole for the message any answer would get. And the
// client's listings on it: items dropped as they are read, a bad item named.
import { describe, expect, it } from 'vitest';
import { MockAgent } from 'undici';
import { JsonArrayReader, type JsonArrayOutcome } from '../../src/service/json-items.js';
import { ServiceClient } from '../../src/service/client.js';
import { isServiceError } from '../../src/service/errors.js';

function read(text: string, cut: (bytes: Buffer) => Buffer[] = (b) => [b]): { items: unknown[]; outcome: JsonArrayOutcome } {
  const items: unknown[] = [];
  const reader = new JsonArrayReader((item) => items.push(item));
  for (const chunk of cut(Buffer.from(text, 'utf8'))) reader.write(chunk);
  return { items, outcome: reader.end() };
}

const everyByte = (bytes: Buffer): Buffer[] => [...bytes].map((b) => Buffer.from([b]));

describe('JsonArrayReader', () => {
  const tricky = [
    { id: 'a', name: 'brackets ] } [ { and , commas', config: { nested: [1, [2, { x: '"' }]], s: 'back\\slash\\' } },
    { id: 'b', name: 'ünïcödé — 日本語 🙂', config: {} },
    'a string ]',
    42,
    null,
    [[], {}],
  ];

  it('hands over every element as JSON.parse reads it, whether the body comes whole or a byte at a time', () => {
    const text = ` \n[ ${tricky.map((item) => JSON.stringify(item)).join(' ,\n ')} ]\n `;
    for (const cut of [undefined, everyByte]) {
      const { items, outcome } = read(text, cut);
      expect(items).toEqual(tricky);
      expect(outcome).toEqual({ kind: 'array', count: tricky.length });
    }
  });

  it('reads an empty list as one', () => {
    expect(read('[]')).toEqual({ items: [], outcome: { kind: 'array', count: 0 } });
    expect(read(' [ \n ] ', everyByte)).toEqual({ items: [], outcome: { kind: 'array', count: 0 } });
  });

  it('keeps another JSON value, or a text that is not JSON, whole', () => {
    expect(read('{"items": [1, 2]}', everyByte).outcome).toEqual({ kind: 'other', text: '{"items": [1, 2]}' });
    expect(read('<html>login</html>').outcome).toEqual({ kind: 'other', text: '<html>login</html>' });
    expect(read('').outcome).toEqual({ kind: 'other', text: '' });
  });

  it.each(['[1,]', '[,1]', '[1 2]', '[{"a": 1}', '[1] x', '[1}', '["open'])('calls %s no JSON array', (text) => {
    expect(read(text).outcome).toEqual({ kind: 'invalid' });
    expect(read(text, everyByte).outcome).toEqual({ kind: 'invalid' });
  });

  it('stops at an element its reader refuses, and says why at the end', () => {
    const reader = new JsonArrayReader((item) => {
      if (item === 2) throw new Error('two is refused');
    });
    reader.write(Buffer.from('[1, 2, 3]'));
    expect(() => reader.end()).toThrow('two is refused');
  });
});

describe('the client\'s listings, read item by item', () => {
  const ORIGIN = 'https://platform.example.com';
  const source = (i: number, over: Record<string, unknown> = {}): Record<string, unknown> => ({
    id: `3fa85f64-5717-4562-b3fc-2c963f66a${String(i).padStart(3, '0')}`,
    name: `dropbox-${i}`,
    type: 'dropbox',
    config: { remote_url: `dropbox://f${i}`, app_key: 'k' },
    created_at: '2026-01-01T00:00:00Z',
    ...over,
  });

  function client(body: unknown): ServiceClient {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent.get(ORIGIN).intercept({ path: (p) => p.startsWith('/api/v1/sources/'), method: 'GET' }).reply(200, body as object).persist();
    return new ServiceClient({ baseUrl: ORIGIN, apiKey: 'sk-test', dispatcher: agent, retry: { retries: 0 } });
  }

  it('listSources keeps only what `where` takes, each checked as the model says', async () => {
    const listed = Array.from({ length: 50 }, (_, i) => source(i));
    expect((await client(listed).listSources({ sourceType: 'dropbox', where: (s) => s.name === 'dropbox-7' })).map((s) => s.id)).toEqual([listed[7]?.id]);
    expect(await client(listed).listSources()).toEqual(listed);
  });

  it('scanSources checks only what it reads of each, and names an item that lacks it', async () => {
    const { created_at: _dropped, ...withoutCreatedAt } = source(1);
    expect(await client([source(0), withoutCreatedAt]).scanSources({}, (s) => s.name)).toEqual(['dropbox-0', 'dropbox-1']);
    const error = await client([source(0), { ...source(1), name: 7 }]).scanSources({}, (s) => s.id).catch((e: unknown) => e);
    expect(isServiceError(error, 'SERVICE_BAD_RESPONSE')).toBe(true);
    expect((error as Error).message).toBe("the service's answer to GET /api/v1/sources/ lacks what this client needs: response[1].name: Invalid input: expected string, received number");
  });
});
