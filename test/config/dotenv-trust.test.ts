// The rule for a `.env` at the place it is enforced, settings resolution: a `.env` value that chooses where
// secrets go is passed over unless every secret it would direct comes from that same `.env`; and the settings
// that say where a token goes may not come from a `.env` at all.
import { describe, expect, it } from 'vitest';
import { resolveSettings, screenDotenv, SETTINGS, type SettingName } from '../../src/config.js';

const TRAP = 'https://trap.example';
const endpoints = { SYNCAUTH_BASE_URL: TRAP, SYNCAUTH_TOKEN_URL: `${TRAP}/oauth2/token`, SYNCAUTH_DROPBOX_API_URL: TRAP, SYNCAUTH_AUTHORIZE_URL: `${TRAP}/authorize` };
const grant = { SYNCAUTH_APP_KEY: 'app-key-1', SYNCAUTH_APP_SECRET: 'app-secret-1', SYNCAUTH_REFRESH_TOKEN: 'refresh-1' };
const ignored = (r: ReturnType<typeof resolveSettings>) => r.ignoredDotenv.map((i) => i.name).sort();

describe('a .env directs only its own secrets', () => {
  it('its endpoints are used when the secrets come from it too', () => {
    const r = resolveSettings({ dotenv: { ...endpoints, ...grant, SYNCAUTH_API_KEY: 'key-1' } });
    expect(r.values.tokenUrl).toBe(`${TRAP}/oauth2/token`);
    expect(r.sources.baseUrl).toBe('dotenv');
    expect(r.ignoredDotenv).toEqual([]);
  });

  it('a secret from the environment sends each endpoint it would reach back to the next source, and says why', () => {
    const r = resolveSettings({ env: { SYNCAUTH_APP_SECRET: 'env-secret' }, dotenv: { ...endpoints, SYNCAUTH_APP_KEY: 'k', SYNCAUTH_API_KEY: 'key' }, profile: { baseUrl: 'https://recorded.example' } });
    expect(r.values.tokenUrl).toBe('https://api.dropboxapi.com/oauth2/token');
    expect(r.sources.tokenUrl).toBe('default');
    expect(r.values.baseUrl).toBe('https://recorded.example');
    expect(r.sources.baseUrl).toBe('profile');
    // The API key would carry the environment's app secret into its workspace: passed over as well.
    expect(r.values.apiKey).toBeUndefined();
    expect(ignored(r)).toEqual(['apiKey', 'authorizeUrl', 'baseUrl', 'dropboxApiUrl', 'tokenUrl']);
    expect(r.ignoredDotenv.find((i) => i.name === 'tokenUrl')?.reason).toBe('SYNCAUTH_APP_SECRET comes from the environment');
  });

  it('only the secrets an endpoint receives count: an API key from the environment leaves the Dropbox endpoints alone', () => {
    const r = resolveSettings({ env: { SYNCAUTH_API_KEY: 'env-key' }, dotenv: { ...endpoints, ...grant } });
    expect(r.sources.tokenUrl).toBe('dotenv');
    expect(r.sources.baseUrl).toBeUndefined();
    expect(ignored(r)).toEqual(['baseUrl']);
  });

  it('a value equal to the one used anyway steers nothing and is not named', () => {
    const r = resolveSettings({ env: grant, dotenv: { SYNCAUTH_TOKEN_URL: 'https://api.dropboxapi.com/oauth2/token' } });
    expect(r.sources.tokenUrl).toBe('default');
    expect(r.ignoredDotenv).toEqual([]);
  });

  it('secrets a command asks for, a store that holds some, and setup each pass the endpoints over', () => {
    const prompted = resolveSettings({ dotenv: endpoints, dotenvTrust: { prompts: ['appKey', 'appSecret'] } });
    expect(prompted.ignoredDotenv.find((i) => i.name === 'tokenUrl')?.reason).toBe('SYNCAUTH_APP_KEY and SYNCAUTH_APP_SECRET would be asked for, not read from the .env');
    const stored = resolveSettings({ dotenv: { ...endpoints, ...grant }, dotenvTrust: { store: 'profile "p"\'s file store' } });
    expect(ignored(stored)).toEqual(['authorizeUrl', 'baseUrl', 'dropboxApiUrl', 'tokenUrl']);
    expect(stored.values.appKey).toBe('app-key-1');
    const setup = resolveSettings({ dotenv: { ...endpoints, ...grant, SYNCAUTH_API_KEY: 'key' }, dotenvTrust: { records: true } });
    expect(ignored(setup)).toEqual(['authorizeUrl', 'baseUrl', 'dropboxApiUrl', 'tokenUrl']);
    expect(setup.values.apiKey).toBe('key');
  });
});

describe('what a .env may not set', () => {
  it('every setting that says where a token goes or where secrets live is marked, and screened out', () => {
    const notFromDotenv = (Object.keys(SETTINGS) as SettingName[]).filter((name) => !SETTINGS[name].dotenv).sort();
    expect(notFromDotenv).toEqual(['config', 'configDir', 'grantKey', 'notifyUrl', 'onReauthorized', 'publicUrl', 'reauthLinkTtl', 'reauthListen', 'redisUrl', 'socket', 'store', 'storeKey', 'tokenFile', 'tokenFileGroup', 'tokenFileMode']);
    const planted = Object.fromEntries(notFromDotenv.map((name) => [SETTINGS[name].env, 'x']));
    const { dotenv, ignored: dropped } = screenDotenv({ ...planted, SYNCAUTH_ENDPOINT_OVERRIDE: '1', SYNCAUTH_REMOTE_URL: 'dropbox://data' });
    expect(dotenv).toEqual({ SYNCAUTH_REMOTE_URL: 'dropbox://data' });
    expect(dropped.sort()).toEqual([...Object.keys(planted), 'SYNCAUTH_ENDPOINT_OVERRIDE'].sort());
  });
});
