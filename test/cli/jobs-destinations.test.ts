// `source check`, `workflow run`, `jobs …` and `destination …` against the emulator, run in-process through the
// same command tree as the binary (test/helpers/in-process.ts): what is
// printed, the exit codes, and that secrets are masked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { runInProcess } from '../helpers/in-process.js';
import { waitFor } from '../helpers/wait.js';
import { obtainTokens } from '../emulator/helpers.js';

let emulator: RunningEmulator;
let env: Record<string, string>;
let workflowId: string;
let tokens: { access_token: string; refresh_token?: string };

const ws = () => emulator.state.workspaces.get('default');

beforeAll(async () => {
  emulator = await startEmulator({ autoApprove: true, checkDelayMs: 100, jobStepMs: 2_000 });
  env = { SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_STORE: 'env' };
  workflowId = emulator.seeded?.workflowId as string;
  tokens = await obtainTokens(emulator);
});
afterAll(async () => emulator.close());

async function createDropbox(name: string, config: Record<string, unknown>): Promise<string> {
  const result = await runInProcess(['source', 'create', '--type', 'dropbox', '--name', name, '--config', '-', '--json'], {
    env, stdin: JSON.stringify({ remote_url: 'dropbox://data', recursive: true, ...config }),
  });
  expect(result.code, result.stderr).toBe(0);
  return (JSON.parse(result.stdout) as { id: string }).id;
}

describe('source check', () => {
  it('passes for a connector whose token Dropbox honours', async () => {
    const id = await createDropbox('good', { token: tokens.access_token });
    const result = await runInProcess(['source', 'check', id], { env });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(new RegExp(`^✓ connection check passed for source connector ${id}`));
    const json = await runInProcess(['source', 'check', id, '--json'], { env });
    expect(JSON.parse(json.stdout)).toMatchObject({ status: 'SUCCESS', reason: null });
    expect(json.stdout + json.stderr).not.toContain(tokens.access_token);
  });

  it('fails with exit 1, the service\'s reason and what to do, for a token Dropbox refuses', async () => {
    const secret = 'sl.u.canary-bad-token-4471';
    const id = await createDropbox('bad', { token: secret });
    const result = await runInProcess(['source', 'check', id], { env });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`the service could not use source connector ${id}`);
    expect(result.stderr).toContain('invalid_access_token');
    expect(result.stderr).toContain(`syncauth source check ${id}`);
    const json = await runInProcess(['source', 'check', id, '--json'], { env });
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ status: 'FAILURE', reason: expect.stringContaining('invalid_access_token') });
    expect(result.stdout + result.stderr + json.stdout + json.stderr).not.toContain(secret);
  });

  it('for a revoked grant, sends the person to authorize again (setup or the page), not to refresh, which cannot help', async () => {
    const revoked = await obtainTokens(emulator);
    const withGrant = await createDropbox('revoked-grant', { refresh_token: revoked.refresh_token, app_key: DEFAULT_APP.appKey, app_secret: DEFAULT_APP.appSecret });
    const withToken = await createDropbox('revoked-token', { token: revoked.access_token });
    emulator.revokeGrant(revoked.refresh_token as string);
    const grant = await runInProcess(['source', 'check', withGrant], { env });
    expect(grant.code).toBe(1);
    expect(grant.stderr).toContain('invalid_grant');
    const grantHint = /^hint: (.*)$/m.exec(grant.stderr)?.[1] ?? '';
    expect(grantHint).toMatch(/^the Dropbox grant was revoked: authorize again with `syncauth setup`, or the link the daemon sent \(its re-authorization page\)/);
    expect(grantHint).not.toMatch(/syncauth refresh/);
    // The service holds an access token of that grant: Dropbox says only that the token is refused.
    const token = await runInProcess(['source', 'check', withToken], { env });
    expect(token.stderr).toContain('invalid_access_token');
    const tokenHint = /^hint: (.*)$/m.exec(token.stderr)?.[1] ?? '';
    expect(tokenHint).toMatch(/^if the Dropbox grant was revoked .*`syncauth setup`.*re-authorization page.*; otherwise `syncauth refresh`/);
  });

  it('refuses a malformed id before sending, and says so for an unknown one', async () => {
    expect((await runInProcess(['source', 'check', 'nope'], { env })).code).toBe(2);
    const unknown = await runInProcess(['source', 'check', '3fa85f64-5717-4562-b3fc-2c963f66afa6'], { env });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('source connector 3fa85f64-5717-4562-b3fc-2c963f66afa6 not found');
  });
});

