// The typed source requests, for the type checker only: each `@ts-expect-error` below must be an error and each
// other call must compile, or `npm run typecheck` (part of `npm test`) fails; vitest runs `*.test.ts` only, so
// nothing here runs (as a `*.test-d.ts`, `vitest --typecheck` reports it test by test). client-source-types.test.ts
// checks at run time that the escape hatch sends what it is given and that both paths validate the same way.
import { describe, expectTypeOf, it } from 'vitest';
import type { CreateSourceRequest, ServiceClient, SourceConfig, SourceConfigs, SourceType, UntypedCreateSourceRequest } from '../../src/index.js';
import { typedConfigs } from '../fixtures/source-configs.js';

declare const client: ServiceClient;
declare const type: string;
declare const config: Record<string, unknown>;
const dropbox: SourceConfig<'dropbox'> = { remote_url: 'dropbox://data', token: 'sl.fake-token' };

describe('createSource is typed per connector type', () => {
  it('refuses, at compile time, a misspelt type, a mistyped field, a missing or unknown field', () => {
    // @ts-expect-error 'dropbx' is not one of the 21 types
    void client.createSource({ name: 'd', type: 'dropbx', config: dropbox });
    // @ts-expect-error dropbox's recursive is a boolean
    void client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', token: 't', recursive: 'yes' } });
    // @ts-expect-error dropbox's remote_url is required
    void client.createSource({ name: 'd', type: 'dropbox', config: { token: 't' } });
    // @ts-expect-error remote_path is not a dropbox field
    void client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', remote_path: 'x' } });
    // @ts-expect-error an s3 config is not a dropbox config
    void client.createSource({ name: 'd', type: 'dropbox', config: typedConfigs.s3 });
    // @ts-expect-error postgres' port is a number
    void client.createSource({ name: 'p', type: 'postgres', config: { ...typedConfigs.postgres, port: '5432' } });
    // @ts-expect-error the config is typed by the type named, here dropbox
    void client.updateSource('id', { remote_url: 's3://bucket', anonymous: true }, 'dropbox');
    // @ts-expect-error the typed update needs the type
    void client.updateSource('id', dropbox);
    // @ts-expect-error a string known only at run time needs the escape hatch
    void client.createSource({ name: 'x', type: 'dropbox' as string, config: {} });
  });

  it('accepts a valid config of each type, and the untyped escape hatch for anything', () => {
    void client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', recursive: true, token: 't' } });
    void client.createSource({ name: 'd', type: 'dropbox', config: { remote_url: 'dropbox://data', refresh_token: 'r', app_key: 'k', app_secret: 's' } });
    void client.createSource({ name: 's', type: 's3', config: { remote_url: 's3://bucket/path', anonymous: true } });
    void client.createSource({ name: 'k', type: 'kafka-cloud', config: typedConfigs['kafka-cloud'] });
    void client.createSource({ name: 'g', type: 'google_drive', config: { drive_id: 'd', service_account_key: { id: 'ref', type: 'rsa' } } });
    void client.createSource({ name: 'z', type: 'zendesk', config: { subdomain: 's', email: 'e', api_token: 't', item_type: null } });
    void client.updateSource('id', dropbox, 'dropbox');
    void client.createSourceUntyped({ name: 'x', type, config });
    void client.createSourceUntyped({ name: 'x', type: 'dropbx', config: { anything: 1 } });
    void client.updateSourceUntyped('id', config, type);
    void client.updateSourceUntyped('id', { free: 'form' });
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
