import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readDotenv, resolveSettings, SECRET_SETTINGS, SETTINGS } from '../../src/config.js';
import { ValidationError } from '../../src/errors.js';

describe('resolveSettings', () => {
  it('takes flags over env over .env over profile over defaults, and records where each came from', () => {
    const { values, sources } = resolveSettings({
      flags: { baseUrl: 'https://flag.example' },
      env: { SYNCAUTH_BASE_URL: 'https://env.example', SYNCAUTH_REMOTE_URL: 'dropbox://env' },
      dotenv: { SYNCAUTH_BASE_URL: 'https://dotenv.example', SYNCAUTH_REMOTE_URL: 'dropbox://dotenv', SYNCAUTH_ACCESS: 'write' },
      profile: { access: 'read-write', workflowId: 'wf-from-profile', remoteUrl: 'dropbox://profile' },
    });
    expect(values.baseUrl).toBe('https://flag.example');
    expect(sources.baseUrl).toBe('flag');
    expect(values.remoteUrl).toBe('dropbox://env');
    expect(sources.remoteUrl).toBe('env');
    expect(values.access).toBe('write');
    expect(sources.access).toBe('dotenv');
    expect(values.workflowId).toBe('wf-from-profile');
    expect(sources.workflowId).toBe('profile');
    expect(values.apiKeyHeader).toBe('service-api-key');
    expect(sources.apiKeyHeader).toBe('default');
    expect(values.renewMargin).toBe(900);
    expect(values.redirectUri).toBe('http://127.0.0.1:53682/callback');
  });

  it('has exactly the environment names of the specification, and those of the sidecar modes', () => {
    const names = Object.values(SETTINGS).map((s) => s.env).sort();
    expect(names).toEqual([
      'SYNCAUTH_ACCESS', 'SYNCAUTH_API_KEY', 'SYNCAUTH_API_KEY_HEADER', 'SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET',
      'SYNCAUTH_AUTHORIZE_URL', 'SYNCAUTH_BASE_URL', 'SYNCAUTH_CONFIG_DIR', 'SYNCAUTH_CONNECTOR_NAME', 'SYNCAUTH_DAEMON_CONFIG',
      'SYNCAUTH_DROPBOX_API_URL', 'SYNCAUTH_GRANT_KEY', 'SYNCAUTH_LISTEN', 'SYNCAUTH_LOG_LEVEL',
      'SYNCAUTH_NOTIFY_CONNECTOR_FAILING_AFTER', 'SYNCAUTH_NOTIFY_FORMAT', 'SYNCAUTH_NOTIFY_SECRET', 'SYNCAUTH_NOTIFY_URL', 'SYNCAUTH_ON_REAUTHORIZED', 'SYNCAUTH_PROFILE', 'SYNCAUTH_PUBLIC_URL', 'SYNCAUTH_REAUTH_LINK_TTL', 'SYNCAUTH_REAUTH_LISTEN', 'SYNCAUTH_RECURSIVE',
      'SYNCAUTH_REDIRECT_URI', 'SYNCAUTH_REDIS_URL', 'SYNCAUTH_REFRESH_TOKEN', 'SYNCAUTH_REMOTE_URL',
      'SYNCAUTH_RENEW_MARGIN', 'SYNCAUTH_SCHEDULE', 'SYNCAUTH_SOCKET', 'SYNCAUTH_STORE', 'SYNCAUTH_STORE_KEY', 'SYNCAUTH_SWEEP',
      'SYNCAUTH_TOKEN_FILE', 'SYNCAUTH_TOKEN_FILE_GROUP', 'SYNCAUTH_TOKEN_FILE_MODE', 'SYNCAUTH_TOKEN_URL', 'SYNCAUTH_WORKFLOW_ID',
    ]);
    expect(SECRET_SETTINGS.sort()).toEqual(['apiKey', 'appKey', 'appSecret', 'grantKey', 'notifySecret', 'refreshToken', 'storeKey']);
  });

  it('refuses a secret given as a flag, naming it but not echoing it', () => {
    try {
      resolveSettings({ flags: { apiKey: 'canary-secret-123' } });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as Error).message).toContain('SYNCAUTH_API_KEY');
      expect((error as Error).message).not.toContain('canary-secret-123');
    }
  });

  it.each([
    ['SYNCAUTH_BASE_URL', 'not a url', 'SYNCAUTH_BASE_URL: must be an absolute http(s) URL'],
    ['SYNCAUTH_BASE_URL', 'ftp://x', 'SYNCAUTH_BASE_URL: must be an http(s) URL'],
    ['SYNCAUTH_RECURSIVE', 'maybe', 'SYNCAUTH_RECURSIVE: must be true or false'],
    ['SYNCAUTH_ACCESS', 'admin', 'SYNCAUTH_ACCESS: must be one of: read, write, read-write'],
    ['SYNCAUTH_SCHEDULE', 'hourly', 'SYNCAUTH_SCHEDULE: must be one of: every 15 minutes'],
    ['SYNCAUTH_RENEW_MARGIN', '-5', 'SYNCAUTH_RENEW_MARGIN: must be a whole number from 1 to 14399'],
    ['SYNCAUTH_LISTEN', 'example.com:9464', 'SYNCAUTH_LISTEN: must be an IP address and port'],
    ['SYNCAUTH_LISTEN', '300.0.0.1:9464', 'SYNCAUTH_LISTEN: must be an IP address and port'],
    ['SYNCAUTH_LISTEN', '0.0.0.0:99999', 'SYNCAUTH_LISTEN: must be an IP address and port'],
    ['SYNCAUTH_REDIRECT_URI', 'https://example.com/cb', 'SYNCAUTH_REDIRECT_URI: must be an http loopback URL'],
    ['SYNCAUTH_PROFILE', '../etc', 'SYNCAUTH_PROFILE: must be 1-64 letters'],
    ['SYNCAUTH_STORE', 'plaintext', 'SYNCAUTH_STORE: must be one of: keychain, file, env'],
    ['SYNCAUTH_API_KEY_HEADER', 'bad header', 'SYNCAUTH_API_KEY_HEADER: must be a valid HTTP header name'],
  ])('refuses %s=%j naming the variable', (name, value, message) => {
    expect(() => resolveSettings({ env: { [name]: value } })).toThrow(message);
  });

  it('collects every bad setting in one error', () => {
    try {
      resolveSettings({ env: { SYNCAUTH_ACCESS: 'x', SYNCAUTH_RECURSIVE: 'y' } });
      expect.unreachable();
    } catch (error) {
      expect((error as ValidationError).issues.map((i) => i.field)).toEqual(['SYNCAUTH_RECURSIVE', 'SYNCAUTH_ACCESS']);
    }
  });

  it('parses values: trailing slash of the base URL dropped, loopback listen split, booleans', () => {
    const { values } = resolveSettings({
      env: { SYNCAUTH_BASE_URL: 'http://127.0.0.1:8765/', SYNCAUTH_LISTEN: 'localhost:9464', SYNCAUTH_RECURSIVE: 'yes' },
    });
    expect(values.baseUrl).toBe('http://127.0.0.1:8765');
    expect(values.listen).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(values.recursive).toBe(true);
    // Health and metrics only: an explicit address outside loopback is allowed, for probes and scrapes.
    expect(resolveSettings({ env: { SYNCAUTH_LISTEN: '0.0.0.0:9464' } }).values.listen).toEqual({ host: '0.0.0.0', port: 9464 });
    expect(resolveSettings({ env: { SYNCAUTH_LISTEN: '[::]:9464' } }).values.listen).toEqual({ host: '::', port: 9464 });
  });
});

describe('readDotenv', () => {
  it('reads .env without touching process.env, and gives {} when there is none', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'syncauth-dotenv-'));
    expect(readDotenv(dir)).toEqual({});
    writeFileSync(path.join(dir, '.env'), 'SYNCAUTH_DOTENV_PROBE=from-file\n# comment\nSYNCAUTH_ACCESS="write"\n');
    expect(readDotenv(dir)).toEqual({ SYNCAUTH_DOTENV_PROBE: 'from-file', SYNCAUTH_ACCESS: 'write' });
    expect(process.env.SYNCAUTH_DOTENV_PROBE).toBeUndefined();
  });
});
