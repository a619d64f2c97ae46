import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import type { FieldIssue } from '../../src/errors.js';
import { SOURCE_TYPES } from '../../src/service/models.js';
import type { SourceType } from '../../src/service/models.js';
import {
  SECRET_CONFIG_FIELDS,
  SOURCE_CONFIG_FIELDS,
  dropboxApiPath,
  dropboxRemoteUrlProblem,
  isSecretConfigField,
  maskSourceConfig,
  sourceConfigSchemas,
  validateSourceConfig,
} from '../../src/service/source-configs.js';
import { requiredFields, validConfigs } from '../fixtures/source-configs.js';
import { OPENAPI_PATH } from '../helpers/openapi.js';

const TYPES = [...SOURCE_TYPES];

function issuesOf(type: string, config: unknown): FieldIssue[] {
  const result = validateSourceConfig(type, config);
  if (result.ok) throw new Error(`expected ${type} config to be refused: ${JSON.stringify(config)}`);
  return result.issues;
}

function issueOn(type: string, config: unknown, field: string): FieldIssue {
  const issues = issuesOf(type, config);
  const found = issues.find((i) => i.field === field);
  if (!found) throw new Error(`no issue on ${field}; got ${JSON.stringify(issues)}`);
  return found;
}

function withField(type: SourceType, field: string, value: unknown): Record<string, unknown> {
  return { ...validConfigs[type], [field]: value };
}

function without(type: SourceType, ...fields: string[]): Record<string, unknown> {
  const copy = { ...validConfigs[type] };
  for (const f of fields) delete copy[f];
  return copy;
}

describe('the 21 types', () => {
  it('has a schema, a field list, a fixture and required fields for exactly the 21 types', () => {
    for (const table of [sourceConfigSchemas, SOURCE_CONFIG_FIELDS, validConfigs, requiredFields]) {
      expect(Object.keys(table).sort()).toEqual([...TYPES].sort());
    }
  });

  it.each(TYPES)('%s: the valid config is accepted and returned as the very same object, unchanged', (type) => {
    const config = validConfigs[type];
    const before = structuredClone(config);
    const result = validateSourceConfig(type, config);
    expect(result).toEqual({ ok: true, config });
    if (result.ok) expect(result.config).toBe(config);
    expect(config).toEqual(before);
  });

  it.each(TYPES)('%s: the schema itself accepts the valid config without adding defaults', (type) => {
    const parsed = sourceConfigSchemas[type].safeParse(validConfigs[type]);
    expect(parsed.success).toBe(true);
    expect(parsed.data).toEqual(validConfigs[type]);
  });

  const requiredCases = TYPES.flatMap((type) => requiredFields[type].map((field) => [type, field] as const));
  it.each(requiredCases)('%s: a config without %s is refused, naming the field', (type, field) => {
    const issue = issueOn(type, without(type, field), `config.${field}`);
    expect(issue.message).toMatch(/required/);
  });

  it.each(requiredCases)('%s: %s set to null is refused too (required fields are not nullable)', (type, field) => {
    issueOn(type, withField(type, field, null), `config.${field}`);
  });

  // Fields that are optional on their own but required by a companion that the fixture sets.
  const coRequired: Partial<Record<SourceType, string[]>> = {
    azure: ['account_name'],
    dropbox: ['refresh_token', 'app_key', 'app_secret'],
    s3: ['key', 'secret'],
  };
  const optionalCases = TYPES.flatMap((type) =>
    Object.keys(validConfigs[type])
      .filter((f) => !requiredFields[type].includes(f) && !(coRequired[type] ?? []).includes(f))
      .map((field) => [type, field] as const));
  it.each(optionalCases)('%s: %s may be left out', (type, field) => {
    expect(validateSourceConfig(type, without(type, field)).ok).toBe(true);
  });

  it.each(TYPES)('%s: an unknown field is refused and named, with the type', (type) => {
    const issue = issueOn(type, withField(type, 'frobnicate', 1), 'config.frobnicate');
    expect(issue.message).toBe(`unknown field for type ${type}; its fields are ${SOURCE_CONFIG_FIELDS[type].join(', ')}`);
  });

  it.each(TYPES)('%s: a config of the wrong type of value is refused on `config`', (type) => {
    for (const bad of [null, [], 'text', 42, true]) {
      const issues = issuesOf(type, bad);
      expect(issues).toHaveLength(1);
      expect(issues[0]?.field).toBe('config');
      expect(issues[0]?.message).toMatch(new RegExp(`^expected an object with the fields of a ${type} config, got `));
    }
  });

  it('reports every problem at once: missing, mistyped and unknown fields together', () => {
    const config = { ...without('postgres', 'host'), port: 'abc', hots: 'db' };
    const fields = issuesOf('postgres', config).map((i) => i.field).sort();
    expect(fields).toEqual(['config.host', 'config.hots', 'config.port']);
  });
});