describe('workflow run and jobs', () => {
  it('runs a workflow, lists its job, shows it until it completes', async () => {
    const sourceId = await createDropbox('run-src', { refresh_token: tokens.refresh_token, app_key: DEFAULT_APP.appKey, app_secret: DEFAULT_APP.appSecret });
    expect((await runInProcess(['workflow', 'update', workflowId, '--source-id', sourceId], { env })).code).toBe(0);
    const run = await runInProcess(['workflow', 'run', workflowId], { env });
    expect(run.code, run.stderr).toBe(0);
    const jobId = /started job ([0-9a-f-]{36})/.exec(run.stderr)?.[1] as string;
    expect(jobId).toBeDefined();
    expect(run.stdout).toMatch(/^status: +SCHEDULED$/m);
    expect(run.stderr).toContain(`syncauth jobs show ${jobId}`);

    const again = await runInProcess(['workflow', 'run', workflowId], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('There is a running job in progress');
    expect(again.stderr).toContain(`syncauth jobs list --workflow ${workflowId}`);

    const table = await runInProcess(['jobs', 'list', '--workflow', workflowId], { env });
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+WORKFLOW\s+STATUS\s+CREATED\s+RUNTIME$/);
    expect(table.stdout).toContain(jobId);
    await waitFor('the job to complete', async () => {
      const shown = await runInProcess(['jobs', 'show', jobId, '--json'], { env });
      return (JSON.parse(shown.stdout) as { status: string }).status === 'COMPLETED' ? true : undefined;
    }, 15_000);
    const completed = await runInProcess(['jobs', 'list', '--status', 'completed', '--json'], { env });
    expect((JSON.parse(completed.stdout) as { id: string }[]).map((j) => j.id)).toContain(jobId);
  }, 60_000);

  it('cancels a running job', async () => {
    const run = await runInProcess(['workflow', 'run', workflowId, '--json'], { env });
    expect(run.code, run.stderr).toBe(0);
    const job = JSON.parse(run.stdout) as { id: string };
    const cancelled = await runInProcess(['jobs', 'cancel', job.id], { env });
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(cancelled.stderr).toContain(`cancelled job ${job.id}`);
    expect(ws()?.jobs.get(job.id)?.status).toBe('STOPPED');
  });

  it('refuses bad ids and filters before sending', async () => {
    const before = emulator.state.requests.length;
    expect((await runInProcess(['jobs', 'list', '--workflow', 'wf'], { env })).code).toBe(2);
    expect((await runInProcess(['jobs', 'show', '12'], { env })).code).toBe(2);
    expect((await runInProcess(['workflow', 'run', 'x'], { env })).code).toBe(2);
    expect(emulator.state.requests.length).toBe(before);
  });
});

describe('destination commands', () => {
  const secret = 'canary-dest-secret-9911';
  let id: string;

  it('creates from stdin, sending the config unchanged and masking secrets in what it prints', async () => {
    const config = { remote_url: 's3://bucket/out', key: 'AKIACANARY', secret };
    const result = await runInProcess(['destination', 'create', '--type', 's3', '--name', 'out', '--config', '-'], { env, stdin: JSON.stringify(config) });
    expect(result.code, result.stderr).toBe(0);
    id = /created destination connector out \(([0-9a-f-]{36})\)/.exec(result.stderr)?.[1] as string;
    expect(ws()?.destinations.get(id)?.config).toEqual(config);
    expect(result.stdout).toMatch(/^ {2}secret: +\*{8}$/m);
    expect(result.stdout).toMatch(/^ {2}anonymous: +false$/m);
    expect(result.stdout + result.stderr).not.toContain(secret);
  });

  it('lists and shows, as text and JSON, masked', async () => {
    const table = await runInProcess(['destination', 'list', '--type', 's3'], { env });
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+TYPE\s+CREATED$/);
    expect(table.stdout).toContain(`${id}  out`);
    const shown = await runInProcess(['destination', 'show', id, '--json'], { env });
    expect(JSON.parse(shown.stdout)).toMatchObject({ id, type: 's3', config: { secret: '********', key: '********', remote_url: 's3://bucket/out' } });
    expect(shown.stdout).not.toContain(secret);
    const listed = await runInProcess(['destination', 'list', '--json'], { env });
    expect(listed.stdout).not.toContain(secret);
  });

  it('refuses an unknown type before sending; deletes only with --yes when not in a terminal', async () => {
    const bad = await runInProcess(['destination', 'create', '--type', 'dropbox', '--name', 'x', '--config', '-'], { env, stdin: '{}' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--type: unknown type "dropbox"');
    const refused = await runInProcess(['destination', 'delete', id], { env });
    expect(refused.code).toBe(2);
    expect(ws()?.destinations.has(id)).toBe(true);
    const deleted = await runInProcess(['destination', 'delete', id, '--yes'], { env });
    expect(deleted.code).toBe(0);
    expect(ws()?.destinations.has(id)).toBe(false);
  });
});

describe('help', () => {
  it.each([
    ['source', 'check'], ['workflow', 'run'], ['jobs', 'list'], ['jobs', 'show'], ['jobs', 'cancel'],
    ['destination', 'list'], ['destination', 'show'], ['destination', 'create'], ['destination', 'delete'],
  ])('%s %s --help has an example', async (group, command) => {
    const result = await runInProcess([group, command, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`Example:\n  syncauth ${group} ${command}`);
  });
});
