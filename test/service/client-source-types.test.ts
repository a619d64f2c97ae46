// The typed source requests, checked by the type checker (`npm run typecheck` compiles test/): each
// `@ts-expect-error` below must be an error, or the typecheck fails with "Unused '@ts-expect-error' directive".
// The calls never run (they live in a function that is only type-checked); the run-time tests check that the
// escape hatch sends what it is given and that both paths validate the same way.
import { MockAgent } from 'undici';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { ServiceClient, ValidationError } from '../../src/index.js';
import type { CreateSourceRequest, SourceConfig, SourceConfigs, SourceType, UntypedCreateSourceRequest } from '../../src/index.js';
import { typedConfigs } from '../fixtures/source-configs.js';

const dropbox: SourceConfig<'dropbox'> = { remote_url: 'dropbox://data', token: 'sl.fake-token' };

describe('createSource is typed per connector type', () => {
  it('refuses, at compile time, a misspelt type, a mistyped field, a missing or unknown field', () => {
    const typeCheckOnly = async (client: ServiceClient): Promise<void> => {
      // @ts-expect-error 'dropbx' is not one of the 21 types
      await client.createSource({ name: 'd', type: 'dropbx', config: dropbox });
      // @ts-expect-error dropbox's recursive is a boolean
      await client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', token: 't', recursive: 'yes' } });
      // @ts-expect-error dropbox's remote_url is required
      await client.createSource({ name: 'd', type: 'dropbox', config: { token: 't' } });
      // @ts-expect-error remote_path is not a dropbox field
      await client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', remote_path: 'x' } });
      // @ts-expect-error an s3 config is not a dropbox config
      await client.createSource({ name: 'd', type: 'dropbox', config: typedConfigs.s3 });
      // @ts-expect-error postgres' port is a number
      await client.createSource({ name: 'p', type: 'postgres', config: { ...typedConfigs.postgres, port: '5432' } });
      // @ts-expect-error the config is typed by the type named, here dropbox
      await client.updateSource('id', { remote_url: 's3://bucket', anonymous: true }, 'dropbox');
      // @ts-expect-error the typed update needs the type
      await client.updateSource('id', dropbox);
      // @ts-expect-error a string known only at run time needs the escape hatch
      await client.createSource({ name: 'x', type: 'dropbox' as string, config: {} });
    };
    expect(typeof typeCheckOnly).toBe('function');
  });

  it('accepts a valid config of each type, and the untyped escape hatch for anything', () => {
    const typeCheckOnly = async (client: ServiceClient, type: string, config: Record<string, unknown>): Promise<void> => {
      await client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', recursive: true, token: 't' } });
      await client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', refresh_token: 'r', app_key: 'k', app_secret: 's' } });
      await client.createSource({ name: 's', type: 's3', config: { remote_url: 's3://bucket/path', anonymous: true } });
      await client.createSource({ name: 'k', type: 'kafka-cloud', config: typedConfigs['kafka-cloud'] });
      await client.createSource({ name: 'g', type: 'google_drive', config: { drive_id: 'd', service_account_key: { id: 'ref', type: 'rsa' } } });
      await client.createSource({ name: 'z', type: 'zendesk', config: { subdomain: 's', email: 'e', api_token: 't', item_type: null } });
      await client.updateSource('id', dropbox, 'dropbox');
      await client.createSourceUntyped({ name: 'x', type, config });
      await client.createSourceUntyped({ name: 'x', type: 'dropbx', config: { anything: 1 } });
      await client.updateSourceUntyped('id', config, type);
      await client.updateSourceUntyped('id', { free: 'form' });
    };
    expect(typeof typeCheckOnly).toBe('function');
  });

  it('is a union over the 21 types, each config typed from its schema', () => {
    expectTypeOf<CreateSourceRequest['type']>().toEqualTypeOf<SourceType>();
    expectTypeOf<Extract<CreateSourceRequest, { type: 'dropbox' }>['config']>().toEqualTypeOf<SourceConfig<'dropbox'>>();
    expectTypeOf<SourceConfig<'dropbox'>>().toEqualTypeOf<{
      remote_url: string;
      recursive?: boolean | undefined;
      token?: string | undefined;
      refresh_token?: string | undefined;
      app_key?: string | undefined;
      app_secret?: string | undefined;
    }>();
    expectTypeOf<SourceConfig<'postgres'>['port']>().toEqualTypeOf<number>();
    expectTypeOf<SourceConfig<'slack'>['start-date']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<keyof SourceConfigs>().toEqualTypeOf<SourceType>();
    expectTypeOf<UntypedCreateSourceRequest>().toEqualTypeOf<{ name: string; type: string; config: Record<string, unknown> }>();
  });
});

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
