// The library called from JavaScript, where no compiler checks an options object: a name a method does not take
// (`listSources({ type: 'dropbox' })`, the CLI's flag being --type) is refused before anything is sent, naming the
// one meant; and docs/library.md lists every method of the client with the options it takes, kept equal here.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAccessToken, ServiceClient, ValidationError } from '../../src/index.js';
import { CLIENT_OPTIONS } from '../../src/service/options.js';
import { ROOT } from '../helpers/cli.js';

let server: Server;
let baseUrl: string;
let requests = 0;

beforeAll(async () => {
  server = createServer((_req, res) => {
    requests += 1;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('[]');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** What a JavaScript caller may pass: anything. */
type Loose = Record<string, (...args: unknown[]) => Promise<unknown>>;

async function refusal(call: () => Promise<unknown>): Promise<ValidationError> {
  const error = await call().then(() => undefined, (caught: unknown) => caught);
  expect(error).toBeInstanceOf(ValidationError);
  return error as ValidationError;
}

describe('an option a method does not take, from JavaScript', () => {
  it('listSources({ type }) is refused, naming sourceType, and nothing is sent', async () => {
    const client = new ServiceClient({ baseUrl, apiKey: 'k' });
    const before = requests;
    const error = await refusal(() => (client as unknown as Loose).listSources?.({ type: 'dropbox' }) as Promise<unknown>);
    expect(error.message).toBe('listSources: type: is not an option of listSources; did you mean sourceType? (it takes: sourceType, where)');
    expect(error.kind).toBe('bad_input');
    expect(requests).toBe(before);
    // The right one still works.
    expect(await client.listSources({ sourceType: 'dropbox' })).toEqual([]);
    await client.close();
  });

  it('every client method that takes options refuses one it does not take, before sending', async () => {
    const client = new ServiceClient({ baseUrl, apiKey: 'k' }) as unknown as Loose;
    const before = requests;
    for (const method of Object.keys(CLIENT_OPTIONS).filter((m) => m !== 'new ServiceClient')) {
      const fn = client[method] as (...args: unknown[]) => Promise<unknown>;
      // Methods about one source take its id first.
      const args = /SourceConnectionCheck$/.test(method) ? ['src-1', { colour: 'blue' }] : [{ colour: 'blue' }];
      const error = await refusal(() => fn.apply(client, args));
      expect(error.message).toMatch(new RegExp(`^${method}: colour: is not an option of ${method}`));
    }
    expect(requests).toBe(before);
    await (client.close as () => Promise<void>)();
  });

  it('new ServiceClient with a misspelt option, and getAccessToken, are refused alike', async () => {
    expect(() => new ServiceClient({ baseUrl, apiKey: 'k', apikeyHeader: 'x' } as never)).toThrow(/new ServiceClient: apikeyHeader: is not an option of new ServiceClient; did you mean apiKeyHeader\?/);
    const error = await refusal(() => getAccessToken({ profil: 'docs' } as never));
    expect(error.message).toMatch(/^getAccessToken: profil: is not an option of getAccessToken; did you mean profile\?/);
  });
});

describe("docs/library.md's list of the client's methods", () => {
  const doc = readFileSync(path.join(ROOT, 'docs/library.md'), 'utf8');
  const section = /\n## The client's methods\n([\s\S]*?)(\n## |$)/.exec(doc)?.[1] ?? '';
  /** Each table row: the method and the options it names in its second column. */
  const rows = [...section.matchAll(/^\| `([A-Za-z]+)\(([^`]*)\)` \|([^|]*)\|/gm)].map((m) => ({
    method: m[1] as string,
    options: [...(m[3] as string).matchAll(/`([A-Za-z]+)`/g)].map((o) => o[1] as string),
  }));

  it('names every public method of ServiceClient, and no other', () => {
    const methods = Object.getOwnPropertyNames(ServiceClient.prototype).filter((name) => name !== 'constructor').sort();
    expect(methods.length).toBeGreaterThan(20);
    expect(rows.map((r) => r.method).sort()).toEqual(methods);
  });

  it("gives each method's options as the client checks them", () => {
    for (const [method, options] of Object.entries(CLIENT_OPTIONS)) {
      if (method === 'new ServiceClient') continue;
      expect([method, rows.find((r) => r.method === method)?.options.sort()]).toEqual([method, [...options].sort()]);
    }
    const constructorLine = /`new ServiceClient\(options\)`: ([^\n]*)/.exec(section)?.[1] ?? '';
    expect([...constructorLine.matchAll(/`([A-Za-z]+)`/g)].map((o) => o[1]).sort()).toEqual([...(CLIENT_OPTIONS['new ServiceClient'] ?? [])].sort());
  });
});
