// The source and workflow commands against the emulator, run in-process through the same command tree as the
// binary (test/helpers/in-process.ts): what is sent, what is printed,
// and that secrets are masked in both the text and the JSON output.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { SOURCE_TYPES } from '../../src/service/models.js';
import { validConfigs } from '../fixtures/source-configs.js';
import { runInProcess } from '../helpers/in-process.js';

let emulator: RunningEmulator;
let env: Record<string, string>;
let workflowId: string;

function sources() {
  return [...(emulator.state.workspaces.get('default')?.sources.values() ?? [])];
}

beforeAll(async () => {
  emulator = await startEmulator();
  env = { SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_STORE: 'env' };
  workflowId = emulator.seeded?.workflowId as string;
});
afterAll(async () => emulator.close());

describe('source commands', () => {
  const secret = 'canary-app-secret-7731';
  const dropbox = { remote_url: 'dropbox://data', recursive: true, refresh_token: 'canary-rt-5512', app_key: 'canary-key-9', app_secret: secret, token: 'sl.u.canary-access' };
  let id: string;

  it('creates a dropbox connector from stdin, sends the config unchanged and masks secrets in what it prints', async () => {
    const result = await runInProcess(['source', 'create', '--type', 'dropbox', '--name', 'docs', '--config', '-'], { env, stdin: JSON.stringify(dropbox) });
    expect(result.stderr).toMatch(/created source connector docs \([0-9a-f-]{36}\)/);
    expect(result.code).toBe(0);
    const stored = sources().find((s) => s.name === 'docs');
    expect(stored?.config).toEqual(dropbox);
    id = stored?.id as string;
    expect(result.stdout).toContain(`id:`);
    expect(result.stdout).toMatch(/^ {2}remote_url: +dropbox:\/\/data$/m);
    expect(result.stdout).toMatch(/^ {2}app_secret: +\*{8}$/m);
    for (const value of [secret, 'canary-rt-5512', 'canary-key-9', 'sl.u.canary-access']) expect(result.stdout + result.stderr).not.toContain(value);
  });

  it('gets it as JSON with the same masking', async () => {
    const result = await runInProcess(['source', 'get', id, '--json'], { env });
    expect(result.code).toBe(0);
    const shown = JSON.parse(result.stdout) as { id: string; type: string; config: Record<string, unknown> };
    expect(shown.id).toBe(id);
    expect(shown.type).toBe('dropbox');
    expect(shown.config).toEqual({ remote_url: 'dropbox://data', recursive: true, refresh_token: '********', app_key: '********', app_secret: '********', token: '********' });
  });

  it('lists connectors, filtered by type, as a table and as JSON', async () => {
    const table = await runInProcess(['source', 'list', '--type', 'dropbox'], { env });
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+TYPE\s+CREATED$/);
    expect(table.stdout).toContain(`${id}  docs`);
    const json = await runInProcess(['source', 'list', '--type', 's3', '--json'], { env });
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  it('updates the whole config, validating it for the type it looks up first', async () => {
    const next = { ...dropbox, recursive: false, token: 'sl.u.canary-next' };
    const result = await runInProcess(['source', 'update', id, '--config', '-'], { env, stdin: JSON.stringify(next) });
    expect(result.code).toBe(0);
    expect(sources().find((s) => s.id === id)?.config).toEqual(next);
    const refused = await runInProcess(['source', 'update', id, '--config', '-'], { env, stdin: JSON.stringify({ recursive: true, token: 'x' }) });
    expect(refused.stderr).toContain('nothing was sent or written');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('config.remote_url');
    expect(sources().find((s) => s.id === id)?.config).toEqual(next);
  });

  it('creates a connector of each of the 21 types from a file-shaped config', async () => {
    for (const type of SOURCE_TYPES) {
      const result = await runInProcess(['source', 'create', '--type', type, '--name', `all-${type}`, '--config', '-', '--json'], { env, stdin: JSON.stringify(validConfigs[type]) });
      expect(result.code, `${type}: ${result.stderr}`).toBe(0);
      expect(sources().find((s) => s.name === `all-${type}`)?.config).toEqual(validConfigs[type]);
    }
  }, 60_000);

  it('reports a service refusal with the field, exit 2 (duplicate names: 409, exit 1)', async () => {
    const duplicate = await runInProcess(['source', 'create', '--type', 'dropbox', '--name', 'docs', '--config', '-'], { env, stdin: JSON.stringify(dropbox) });
    expect(duplicate.code).toBe(1);
    expect(duplicate.stderr).toMatch(/already exists/);
    expect(duplicate.stderr).not.toContain(secret);
  });

  it('deletes with --yes, and a missing connector is a clear 404', async () => {
    const result = await runInProcess(['source', 'delete', id, '--yes'], { env });
    expect(result.code).toBe(0);
    expect(sources().some((s) => s.id === id)).toBe(false);
    const again = await runInProcess(['source', 'get', id], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`source connector ${id} not found in this workspace`);
  });
});

describe('workflow commands', () => {
  function stored() {
    return emulator.state.workspaces.get('default')?.workflows.get(workflowId);
  }

  it('sends exactly the fields given and shows the schedule by name and cron', async () => {
    const src = sources()[0]?.id as string;
    const result = await runInProcess(['workflow', 'update', workflowId, '--source-id', src, '--schedule', 'every 4 hours'], { env });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('schedule:       every 4 hours (0 */4 * * *)');
    expect(stored()?.sources).toEqual([src]);
    expect(stored()?.schedule).toEqual({ crontab_entries: [{ cron_expression: '0 */4 * * *' }] });
    const before = structuredClone(stored());
    const renamed = await runInProcess(['workflow', 'update', workflowId, '--name', 'nightly docs', '--json'], { env });
    expect(renamed.code).toBe(0);
    const after = JSON.parse(renamed.stdout) as { name: string; schedule: unknown; sources: string[] };
    expect(after.name).toBe('nightly docs');
    // Absent flags left the rest as it was.
    expect(after.schedule).toEqual(before?.schedule);
    expect(after.sources).toEqual(before?.sources);
  });

  it('--clear-schedule sends null and --no-reprocess-all sends false; nodes come from a file', async () => {
    const cleared = await runInProcess(['workflow', 'update', workflowId, '--clear-schedule', '--no-reprocess-all', '--nodes', '-', '--workflow-type', 'custom'], {
      env, stdin: JSON.stringify([{ name: 'Partitioner', type: 'partition', subtype: 'vlm', settings: { provider: 'x' } }]),
    });
    expect(cleared.code).toBe(0);
    expect(stored()?.schedule).toBeNull();
    expect(stored()?.reprocess_all).toBe(false);
    expect(stored()?.workflow_nodes.map((n) => n.name)).toEqual(['Partitioner']);
    expect(cleared.stdout).toContain('schedule:       none');
  });

  it('get and list show the workflow; an unknown id is a 404 naming it', async () => {
    const got = await runInProcess(['workflow', 'get', workflowId, '--json'], { env });
    expect(JSON.parse(got.stdout).id).toBe(workflowId);
    const list = await runInProcess(['workflow', 'list'], { env });
    expect(list.stdout).toContain(workflowId);
    const missing = '00000000-0000-4000-8000-000000000000';
    const unknown = await runInProcess(['workflow', 'get', missing], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`workflow ${missing} not found in this workspace`);
  });
});

describe('credentials', () => {
  it('exit 4 when no API key is available, with the variable to set', async () => {
    const result = await runInProcess(['source', 'list'], { env: { SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_STORE: 'env' } });
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('SYNCAUTH_API_KEY');
  });

  it('exit 4 when the service refuses the key, and the key is never echoed', async () => {
    const result = await runInProcess(['source', 'list'], { env: { ...env, SYNCAUTH_API_KEY: 'canary-wrong-key-4410' } });
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('API key missing, malformed or not valid for this workspace');
    expect(result.stderr).not.toContain('canary-wrong-key-4410');
  });

  it('takes the header name from --api-key-header', async () => {
    const custom = await startEmulator({ apiKeyHeader: 'unstructured-api-key' });
    try {
      const ok = await runInProcess(['source', 'list', '--json', '--api-key-header', 'unstructured-api-key'], { env: { ...env, SYNCAUTH_BASE_URL: custom.url } });
      expect(ok.code).toBe(0);
      const wrongHeader = await runInProcess(['source', 'list'], { env: { ...env, SYNCAUTH_BASE_URL: custom.url } });
      expect(wrongHeader.code).toBe(4);
    } finally {
      await custom.close();
    }
  });
});
