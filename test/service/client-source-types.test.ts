// The escape hatch of the typed source requests at run time: it sends what it is given, and both paths validate
// the same way. What the types refuse and accept is checked by the type checker in client-source-types.test-d.ts.
import { MockAgent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceClient, ValidationError } from '../../src/index.js';
import type { SourceConfig } from '../../src/index.js';

const dropbox: SourceConfig<'dropbox'> = { remote_url: 'dropbox://data', token: 'sl.fake-token' };

describe('the escape hatch at run time', () => {
  const agents: MockAgent[] = [];
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
  });
  function client(): { client: ServiceClient; bodies: string[] } {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agents.push(agent);
    const bodies: string[] = [];
    const reply = (opts: { body?: unknown }) => {
      bodies.push(String(opts.body));
      const sent = JSON.parse(String(opts.body)) as { name: string; type: string; config: Record<string, unknown> };
      return { statusCode: 200, data: { id: '3fa85f64-5717-4562-b3fc-2c963f66afa6', created_at: '2024-01-01T00:00:00Z', ...sent } };
    };
    agent.get('http://127.0.0.1:9').intercept({ path: '/api/v1/sources/', method: 'POST' }).reply(reply).persist();
    return { client: new ServiceClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k', dispatcher: agent, retry: { retries: 0 } }), bodies };
  }

  it('createSourceUntyped sends a valid config as given, exactly as createSource does', async () => {
    const { client: c, bodies } = client();
    await c.createSource({ name: 'd', type: 'dropbox', config: dropbox });
    await c.createSourceUntyped({ name: 'd', type: 'dropbox', config: { ...dropbox } });
    expect(bodies).toHaveLength(2);
    expect(bodies[1]).toBe(bodies[0]);
  });

  it('createSourceUntyped still refuses, before sending, what createSource would not compile', async () => {
    const { client: c, bodies } = client();
    const err = await c.createSourceUntyped({ name: 'd', type: 'dropbx', config: { remote_url: 'dropbox://data', recursive: 'yes' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues.map((i) => i.field)).toEqual(['type']);
    const typeErr = await c.createSourceUntyped({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', token: 't', recursive: 'yes' } })
      .catch((e: unknown) => e);
    expect((typeErr as ValidationError).issues.map((i) => i.field)).toEqual(['config.recursive']);
    expect(bodies).toHaveLength(0);
  });
});
