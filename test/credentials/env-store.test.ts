import { inspect } from 'node:util';
import { afterEach, describe, expect, test } from 'vitest';
import { ExitCode, ValidationError } from '../../src/errors.js';
import { isSecretStoreError, openSecretStore, SECRET_ENV } from '../../src/credentials/index.js';
import type { SecretStoreKind } from '../../src/credentials/index.js';

const CANARY = 'canary-2b94c0d1-env-secret';

describe('environment store', () => {
  const saved = process.env.SYNCAUTH_APP_SECRET;
  afterEach(() => {
    if (saved === undefined) delete process.env.SYNCAUTH_APP_SECRET;
    else process.env.SYNCAUTH_APP_SECRET = saved;
  });

  test('reads the four variables for any profile, trimmed, skipping blank ones', async () => {
    const env: NodeJS.ProcessEnv = {
      SYNCAUTH_APP_KEY: ' ak ',
      SYNCAUTH_APP_SECRET: 'as',
      SYNCAUTH_REFRESH_TOKEN: '   ',
      SYNCAUTH_API_KEY: 'api',
      SYNCAUTH_STORE_KEY: 'not a profile secret',
    };
    const store = openSecretStore({ kind: 'env', configDir: '/nonexistent', env });
    expect(store.kind).toBe('env');
    expect(store.writable).toBe(false);
    expect(await store.get('default')).toEqual({ app_key: 'ak', app_secret: 'as', api_key: 'api' });
    expect(await store.get('another.profile')).toEqual({ app_key: 'ak', app_secret: 'as', api_key: 'api' });
    expect(await store.listProfiles()).toEqual([]);

    env.SYNCAUTH_REFRESH_TOKEN = 'rt';
    expect((await store.get('default')).refresh_token).toBe('rt');
    expect(SECRET_ENV).toEqual({
      app_key: 'SYNCAUTH_APP_KEY',
      app_secret: 'SYNCAUTH_APP_SECRET',
      refresh_token: 'SYNCAUTH_REFRESH_TOKEN',
      api_key: 'SYNCAUTH_API_KEY',
    });
  });

  test('keeps no access-token cache: none is read from the environment, and none can be stored', async () => {
    const store = openSecretStore({ kind: 'env', configDir: '/nonexistent', env: { SYNCAUTH_APP_KEY: 'ak', SYNCAUTH_ACCESS_TOKEN: CANARY } });
    expect(await store.get('default')).toEqual({ app_key: 'ak' });
    const error = await store.set('default', { access_token: CANARY }).then(
      () => undefined,
      (caught: unknown) => caught,
    );
    expect(isSecretStoreError(error, 'STORE_READ_ONLY'), String(error)).toBe(true);
    expect(inspect(error)).not.toContain(CANARY);
  });

  test('defaults to process.env, read at call time', async () => {
    const store = openSecretStore({ kind: 'env', configDir: '/nonexistent' });
    delete process.env.SYNCAUTH_APP_SECRET;
    expect((await store.get('default')).app_secret).toBeUndefined();
    process.env.SYNCAUTH_APP_SECRET = 'from-process-env';
    expect((await store.get('default')).app_secret).toBe('from-process-env');
  });

  test('set and delete fail with STORE_READ_ONLY explaining where the secrets come from', async () => {
    const store = openSecretStore({ kind: 'env', configDir: '/nonexistent', env: { SYNCAUTH_REFRESH_TOKEN: CANARY } });
    for (const call of [() => store.set('docs', { refresh_token: CANARY }), () => store.delete('docs')]) {
      const error = await call().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(isSecretStoreError(error, 'STORE_READ_ONLY'), String(error)).toBe(true);
      const storeError = error as Error & { exitCode: number };
      expect(storeError.exitCode).toBe(ExitCode.usage);
      expect(storeError.message).toContain('SYNCAUTH_STORE=env');
      expect(storeError.message).toContain('SYNCAUTH_REFRESH_TOKEN');
      expect(storeError.message).toContain('SYNCAUTH_STORE=file');
      for (const text of [storeError.message, storeError.stack ?? '', JSON.stringify(storeError), inspect(storeError)]) {
        expect(text).not.toContain(CANARY);
      }
    }
    // Still readable afterwards.
    expect(await store.get('docs')).toEqual({ refresh_token: CANARY });
  });

  test('an unknown store kind is a validation error, not a fallback', () => {
    expect(() => openSecretStore({ kind: 'plaintext' as SecretStoreKind, configDir: '/nonexistent' })).toThrow(ValidationError);
  });
});
