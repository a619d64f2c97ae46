import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { SOURCE_TYPES } from '../../src/service/models.js';
import { validConfigs } from '../fixtures/source-configs.js';
import { responseErrors } from '../helpers/openapi.js';
import { call, detailLocs, emulator, manualClock } from './helpers.js';

const DROPBOX_CONFIG = {
  remote_url: 'dropbox://data',
  recursive: false,
  refresh_token: 'fake-refresh-token',
  app_key: 'fake-app-key',
  app_secret: 'fake-app-secret',
  token: 'sl.u.fake-access-token',
};

type Source = { id: string; name: string; type: string; config: Record<string, unknown>; created_at: string; updated_at: string | null };

async function createDropbox(emu: Awaited<ReturnType<typeof emulator>>, name = 'dropbox-data', apiKey?: string): Promise<Source> {
  const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name, type: 'dropbox', config: DROPBOX_CONFIG }, apiKey });
  expect(answer.status, answer.text).toBe(200);
  return answer.body as Source;
}

describe('the OpenAPI check itself', () => {
  it('catches a response that breaks the document', () => {
    const broken = { id: 'not-a-uuid', name: 'x', type: 'dropbox', config: {}, created_at: 'yesterday' };
    expect(responseErrors('POST', '/api/v1/sources/', 200, broken).length).toBeGreaterThan(0);
    expect(responseErrors('PUT', '/api/v1/workflows/x', 422, { detail: [{ loc: ['body'] }] }).length).toBeGreaterThan(0);
  });
});

describe('API key', () => {
  it('a missing key is 401 "missing"', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'GET', '/api/v1/sources/', { apiKey: null });
    expect(answer.status).toBe(401);
    expect(answer.text).toBe('{"detail":"API key is missing, please provide an API key in the header."}');
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('an empty key counts as missing', async () => {
    const emu = await emulator();
    expect((await call(emu, 'GET', '/api/v1/sources/', { apiKey: '' })).body).toEqual({ detail: 'API key is missing, please provide an API key in the header.' });
  });

  it('an unknown key is 401 "invalid"', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/', { apiKey: 'nope', body: { name: 'x', type: 'dropbox', config: DROPBOX_CONFIG } });
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual({ detail: 'API key is invalid, please provide a valid API key in the header.' });
    expect(emu.state.workspaces.get('default')?.sources.size).toBe(0);
  });

  it('the header name is configurable; the default name then means no key', async () => {
    const emu = await emulator({ apiKeyHeader: 'unstructured-api-key' });
    expect((await call(emu, 'GET', '/api/v1/sources/')).status).toBe(200);
    const wrongHeader = await call(emu, 'GET', '/api/v1/sources/', { apiKey: null, headers: { 'service-api-key': DEFAULT_EMULATOR_API_KEY } });
    expect(wrongHeader.status).toBe(401);
  });

  it('is checked before path validation, but after JSON decoding, as FastAPI does', async () => {
    const emu = await emulator();
    expect((await call(emu, 'GET', '/api/v1/sources/not-a-uuid', { apiKey: null })).status).toBe(401);
    expect((await call(emu, 'POST', '/api/v1/sources/', { apiKey: null, rawBody: '{' })).status).toBe(422);
  });
});

describe('workspaces', () => {
  it('keeps each workspace to its own sources', async () => {
    const emu = await emulator({ workspaces: [{ name: 'a', apiKeys: ['key-a', 'key-a2'] }, { name: 'b', apiKeys: ['key-b'] }] });
    const mine = await createDropbox(emu, 'mine', 'key-a');
    const seen = await call(emu, 'GET', `/api/v1/sources/${mine.id}`, { apiKey: 'key-a2' });
    expect(seen.status).toBe(200);
    for (const [method, body] of [['GET', undefined], ['PUT', { config: DROPBOX_CONFIG }], ['DELETE', undefined]] as const) {
      const other = await call(emu, method, `/api/v1/sources/${mine.id}`, { apiKey: 'key-b', body });
      expect(other.status).toBe(404);
      expect(other.body).toEqual({ detail: 'Source not found' });
    }
    expect((await call(emu, 'GET', '/api/v1/sources/', { apiKey: 'key-b' })).body).toEqual([]);
    // The same name is free in another workspace.
    expect((await call(emu, 'POST', '/api/v1/sources/', { apiKey: 'key-b', body: { name: 'mine', type: 'dropbox', config: DROPBOX_CONFIG } })).status).toBe(200);
  });
});