describe('schemas built on first use', () => {
  it('builds each type\'s schema once: every read and every validation uses the same one', () => {
    const first = sourceConfigSchemas.dropbox;
    expect(validateSourceConfig('dropbox', validConfigs.dropbox).ok).toBe(true);
    expect(sourceConfigSchemas.dropbox).toBe(first);
    expect(sourceConfigSchemas.s3).not.toBe(first);
  });
});

describe('unknown type', () => {
  it('gives one issue on `type`, listing the 21 types', () => {
    const issues = issuesOf('ftp', { remote_url: 'ftp://x' });
    expect(issues).toHaveLength(1);
    expect(issues[0]?.field).toBe('type');
    for (const type of TYPES) expect(issues[0]?.message).toContain(type);
    expect(issues[0]?.message).toMatch(/^unknown source type "ftp"; expected one of the 21 types: azure, box/);
  });

  it('suggests the intended type for a near miss', () => {
    expect(issueOn('kafka_cloud', {}, 'type').message).toContain('did you mean kafka-cloud?');
    expect(issueOn('dropbx', {}, 'type').message).toContain('did you mean dropbox?');
    expect(issueOn('Google-Drive', {}, 'type').message).toContain('did you mean google_drive?');
  });
});

describe('wrong types and constraints', () => {
  const cases: [SourceType, string, unknown, string][] = [
    ['kafka-cloud', 'port', 'abc', 'expected an integer ≥ 1, got "abc"'],
    ['kafka-cloud', 'port', 0, 'expected an integer ≥ 1, got 0'],
    ['kafka-cloud', 'port', 9092.5, 'expected an integer ≥ 1, got 9092.5'],
    ['kafka-cloud', 'num_messages_to_consume', -1, 'expected an integer ≥ 1, got -1'],
    ['postgres', 'port', '5432', 'expected an integer ≥ 1, got "5432"'],
    ['confluence', 'max_num_of_spaces', 0, 'expected an integer ≥ 1, got 0'],
    ['zendesk', 'batch_size', 'ten', 'expected an integer ≥ 1 or null, got "ten"'],
    ['s3', 'recursive', 'yes', 'expected true or false, got "yes"'],
    ['confluence', 'cloud', null, 'expected true or false, got null'],
    ['jira', 'cloud', 'true', 'expected true, false or null, got "true"'],
    ['couchbase', 'bucket', 7, 'expected a string, got 7'],
    ['azure', 'account_name', 5, 'expected a string or null, got 5'],
    ['elasticsearch', 'hosts', 'https://es.example.com', 'expected an array of strings, got "https://es.example.com"'],
    ['postgres', 'fields', 'id,title', 'expected an array of strings, or null, got "id,title"'],
    ['zendesk', 'item_type', 'ticket', 'expected "tickets", "articles" or null, got "ticket"'],
  ];
  it.each(cases)('%s.%s = %j is refused with a readable message', (type, field, value, message) => {
    expect(issueOn(type, withField(type, field, value), `config.${field}`).message).toBe(message);
  });

  it('names the offending array element with its index', () => {
    const issue = issueOn('elasticsearch', withField('elasticsearch', 'hosts', ['https://a:9200', 9200]), 'config.hosts[1]');
    expect(issue.message).toBe('expected a string, got 9200');
  });

  it('accepts null where the schema allows it', () => {
    for (const [type, field] of [['jira', 'cloud'], ['zendesk', 'item_type'], ['zendesk', 'batch_size'],
      ['outlook', 'tenant'], ['s3', 'endpoint_url'], ['confluence', 'spaces']] as [SourceType, string][]) {
      expect(validateSourceConfig(type, withField(type, field, null)).ok, `${type}.${field}`).toBe(true);
    }
  });

  it('truncates a long wrong value in the message', () => {
    const message = issueOn('couchbase', withField('couchbase', 'batch_size', 'x'.repeat(500)), 'config.batch_size').message;
    expect(message.length).toBeLessThan(120);
    expect(message).toMatch(/…"$/);
  });

  const patterns: [SourceType, string, string[], string[]][] = [
    ['azure', 'remote_url', ['az://c/p', 'abfs://c@acct.dfs.core.windows.net/p'], ['https://acct.blob.core.windows.net/c', 'az:/c']],
    ['box', 'remote_url', ['box://folder', 'box://'], ['https://app.box.com/folder/1', 'box:/x']],
    ['gcs', 'remote_url', ['gs://b/p', 'gcs://b'], ['s3://b', 'https://storage.googleapis.com/b']],
    ['s3', 'remote_url', ['s3://bucket/key/'], ['S3://bucket', 's3:/bucket', 'https://bucket.s3.amazonaws.com']],
    ['sharepoint', 'site', [
      'https://contoso.sharepoint.com',
      'https://contoso-admin.sharepoint.com',
      'https://contoso.sharepoint.com/sites/research',
      'https://contoso.sharepoint.com/teams/eng-team',
    ], ['http://contoso.sharepoint.com', 'https://contoso.sharepoint.com/', 'https://contoso.sharepoint.com/other/x', 'contoso']],
    ['mongodb', 'uri', [
      'mongodb://localhost:27017/content',
      'mongodb://u:p@h1:27017,h2:27018/db?replicaSet=rs0',
      'mongodb+srv://cluster0.example.mongodb.net',
    ], ['postgres://localhost', 'mongodb://', 'mongodb://host name', 'mongodb://h/db/extra']],
  ];
  describe.each(patterns)('%s.%s', (type, field, good, bad) => {
    it.each(good)('accepts %s', (value) => {
      expect(validateSourceConfig(type, withField(type, field, value)).ok).toBe(true);
    });
    it.each(bad)('refuses %s', (value) => {
      const message = issueOn(type, withField(type, field, value), `config.${field}`).message;
      expect(message.length).toBeGreaterThan(20);
    });
  });

  it('explains a remote_url pattern mismatch with the expected form and the value', () => {
    expect(issueOn('s3', withField('s3', 'remote_url', 'bucket/key'), 'config.remote_url').message)
      .toBe('expected a URL starting with s3://, like s3://<bucket>/<path>, got "bucket/key"');
  });

  it('explains a bad mongodb uri without showing it', () => {
    const uri = 'postgres://admin:hunter2@db';
    const message = issueOn('mongodb', withField('mongodb', 'uri', uri), 'config.uri').message;
    expect(message).toContain('must start with mongodb:// or mongodb+srv://');
    expect(message).not.toContain('hunter2');
    expect(message).not.toContain('admin');
  });

  it('google_drive: takes the key as a string or as a secret reference', () => {
    for (const key of [{ id: 'sec-123' }, { id: 'sec-123', type: 'rsa_aes' }]) {
      expect(validateSourceConfig('google_drive', withField('google_drive', 'service_account_key', key)).ok).toBe(true);
    }
    for (const key of [{ id: 5 }, { id: 'sec-123', type: 'aes' }, { ref: 'x' }, 42]) {
      const message = issueOn('google_drive', withField('google_drive', 'service_account_key', key), 'config.service_account_key').message;
      expect(message).toMatch(/^expected the service account key JSON as a string, or a secret reference/);
    }
  });

  it('no message uses zod\'s default wording', () => {
    const bad: [SourceType, Record<string, unknown>][] = [
      ['postgres', { port: 'x', batch_size: 0, fields: [1], extra: 1 }],
      ['jira', { cloud: 'no', projects: 'ENG' }],
      ['google_drive', { service_account_key: { id: 1 }, extensions: [null] }],
      ['slack', { channels: [''], 'start-date': 'yesterday', start_date: 'x' }],
      ['dropbox', { remote_url: 5, token: 5 }],
      ['kafka-cloud', { port: null }],
      ['zendesk', { item_type: 3 }],
    ];
    for (const [type, config] of bad) {
      for (const issue of issuesOf(type, config)) {
        expect(issue.field).toMatch(/^config(\.|$)/);
        expect(issue.message).not.toMatch(/Invalid input|Unrecognized key|received|Invalid option|Too small/);
      }
    }
  });
});

describe('unknown field suggestions', () => {
  const cases: [SourceType, string, string][] = [
    ['dropbox', 'remote_ur', 'remote_url'],
    ['dropbox', 'remote-url', 'remote_url'],
    ['dropbox', 'RemoteUrl', 'remote_url'],
    ['dropbox', 'refreshtoken', 'refresh_token'],
    ['postgres', 'hsot', 'host'],
    ['snowflake', 'usr', 'user'],
    ['zendesk', 'api-token', 'api_token'],
    ['zendesk', 'item-type', 'item_type'],
    ['zendesk', 'batch-size', 'batch_size'],
    ['slack', 'start_date', 'start-date'],
    ['slack', 'end_date', 'end-date'],
    ['kafka-cloud', 'bootstrap-servers', 'bootstrap_servers'],
  ];
  it.each(cases)('%s: %s → did you mean %s?', (type, key, suggestion) => {
    const issue = issueOn(type, withField(type, key, 'x'), `config.${key}`);
    expect(issue.message).toBe(`unknown field for type ${type}; did you mean ${suggestion}?`);
  });

  it('uses the exact wording of the documented example', () => {
    const issues = issuesOf('dropbox', withField('dropbox', 'remote_ur', 'dropbox://data'));
    expect(issues).toEqual([{ field: 'config.remote_ur', message: 'unknown field for type dropbox; did you mean remote_url?' }]);
  });

  it('does not suggest a field for an unrelated name', () => {
    expect(issueOn('dropbox', withField('dropbox', 'bucket', 'x'), 'config.bucket').message).not.toContain('did you mean');
  });

  it('gives one issue per unknown field', () => {
    const fields = issuesOf('gcs', { ...validConfigs.gcs, a_1: 1, b_2: 2 }).map((i) => i.field).sort();
    expect(fields).toEqual(['config.a_1', 'config.b_2']);
  });

  it('zendesk: the documented hyphenated forms are refused, the underscore forms accepted', () => {
    const hyphenated = { subdomain: 'example', email: 'a@example.com', 'api-token': 'fake', 'item-type': 'tickets', 'batch-size': 2 };
    const fields = issuesOf('zendesk', hyphenated).map((i) => i.field).sort();
    expect(fields).toEqual(['config.api-token', 'config.api_token', 'config.batch-size', 'config.item-type']);
  });
});

describe('dropbox remote_url', () => {
  it.each(['dropbox://data', 'dropbox://data/reports', 'dropbox://data/reports/2024', 'dropbox://data/',
    'dropbox://My Folder', 'dropbox:///data'])('accepts %s', (url) => {
    expect(dropboxRemoteUrlProblem(url)).toBeNull();
    expect(validateSourceConfig('dropbox', withField('dropbox', 'remote_url', url)).ok).toBe(true);
  });

  it.each(['dropbox://', 'dropbox:///', 'dropbox://.', 'dropbox://./', 'dropbox:////', 'dropbox:// /'])(
    'refuses the app-folder root %j, explaining the subfolder to create',
    (url) => {
      const problem = dropboxRemoteUrlProblem(url);
      expect(problem).toContain("names the app folder's root, which the service cannot read");
      expect(problem).toContain('create a subfolder inside Apps/<app folder>/');
      expect(problem).toContain('dropbox://data');
      expect(issueOn('dropbox', withField('dropbox', 'remote_url', url), 'config.remote_url').message).toBe(problem);
    },
  );

  const wrong: [string, RegExp][] = [
    ['https://www.dropbox.com/home/Apps/my-app/data', /web link.*write dropbox:\/\/data$/],
    ['https://www.dropbox.com/home/Apps/my-app/Q3%20reports/final', /write dropbox:\/\/Q3 reports\/final$/],
    ['https://www.dropbox.com/scl/fi/abc/file.pdf', /web link.*dropbox:\/\/<subfolder>/],
    ['/data', /must start with dropbox:\/\/: write dropbox:\/\/data$/],
    ['data', /must start with dropbox:\/\/: write dropbox:\/\/data$/],
    ['data/reports', /write dropbox:\/\/data\/reports$/],
    ['Dropbox://data', /must be lowercase: write dropbox:\/\/data$/],
    ['s3://data', /scheme s3:, but must start with dropbox:\/\//],
    ['dropbox:data', /scheme dropbox:, but must start with dropbox:\/\//],
    ['', /^is empty, but must name a subfolder of the app folder: create a subfolder inside Apps\/<app folder>\//],
    [' dropbox://data', /spaces at the start or end; write it as "dropbox:\/\/data"/],
    ['dropbox://data\\reports', /backslash/],
    ['dropbox://data/../other', /must not contain "\.\."/],
    ['/', /must be dropbox:\/\/<subfolder>/],
  ];
  it.each(wrong)('explains what is wrong with %j', (url, pattern) => {
    expect(dropboxRemoteUrlProblem(url)).toMatch(pattern);
  });

  it('refuses a non-string remote_url as a type error', () => {
    expect(issueOn('dropbox', withField('dropbox', 'remote_url', 5), 'config.remote_url').message)
      .toBe('expected a string like dropbox://data, got 5');
  });

  it.each([
    ['dropbox://data', '/data'],
    ['dropbox://data/reports', '/data/reports'],
    ['dropbox://data/reports/', '/data/reports'],
    ['dropbox:///data//reports', '/data/reports'],
    ['dropbox://./data', '/data'],
    ['dropbox://My Folder/Q3', '/My Folder/Q3'],
  ])('dropboxApiPath(%s) = %s', (url, path) => {
    expect(dropboxApiPath(url)).toBe(path);
  });
});

describe('dropbox credentials', () => {
  const base = { remote_url: 'dropbox://data', recursive: false };
  const renewal = { refresh_token: 'fake-r', app_key: 'fake-k', app_secret: 'fake-s' };

  it.each([
    ['a token alone', { token: 'sl.fake' }],
    ['refresh_token, app_key and app_secret', renewal],
    ['all four', { token: 'sl.fake', ...renewal }],
  ])('accepts %s', (_label, credentials) => {
    expect(validateSourceConfig('dropbox', { ...base, ...credentials }).ok).toBe(true);
  });

  it('refuses no credentials at all, on config.token', () => {
    const issues = issuesOf('dropbox', base);
    expect(issues).toEqual([{
      field: 'config.token',
      message: 'required for type dropbox: give token, or refresh_token, app_key and app_secret together ' +
        '(then the service renews tokens itself)',
    }]);
  });

  it('names the one missing renewal credential', () => {
    const issues = issuesOf('dropbox', { ...base, refresh_token: 'fake-r', app_key: 'fake-k' });
    expect(issues).toEqual([{
      field: 'config.app_secret',
      message: 'required with refresh_token and app_key (the service needs all three to renew tokens itself), or give token',
    }]);
  });

  it('names every missing renewal credential', () => {
    const issues = issuesOf('dropbox', { ...base, refresh_token: 'fake-r' });
    expect(issues.map((i) => i.field)).toEqual(['config.app_key', 'config.app_secret']);
    expect(issues[0]?.message).toMatch(/^required with refresh_token \(/);
  });

  it('refuses a partial renewal set even next to a token, since the token alone expires', () => {
    const issues = issuesOf('dropbox', { ...base, token: 'sl.fake', app_key: 'fake-k', app_secret: 'fake-s' });
    expect(issues.map((i) => i.field)).toEqual(['config.refresh_token']);
    expect(issues[0]?.message).toContain('expires within 4 hours');
  });

  it('treats empty credentials as missing', () => {
    issueOn('dropbox', { ...base, token: '' }, 'config.token');
    issueOn('dropbox', { ...base, ...renewal, app_secret: '' }, 'config.app_secret');
  });

  it('refuses credentials that are not strings, and null ones', () => {
    expect(issueOn('dropbox', { ...base, token: 5 }, 'config.token').message).toBe('expected a string, got a number');
    issueOn('dropbox', { ...base, ...renewal, app_key: null }, 'config.app_key');
  });
});

describe('slack', () => {
  const valid = validConfigs.slack;

  it('accepts channels and token alone', () => {
    expect(validateSourceConfig('slack', { channels: ['general'], token: 'xoxb-fake' }).ok).toBe(true);
  });

  it('refuses an empty channel list, an empty channel name, and a non-array', () => {
    expect(issueOn('slack', { ...valid, channels: [] }, 'config.channels').message)
      .toBe('expected at least one channel ID or name, got an empty array');
    expect(issueOn('slack', { ...valid, channels: ['general', ''] }, 'config.channels[1]').message)
      .toBe('expected a channel ID or name, got an empty string');
    expect(issueOn('slack', { ...valid, channels: 'general' }, 'config.channels').message)
      .toBe('expected an array of channel IDs or names, got "general"');
  });

  it.each(['2024-01-31', '2024-01-31T12:00:00Z', '2024-01-31T12:00Z', '2024-01-31T12:00:00.123+02:00', '2024-02-29'])(
    'accepts the ISO-8601 date %s',
    (date) => {
      expect(validateSourceConfig('slack', { ...valid, 'start-date': date, 'end-date': '2024-12-31' }).ok).toBe(true);
    },
  );

  it.each(['yesterday', '31/01/2024', '2024-02-30', '2023-02-29', '2024-13-01', '2024-01-31T24:00:00Z', '2024-1-5'])(
    'refuses %s as a date',
    (date) => {
      expect(issueOn('slack', { ...valid, 'start-date': date }, 'config.start-date').message)
        .toBe(`expected an ISO-8601 date or date-time like 2024-01-31 or 2024-01-31T12:00:00Z, got "${date}"`);
    },
  );

  it('refuses an end-date before the start-date', () => {
    const message = issueOn('slack', { ...valid, 'start-date': '2024-06-01', 'end-date': '2024-05-31' }, 'config.end-date').message;
    expect(message).toMatch(/^is before start-date/);
  });
});

describe('documented alternative fields', () => {
  it('kafka-cloud: bootstrap_server may replace bootstrap_servers', () => {
    const config = { ...without('kafka-cloud', 'bootstrap_servers'), bootstrap_server: 'pkc-abc12.confluent.cloud' };
    expect(validateSourceConfig('kafka-cloud', config).ok).toBe(true);
  });

  it('kafka-cloud: both spellings together must agree', () => {
    const same = { ...validConfigs['kafka-cloud'], bootstrap_server: validConfigs['kafka-cloud']['bootstrap_servers'] };
    expect(validateSourceConfig('kafka-cloud', same).ok).toBe(true);
    const differ = { ...validConfigs['kafka-cloud'], bootstrap_server: 'other.confluent.cloud' };
    expect(issueOn('kafka-cloud', differ, 'config.bootstrap_server').message).toMatch(/differs from bootstrap_servers/);
  });

  it('kafka-cloud: neither spelling is refused on bootstrap_servers, mentioning the other', () => {
    expect(issueOn('kafka-cloud', without('kafka-cloud', 'bootstrap_servers'), 'config.bootstrap_servers').message)
      .toMatch(/^required for type kafka-cloud \(or give it as bootstrap_server/);
  });

  it('databricks_volumes: a personal access token may replace client_id and client_secret', () => {
    const config = { ...without('databricks_volumes', 'client_id', 'client_secret'), token: 'fake-dapi-token' };
    expect(validateSourceConfig('databricks_volumes', config).ok).toBe(true);
    expect(issueOn('databricks_volumes', without('databricks_volumes', 'client_id'), 'config.client_id').message)
      .toContain('unless token (a personal access token) is given');
  });

  it('onedrive: takes an optional password', () => {
    expect(validateSourceConfig('onedrive', withField('onedrive', 'password', 'fake-pw')).ok).toBe(true);
    issueOn('onedrive', withField('onedrive', 'password', 1), 'config.password');
  });

  it('sharepoint: takes an optional library and password', () => {
    const config = { ...validConfigs.sharepoint, library: 'Shared Documents', password: 'fake-pw' };
    expect(validateSourceConfig('sharepoint', config).ok).toBe(true);
    issueOn('sharepoint', withField('sharepoint', 'library', ['Docs']), 'config.library');
  });

  it('azure: an account key or SAS token needs the account name', () => {
    expect(issueOn('azure', without('azure', 'account_name'), 'config.account_name').message).toBe('required with account_key');
    const sas = { remote_url: 'az://c', sas_token: 'fake-sas' };
    expect(issueOn('azure', sas, 'config.account_name').message).toBe('required with sas_token');
    expect(validateSourceConfig('azure', { remote_url: 'az://c', connection_string: 'fake-cs' }).ok).toBe(true);
    expect(validateSourceConfig('azure', { remote_url: 'az://public' }).ok).toBe(true);
  });

  it('s3: key and secret come together', () => {
    expect(issueOn('s3', without('s3', 'secret'), 'config.secret').message).toBe('required with key');
    expect(issueOn('s3', without('s3', 'key'), 'config.key').message).toBe('required with secret');
    expect(validateSourceConfig('s3', { remote_url: 's3://public-bucket', anonymous: true }).ok).toBe(true);
  });
});

describe('secrets', () => {
  it('lists the credential fields, and not the plain identifiers', () => {
    for (const name of ['app_secret', 'refresh_token', 'token', 'app_key', 'password', 'account_key', 'connection_string',
      'sas_token', 'client_secret', 'client_cred', 'api_token', 'es_api_key', 'kafka_api_key', 'secret', 'key',
      'private_key', 'service_account_key', 'box_app_config', 'uri']) {
      expect(SECRET_CONFIG_FIELDS.has(name), name).toBe(true);
    }
    for (const name of ['remote_url', 'username', 'user', 'client_id', 'account_name', 'tenant', 'host', 'email', 'url']) {
      expect(SECRET_CONFIG_FIELDS.has(name), name).toBe(false);
    }
  });

  it('matches secret names in any spelling', () => {
    expect(isSecretConfigField('api-token')).toBe(true);
    expect(isSecretConfigField('App_Secret')).toBe(true);
    expect(isSecretConfigField('remote_url')).toBe(false);
  });

  it.each(TYPES)('%s: masking hides every secret, keeps everything else, and returns a deep copy', (type) => {
    const config = structuredClone(validConfigs[type]);
    const before = structuredClone(config);
    const masked = maskSourceConfig(config);
    expect(config).toEqual(before);
    expect(masked).not.toBe(config);
    expect(Object.keys(masked)).toEqual(Object.keys(config));
    for (const [key, value] of Object.entries(config)) {
      if (SECRET_CONFIG_FIELDS.has(key) && value !== null) expect(masked[key], key).toBe('********');
      else expect(masked[key], key).toEqual(value);
      if (typeof value === 'object' && value !== null) expect(masked[key], key).not.toBe(value);
    }
    // Every fake secret in the fixtures sits in a secret field.
    expect(JSON.stringify(masked)).not.toMatch(/fake/i);
  });

  it('masking keeps null and absent secrets as they are, and masks nested and oddly spelt ones', () => {
    const config = {
      token: null,
      remote_url: 'dropbox://data',
      'api-token': 'fake-1',
      nested: { password: 'fake-2', list: [{ secret: 'fake-3', name: 'n' }], keep: 1 },
      service_account_key: { id: 'sec-1', type: 'rsa' },
    };
    const before = structuredClone(config);
    const masked = maskSourceConfig(config);
    expect(masked).toEqual({
      token: null,
      remote_url: 'dropbox://data',
      'api-token': '********',
      nested: { password: '********', list: [{ secret: '********', name: 'n' }], keep: 1 },
      service_account_key: '********',
    });
    expect('refresh_token' in masked).toBe(false);
    expect(config).toEqual(before);
    expect(masked['nested']).not.toBe(config.nested);
  });

  const CANARY = 'CANARY-s3cr3t-VALUE';
  const CANARY_NUMBER = 987654321;
  const secretCases = TYPES.flatMap((type) =>
    SOURCE_CONFIG_FIELDS[type].filter(isSecretConfigField).map((field) => [type, field] as const));

  it.each(secretCases)('%s: a wrong value in %s is refused without being shown', (type, field) => {
    for (const value of [CANARY_NUMBER, [CANARY], { value: CANARY }, true]) {
      const issues = issuesOf(type, withField(type, field, value));
      expect(issues.some((i) => i.field === `config.${field}`)).toBe(true);
      for (const issue of issues) {
        expect(issue.message).not.toContain(CANARY);
        expect(issue.message).not.toContain(String(CANARY_NUMBER));
        expect(issue.message).not.toContain('true');
      }
    }
  });

  it('never shows secrets elsewhere: a bad uri, unknown fields, a whole config that is a string', () => {
    const messages = [
      ...issuesOf('mongodb', withField('mongodb', 'uri', `mongodb://user:${CANARY}@h/db/x`)),
      ...issuesOf('dropbox', withField('dropbox', 'tokne', CANARY)),
      ...issuesOf('dropbox', CANARY),
      ...issuesOf('zendesk', { ...without('zendesk', 'api_token'), 'api-token': CANARY }),
      ...issuesOf('google_drive', withField('google_drive', 'service_account_key', { id: CANARY, type: CANARY })),
    ].map((i) => i.message);
    expect(messages.length).toBeGreaterThanOrEqual(5);
    for (const message of messages) expect(message).not.toContain(CANARY);
  });
});

describe('agreement with the public schema', () => {
  const doc = JSON.parse(readFileSync(OPENAPI_PATH, 'utf8')) as {
    components: { schemas: Record<string, { properties: Record<string, unknown>; required?: string[] }> };
  };
  const modelOf: Record<Exclude<SourceType, 'slack'>, string> = {
    azure: 'AzureSourceConnectorConfigInput',
    box: 'BoxSourceConnectorConfigInput',
    confluence: 'ConfluenceSourceConnectorConfigInput',
    couchbase: 'CouchbaseSourceConnectorConfigInput',
    databricks_volumes: 'DatabricksVolumesConnectorConfigInput',
    dropbox: 'DropboxSourceConnectorConfigInput',
    elasticsearch: 'ElasticsearchConnectorConfigInput',
    gcs: 'GCSSourceConnectorConfigInput',
    google_drive: 'GoogleDriveSourceConnectorConfigInput',
    'kafka-cloud': 'KafkaCloudSourceConnectorConfigInput',
    mongodb: 'MongoDBConnectorConfigInput',
    onedrive: 'OneDriveSourceConnectorConfigInput',
    outlook: 'OutlookSourceConnectorConfigInput',
    postgres: 'PostgresSourceConnectorConfigInput',
    s3: 'S3SourceConnectorConfigInput',
    salesforce: 'SalesforceSourceConnectorConfigInput',
    sharepoint: 'SharePointSourceConnectorConfigInput',
    snowflake: 'SnowflakeSourceConnectorConfigInput',
    jira: 'JiraSourceConnectorConfigInput',
    zendesk: 'ZendeskSourceConnectorConfigInput',
  };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: 'openapi.json' });
  const modelled = Object.entries(modelOf) as [Exclude<SourceType, 'slack'>, string][];

  it.each(modelled)('%s: the valid config also satisfies %s', (type, model) => {
    const validate = ajv.compile({ $ref: `openapi.json#/components/schemas/${model}` });
    expect(validate(validConfigs[type]), JSON.stringify(validate.errors)).toBe(true);
  });

  it.each(modelled)('%s: every field of %s is accepted, and the required ones match', (type, model) => {
    const schema = doc.components.schemas[model];
    expect(schema).toBeDefined();
    for (const field of Object.keys(schema?.properties ?? {})) expect(SOURCE_CONFIG_FIELDS[type]).toContain(field);
    // dropbox: the schema requires token, but the service also renews with refresh_token + app_key + app_secret.
    const specRequired = (schema?.required ?? []).filter((f) => !(type === 'dropbox' && f === 'token'));
    expect([...requiredFields[type]].sort()).toEqual([...specRequired].sort());
  });
});
