// Bad input to the source and workflow commands: exit 2, a message naming what is wrong, and not one request
// reaches the service (the emulator's request log stays empty).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';

let emulator: RunningEmulator;
let dir: string;
let env: Record<string, string>;
const WF = '6f1c2d7e-2b1a-4c3d-9e8f-0a1b2c3d4e5f';

function file(name: string, content: string): string {
  const p = path.join(dir, name);
  writeFileSync(p, content);
  return p;
}

beforeAll(async () => {
  emulator = await startEmulator();
  dir = tempDir();
  env = { SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_STORE: 'env' };
});
afterAll(async () => emulator.close());

interface Case {
  name: string;
  args: () => string[];
  stdin?: string;
  env?: Record<string, string>;
  message: RegExp;
}

const dropboxOk = JSON.stringify({ remote_url: 'dropbox://data', recursive: true, token: 'sl.u.canary' });

const cases: Case[] = [
  { name: 'unknown source type', args: () => ['source', 'create', '--type', 'ftp', '--name', 'x', '--config', '-'], stdin: '{}', message: /--type: unknown type "ftp".*azure, box, confluence.*zendesk/s },
  { name: 'type with a typo', args: () => ['source', 'create', '--type', 'Dropbox', '--name', 'x', '--config', '-'], stdin: dropboxOk, message: /--type: unknown type "Dropbox"/ },
  { name: 'kafka with underscore', args: () => ['source', 'create', '--type', 'kafka_cloud', '--name', 'x', '--config', '-'], stdin: '{}', message: /--type: unknown type "kafka_cloud"/ },
  { name: 'empty name', args: () => ['source', 'create', '--type', 'dropbox', '--name', ' ', '--config', '-'], stdin: dropboxOk, message: /--name: must not be empty/ },
  { name: 'missing --name', args: () => ['source', 'create', '--type', 'dropbox', '--config', '-'], stdin: dropboxOk, message: /required option '--name <name>' not specified/ },
  { name: 'missing --config', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x'], message: /required option '--config <file>' not specified/ },
  { name: 'config file absent', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', path.join(dir, 'nope.json')], message: /--config: .*nope\.json: no such file/ },
  { name: 'config is a directory', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', dir], message: /--config: .*is a directory/ },
  { name: 'malformed JSON says where', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', file('bad.json', '{\n  "remote_url": "dropbox://data",\n  "recursive": tru\n}')], message: /--config: .*bad\.json is not valid JSON at line 3, column \d+/ },
  { name: 'empty stdin', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: '', message: /--config: stdin is not valid JSON/ },
  { name: 'config is an array', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: '[1]', message: /--config: stdin must hold a JSON object/ },
  { name: 'dropbox without remote_url', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ token: 'sl.x' }), message: /config\.remote_url/ },
  { name: 'dropbox app-folder root', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ remote_url: 'dropbox://', token: 'sl.x' }), message: /config\.remote_url: .*subfolder/ },
  { name: 'dropbox wrong scheme', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ remote_url: 'https://www.dropbox.com/home/Apps/x/data', token: 'sl.x' }), message: /config\.remote_url/ },
  { name: 'dropbox recursive as text', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ remote_url: 'dropbox://data', recursive: 'yes', token: 'sl.x' }), message: /config\.recursive/ },
  { name: 'dropbox partial credentials', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ remote_url: 'dropbox://data', refresh_token: 'r', app_key: 'k' }), message: /config\.app_secret/ },
  { name: 'dropbox misspelt field', args: () => ['source', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ remote_ur: 'dropbox://data', token: 'sl.x' }), message: /did you mean remote_url/ },
  { name: 's3 wrong scheme', args: () => ['source', 'create', '--type', 's3', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ remote_url: 'gs://bucket' }), message: /config\.remote_url/ },
  { name: 'postgres port as text', args: () => ['source', 'create', '--type', 'postgres', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ host: 'db', database: 'd', port: 'abc', username: 'u', password: 'p', table_name: 't', batch_size: 10 }), message: /config\.port/ },
  { name: 'couchbase missing bucket', args: () => ['source', 'create', '--type', 'couchbase', '--name', 'x', '--config', '-'], stdin: JSON.stringify({ connection_string: 'couchbases://h', batch_size: 1, username: 'u', password: 'p', collection_id: 'c' }), message: /config\.bucket/ },
  { name: 'source get bad uuid', args: () => ['source', 'get', 'abc'], message: /id: must be a UUID, got "abc"/ },
  { name: 'source delete bad uuid', args: () => ['source', 'delete', '123', '--yes'], message: /id: must be a UUID/ },
  { name: 'source delete without --yes off a terminal', args: () => ['source', 'delete', WF], message: /without confirmation/ },
  { name: 'source list unknown type', args: () => ['source', 'list', '--type', 'ftp'], message: /--type: unknown type "ftp"/ },
  { name: 'source update bad uuid', args: () => ['source', 'update', 'x', '--config', '-'], stdin: dropboxOk, message: /id: must be a UUID/ },
  { name: 'source update invalid config for given type', args: () => ['source', 'update', WF, '--type', 'dropbox', '--config', '-'], stdin: JSON.stringify({ recursive: true }), message: /config\.remote_url/ },
  { name: 'workflow get bad uuid', args: () => ['workflow', 'get', 'wf-1'], message: /id: must be a UUID, got "wf-1"/ },
  { name: 'workflow update with nothing', args: () => ['workflow', 'update', WF], message: /nothing to update/ },
  { name: 'workflow update unknown schedule', args: () => ['workflow', 'update', WF, '--schedule', 'hourly'], message: /--schedule: unknown schedule "hourly".*every 15 minutes.*monthly/s },
  { name: 'workflow update schedule and clear', args: () => ['workflow', 'update', WF, '--schedule', 'daily', '--clear-schedule'], message: /cannot be used with option '--clear-schedule'/ },
  { name: 'workflow update bad source id', args: () => ['workflow', 'update', WF, '--source-id', 'src'], message: /--source-id: must be a UUID/ },
  { name: 'workflow update bad destination id', args: () => ['workflow', 'update', WF, '--destination-id', '1234'], message: /--destination-id: must be a UUID/ },
  { name: 'workflow update bad workflow type', args: () => ['workflow', 'update', WF, '--workflow-type', 'gold'], message: /Allowed choices are basic, advanced, platinum, custom/ },
  { name: 'workflow update nodes not an array', args: () => ['workflow', 'update', WF, '--nodes', '-'], stdin: '{"name":"x"}', message: /--nodes: stdin must hold a JSON array/ },
  { name: 'workflow update node missing subtype', args: () => ['workflow', 'update', WF, '--nodes', '-'], stdin: '[{"name":"Partitioner","type":"partition"}]', message: /--nodes\[0\]\.subtype/ },
  { name: 'workflow update node unknown field', args: () => ['workflow', 'update', WF, '--nodes', '-'], stdin: '[{"name":"P","type":"partition","subtype":"fast","colour":"red"}]', message: /--nodes\[0\]: unknown field\(s\) colour/ },
  { name: 'workflow update empty name', args: () => ['workflow', 'update', WF, '--name', ''], message: /--name: must not be empty/ },
  { name: 'secret flag refused', args: () => ['source', 'list', '--api-key', 'canary-flag-secret'], message: /--api-key is refused: secrets are never taken from flags/ },
  { name: 'secret flag with = refused', args: () => ['workflow', 'list', '--app-secret=canary-flag-secret'], message: /--app-secret is refused/ },
  { name: 'bad base URL', args: () => ['source', 'list'], env: { SYNCAUTH_BASE_URL: 'platform.example.com' }, message: /SYNCAUTH_BASE_URL: must be an absolute http\(s\) URL/ },
  { name: 'bad header name', args: () => ['source', 'list', '--api-key-header', 'bad header'], message: /--api-key-header: must be a valid HTTP header name/ },
  { name: 'unknown option', args: () => ['source', 'list', '--colour'], message: /unknown option '--colour'/ },
  { name: 'unknown command', args: () => ['sources'], message: /unknown command 'sources'/ },
  { name: 'authorize with a malformed app secret', args: () => ['authorize', '--no-open'], env: { SYNCAUTH_APP_KEY: 'key', SYNCAUTH_APP_SECRET: 'has space canary-flag-secret' }, message: /SYNCAUTH_APP_SECRET: contains spaces/ },
  { name: 'authorize with a colon in the app key', args: () => ['authorize', '--no-open'], env: { SYNCAUTH_APP_KEY: 'a:b', SYNCAUTH_APP_SECRET: 'secret' }, message: /SYNCAUTH_APP_KEY: contains ":"/ },
  { name: 'emulate bad fault rule', args: () => ['emulate', '--fault', 'token:abc'], message: /--fault token:abc: STATUS must be an HTTP error status/ },
];

describe('bad input is refused with exit 2 and nothing is sent', () => {
  beforeEach(() => {
    (emulator.state.requests as unknown[]).length = 0;
  });

  it('covers at least 30 cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(30);
  });

  it.each(cases)('$name', async (c) => {
    const result = await runInProcess(c.args(), { env: { ...env, ...c.env }, ...(c.stdin === undefined ? {} : { stdin: c.stdin }) });
    expect(result.stderr).toMatch(c.message);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(emulator.state.requests).toEqual([]);
    expect(result.stderr).not.toContain('canary-flag-secret');
    expect(result.stderr).not.toContain('sl.u.canary');
  });
});