describe('sources', () => {
  it('create answers 200 with SourceConnectorInformation, config echoed as given', async () => {
    const clock = manualClock(Date.parse('2030-05-06T07:08:09.123Z'));
    const emu = await emulator({ now: clock.now });
    const source = await createDropbox(emu);
    expect(source).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      name: 'dropbox-data',
      type: 'dropbox',
      config: DROPBOX_CONFIG,
      created_at: '2030-05-06T07:08:09.123Z',
      updated_at: null,
    });
    expect(emu.state.workspaces.get('default')?.sources.get(source.id)?.name).toBe('dropbox-data');
  });

  it('creates every one of the 21 types from a valid config', async () => {
    const emu = await emulator();
    for (const type of SOURCE_TYPES) {
      const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name: `src-${type}`, type, config: validConfigs[type] } });
      expect(answer.status, `${type}: ${answer.text}`).toBe(200);
    }
    expect((await call(emu, 'GET', '/api/v1/sources/')).body).toHaveLength(21);
  });

  it('gets, lists (filtered by type), replaces the config and deletes', async () => {
    const clock = manualClock();
    const emu = await emulator({ now: clock.now });
    const source = await createDropbox(emu);
    await call(emu, 'POST', '/api/v1/sources/', { body: { name: 's3-reports', type: 's3', config: validConfigs.s3 } });

    expect((await call(emu, 'GET', `/api/v1/sources/${source.id}`)).body).toEqual(source);
    expect((await call(emu, 'GET', `/api/v1/sources/${source.id.toUpperCase()}`)).status).toBe(200);
    expect(((await call(emu, 'GET', '/api/v1/sources/')).body as Source[]).map((s) => s.name)).toEqual(['dropbox-data', 's3-reports']);
    const onlyDropbox = await call(emu, 'GET', '/api/v1/sources/?source_type=dropbox');
    expect((onlyDropbox.body as Source[]).map((s) => s.name)).toEqual(['dropbox-data']);

    clock.advance(60_000);
    const fresh = { ...DROPBOX_CONFIG, token: 'sl.u.fresh', recursive: true };
    const updated = await call(emu, 'PUT', `/api/v1/sources/${source.id}`, { body: { config: fresh } });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({ ...source, config: fresh, updated_at: new Date(clock.now()).toISOString() });

    const deleted = await call(emu, 'DELETE', `/api/v1/sources/${source.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ detail: `Source with id ${source.id} successfully deleted.` });
    expect((await call(emu, 'GET', `/api/v1/sources/${source.id}`)).status).toBe(404);
    expect((await call(emu, 'DELETE', `/api/v1/sources/${source.id}`)).body).toEqual({ detail: 'Source not found' });
  });

  it('PUT is a full replace: a config missing a required field is refused', async () => {
    const emu = await emulator();
    const source = await createDropbox(emu);
    const answer = await call(emu, 'PUT', `/api/v1/sources/${source.id}`, { body: { config: { recursive: true, token: 'sl.u.x' } } });
    expect(answer.status).toBe(422);
    expect(answer.body).toEqual({ detail: [expect.objectContaining({ loc: ['body', 'config', 'remote_url'], type: 'missing', msg: 'Field required' })] });
    expect(emu.state.workspaces.get('default')?.sources.get(source.id)?.config).toEqual(DROPBOX_CONFIG);
  });

  it('PUT cannot change name or type: those fields, like any unknown field, are ignored as the service ignores them', async () => {
    const emu = await emulator();
    const source = await createDropbox(emu);
    const answer = await call(emu, 'PUT', `/api/v1/sources/${source.id}`, { body: { name: 'renamed', type: 's3', config: DROPBOX_CONFIG } });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id: source.id, name: source.name, type: 'dropbox' });
    const stored = emu.state.workspaces.get('default')?.sources.get(source.id);
    expect(stored?.name).toBe(source.name);
    expect(stored?.type).toBe('dropbox');
  });

  it('a second source with the same name is 409', async () => {
    const emu = await emulator();
    await createDropbox(emu, 'dup');
    const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name: 'dup', type: 's3', config: validConfigs.s3 } });
    expect(answer.status).toBe(409);
    expect(answer.body).toEqual({ detail: 'A source connector named dup already exists' });
  });

  it('checks the config against its type, naming each field', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/', {
      body: { name: 'bad', type: 'dropbox', config: { remote_url: 'https://www.dropbox.com/home', recursive: 'yes', token: 'sl.u.x' } },
    });
    expect(answer.status).toBe(422);
    const detail = (answer.body as { detail: { loc: unknown[]; type: string; msg: string }[] }).detail;
    expect(detail.map((d) => d.loc)).toEqual(expect.arrayContaining([['body', 'config', 'remote_url'], ['body', 'config', 'recursive']]));
    expect(detail.every((d) => d.type === 'value_error' && d.msg.startsWith('Value error, '))).toBe(true);
    expect(emu.state.workspaces.get('default')?.sources.size).toBe(0);
  });

  it('refuses an unknown type in the enum style, and a missing body field', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name: 'x', type: 'ftp' } });
    expect(answer.status).toBe(422);
    const detail = (answer.body as { detail: { loc: unknown[]; type: string; msg: string }[] }).detail;
    expect(detail[0]).toMatchObject({ loc: ['body', 'type'], type: 'enum' });
    expect(detail[0]?.msg).toMatch(/^Input should be 'azure', 'box', .* 'jira' or 'zendesk'$/);
    expect(detail[1]).toEqual({ loc: ['body', 'config'], msg: 'Field required', type: 'missing' });
  });

  it('a config that is not an object is dict_type', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name: 'x', type: 'dropbox', config: 'dropbox://data' } });
    expect(answer.body).toEqual({ detail: [{ loc: ['body', 'config'], msg: 'Input should be a valid dictionary', type: 'dict_type' }] });
  });

  it('source_type in the list must be one of the 21', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'GET', '/api/v1/sources/?source_type=ftp');
    expect(answer.status).toBe(422);
    expect(detailLocs(answer)).toEqual([['query', 'source_type']]);
  });

  it('path ids must be uuids', async () => {
    const emu = await emulator();
    for (const method of ['GET', 'DELETE'] as const) {
      const answer = await call(emu, method, '/api/v1/sources/12345');
      expect(answer.status).toBe(422);
      expect(answer.body).toEqual({
        detail: [expect.objectContaining({ loc: ['path', 'source_id'], type: 'uuid_parsing', msg: expect.stringMatching(/^Input should be a valid UUID, /) })],
      });
    }
    // Path and body problems come back together.
    const both = await call(emu, 'PUT', '/api/v1/sources/nope', { body: { configs: {} } });
    // `configs` is not a field: ignored, so only the missing `config` is reported with the path.
    expect(detailLocs(both)).toEqual([['path', 'source_id'], ['body', 'config']]);
  });
});

describe('request bodies, FastAPI style', () => {
  it('malformed JSON is 422 json_invalid at the position Python reports', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/', { rawBody: '{"name": "x", "type": }' });
    expect(answer.status).toBe(422);
    expect(answer.body).toEqual({ detail: [{ loc: ['body', 22], msg: 'JSON decode error', type: 'json_invalid', ctx: { error: 'Expecting value' } }] });
  });

  it('no body is "Field required" at ["body"]', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/');
    expect(answer.body).toEqual({ detail: [{ loc: ['body'], msg: 'Field required', type: 'missing' }] });
  });

  it('a body that is not an object cannot be read as the model', async () => {
    const emu = await emulator();
    for (const raw of ['[]', '"text"', 'null']) {
      const answer = await call(emu, 'POST', '/api/v1/sources/', { rawBody: raw });
      expect(answer.body).toEqual({ detail: [{ loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', type: 'model_attributes_type' }] });
    }
    const form = await call(emu, 'POST', '/api/v1/sources/', { rawBody: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(detailLocs(form)).toEqual([['body']]);
  });

  it('a 422 never echoes the submitted secrets', async () => {
    const emu = await emulator();
    const answer = await call(emu, 'POST', '/api/v1/sources/', { body: { name: 'x', type: 'dropbox', config: { ...DROPBOX_CONFIG, remote_url: 'nope' } } });
    expect(answer.status).toBe(422);
    expect(answer.text).not.toContain('fake-app-secret');
    expect(answer.text).not.toContain('fake-refresh-token');
  });
});

describe('routing, as Starlette does it', () => {
  it('an unknown route is 404 Not Found', async () => {
    const emu = await emulator();
    for (const path of ['/api/v1/templates/', '/api/v2/sources/', '/']) {
      const answer = await call(emu, 'GET', path);
      expect(answer.status).toBe(404);
      expect(answer.text).toBe('{"detail":"Not Found"}');
    }
  });

  it('a known route with the wrong method is 405', async () => {
    const emu = await emulator();
    const source = await createDropbox(emu);
    for (const [method, path] of [['PATCH', `/api/v1/sources/${source.id}`], ['DELETE', '/api/v1/sources/'], ['POST', `/api/v1/workflows/${source.id}`]] as const) {
      const answer = await call(emu, method, path);
      expect(answer.status).toBe(405);
      expect(answer.body).toEqual({ detail: 'Method Not Allowed' });
      expect(answer.headers.get('allow')).toBeTruthy();
    }
  });

  it('the other trailing-slash form redirects with 307, keeping method and body', async () => {
    const emu = await emulator();
    const redirect = await call(emu, 'POST', '/api/v1/sources?x=1', { body: {}, redirect: 'manual' });
    expect(redirect.status).toBe(307);
    expect(redirect.headers.get('location')).toBe(`${emu.url}/api/v1/sources/?x=1`);
    const followed = await call(emu, 'POST', '/api/v1/sources', { body: { name: 'via-redirect', type: 'dropbox', config: DROPBOX_CONFIG } });
    expect(followed.status).toBe(200);
    const id = (followed.body as Source).id;
    const slash = await call(emu, 'GET', `/api/v1/sources/${id}/`, { redirect: 'manual' });
    expect(slash.status).toBe(307);
    expect(slash.headers.get('location')).toBe(`${emu.url}/api/v1/sources/${id}`);
  });
});
