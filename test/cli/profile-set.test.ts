// `syncauth profile set`, run as a user would after onboarding: the built CLI against the emulator, only the
// store settings in the environment. A change is saved only after the service (or Dropbox) confirmed what can
// be confirmed, and `refresh` then applies it on the service.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../../src/service/client.js';
import { RUN_AS } from '../helpers/cli.js';
import {
  clearRequestLog, newHome, onboardWithGrant, profileFile, readProfileState, runCli, sources, startOnboarding, type Onboarded, type Onboarding,
} from '../helpers/onboarding.js';

let ob: Onboarding;
let client: ServiceClient;

beforeAll(async () => {
  ob = await startOnboarding();
  client = new ServiceClient({ baseUrl: ob.emulator.url, apiKey: ob.apiKey });
});
afterAll(async () => {
  await client.close();
  await ob.emulator.close();
});

const onboard = (profile: string): Promise<Onboarded> => onboardWithGrant(ob, profile, newHome());

function run(p: Onboarded, args: string[], env: Record<string, string> = {}) {
  return runCli(args, { env: { ...p.env, ...env }, cwd: p.home.dir });
}

const stateText = (p: Onboarded) => readFileSync(profileFile(p.home, p.profile), 'utf8');

/** The state less what a token renewal records (checking a folder may renew the access token). */
function settingsOf(p: Onboarded): Record<string, unknown> {
  const { accessTokenExpiresAt: _e, lastRenewalAt: _r, updatedAt: _u, ...rest } = readProfileState(p.home, p.profile) ?? {};
  return rest;
}

function workflow(id: string) {
  const found = ob.emulator.state.workspaces.get('default')?.workflows.get(id);
  if (!found) throw new Error(`no workflow ${id} in the emulator`);
  return found;
}

async function newWorkflow(name: string): Promise<string> {
  return (await client.createWorkflow({ name, workflow_type: 'basic' })).id;
}

describe('profile set', () => {
  it('wires a workflow and schedule checked with the service, says what changed, and refresh applies it', async () => {
    const p = await onboard('wire');
    const id = await newWorkflow('wire-wf');
    const result = await run(p, ['profile', 'set', '--profile', 'wire', '--workflow-id', id, '--schedule', 'every 4 hours']);
    expect(result.stderr).not.toMatch(/error/);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('✓ profile "wire" changed:');
    expect(result.stdout).toContain(`  workflow: none -> ${id}\n`);
    expect(result.stdout).toContain('  schedule: none -> every 4 hours\n');
    expect(result.stdout).toMatch(/`node \S+\/main\.js refresh --profile wire` applies them to the service now; a running daemon takes them up when reloaded \(SIGHUP\)/);
    expect(readProfileState(p.home, 'wire')).toMatchObject({ workflowId: id, schedule: 'every 4 hours', connectorId: p.connectorId });
    // Saved, not yet applied: the service changes at the next refresh.
    expect(workflow(id).sources).toEqual([]);

    const refreshed = await run(p, ['refresh', '--profile', 'wire']);
    expect(refreshed.code).toBe(0);
    expect(workflow(id).sources).toEqual([p.connectorId]);
    expect(workflow(id).schedule?.crontab_entries).toEqual([{ cron_expression: '0 */4 * * *' }]);
  });

  it('never saves a workflow id the service does not know: exit 2 naming --workflow-id, state untouched', async () => {
    const p = await onboard('unknown-wf');
    const before = stateText(p);
    const missing = '3fa85f64-5717-4562-b3fc-2c963f66afa6';
    const result = await run(p, ['profile', 'set', '--profile', 'unknown-wf', '--workflow-id', missing]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`error: --workflow-id: the service has no workflow ${missing} in the workspace of profile "unknown-wf"'s API key`);
    expect(result.stderr).toContain(`${RUN_AS} workflow list --profile unknown-wf`);
    expect(result.stdout).toBe('');
    expect(stateText(p)).toBe(before);

    // Not a UUID: refused before anything is sent.
    clearRequestLog(ob);
    const malformed = await run(p, ['profile', 'set', '--profile', 'unknown-wf', '--workflow-id', 'not-a-uuid']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toContain('--workflow-id: must be a UUID, got "not-a-uuid"');
    expect(ob.emulator.state.requests.filter((r) => r.route === 'workflows')).toEqual([]);
    expect(stateText(p)).toBe(before);
  });

  it('a workflow check the service cannot answer keeps its error code, names --workflow-id and saves nothing', async () => {
    const p = await onboard('svc-error');
    const before = stateText(p);
    const id = await newWorkflow('svc-error-wf');
    // The environment's key wins over the stored one, and this one the service does not know.
    const result = await run(p, ['profile', 'set', '--profile', 'svc-error', '--workflow-id', id], { SYNCAUTH_API_KEY: 'not-a-key-of-this-service' });
    expect(result.code).toBe(4);
    expect(result.stderr).toMatch(/^error: --workflow-id: could not check workflow \S+ with the service: .*nothing was saved$/m);
    expect(stateText(p)).toBe(before);
  });

  it('refuses an unknown schedule, and a schedule with no workflow to apply to', async () => {
    const p = await onboard('sched');
    const before = stateText(p);
    const unknown = await run(p, ['profile', 'set', '--profile', 'sched', '--schedule', 'hourly']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--schedule: unknown schedule "hourly"; it must be one of: every 15 minutes, every hour,');
    const orphan = await run(p, ['profile', 'set', '--profile', 'sched', '--schedule', 'daily']);
    expect(orphan.code).toBe(2);
    expect(orphan.stderr).toContain('--schedule: a schedule needs a workflow to apply to: give --workflow-id too');
    const both = await run(p, ['profile', 'set', '--profile', 'sched', '--workflow-id', '3fa85f64-5717-4562-b3fc-2c963f66afa6', '--no-workflow']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--no-workflow: cannot be given with --workflow-id');
    expect(stateText(p)).toBe(before);
  });

  it('with nothing to change says so and exits 2; an unknown profile exits 1 naming it', async () => {
    const p = await onboard('nothing');
    const before = stateText(p);
    const nothing = await run(p, ['profile', 'set', '--profile', 'nothing']);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('error: nothing to change: give at least one of --workflow-id, --no-workflow, --schedule, --clear-schedule');
    expect(stateText(p)).toBe(before);

    const unknown = await run(p, ['profile', 'set', '--profile', 'nosuch', '--recursive']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('error: there is no profile "nosuch"; nothing was changed');
    expect(unknown.stderr).toContain('the existing profiles are: nothing');
    expect(readProfileState(p.home, 'nosuch')).toBeUndefined();
  });

  it('--no-workflow stops wiring the workflow and its schedule, leaving the workflow on the service as it is', async () => {
    const p = await onboard('unwire');
    const id = await newWorkflow('unwire-wf');
    expect((await run(p, ['profile', 'set', '--profile', 'unwire', '--workflow-id', id, '--schedule', 'daily'])).code).toBe(0);
    expect((await run(p, ['refresh', '--profile', 'unwire'])).code).toBe(0);

    const result = await run(p, ['profile', 'set', '--profile', 'unwire', '--no-workflow', '--json']);
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as { profile: string; changes: unknown[]; notes: string[] };
    expect(out.profile).toBe('unwire');
    expect(out.changes).toEqual([{ setting: 'workflowId', from: id, to: null }, { setting: 'schedule', from: 'daily', to: null }]);
    expect(out.notes[0]).toBe(`workflow ${id} keeps reading from the connector on the service; syncauth no longer updates it`);
    const state = readProfileState(p.home, 'unwire');
    expect(state).not.toHaveProperty('workflowId');
    expect(state).not.toHaveProperty('schedule');
    expect(workflow(id).sources).toEqual([p.connectorId]);
  });

  it('--remote-url must name a folder that exists in the app folder; --recursive is recorded; a repeat changes nothing', async () => {
    const p = await onboard('folder');
    const before = settingsOf(p);
    const missing = await run(p, ['profile', 'set', '--profile', 'folder', '--remote-url', 'dropbox://nowhere']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('error: --remote-url: the folder /nowhere does not exist in the app folder');
    const malformed = await run(p, ['profile', 'set', '--profile', 'folder', '--remote-url', 's3://bucket']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(/--remote-url: /);
    expect(settingsOf(p)).toEqual(before);

    const moved = await run(p, ['profile', 'set', '--profile', 'folder', '--remote-url', 'dropbox://inbox', '--recursive']);
    expect(moved.code).toBe(0);
    expect(moved.stderr).toContain('✓ dropbox://inbox exists in the app folder');
    expect(moved.stdout).toContain('  remote URL: dropbox://data -> dropbox://inbox\n  recursive: false -> true\n');
    expect(readProfileState(p.home, 'folder')).toMatchObject({ remoteUrl: 'dropbox://inbox', recursive: true });

    const again = await run(p, ['profile', 'set', '--profile', 'folder', '--recursive']);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('profile "folder" already has these settings; nothing changed\n');

    expect((await run(p, ['refresh', '--profile', 'folder'])).code).toBe(0);
    expect(sources(ob).find((s) => s.id === p.connectorId)?.config).toMatchObject({ remote_url: 'dropbox://inbox', recursive: true });
  });

  it('--connector-name refuses a name another connector has; a free one makes refresh create it and says the old one stays', async () => {
    const p = await onboard('named');
    const other = await onboard('named-other');
    const before = stateText(p);
    const taken = await run(p, ['profile', 'set', '--profile', 'named', '--connector-name', 'conn-named-other']);
    expect(taken.code).toBe(2);
    expect(taken.stderr).toContain(`--connector-name: a source connector named "conn-named-other" (${other.connectorId}) already exists on the service`);
    expect(stateText(p)).toBe(before);

    const renamed = await run(p, ['profile', 'set', '--profile', 'named', '--connector-name', 'named-renamed']);
    expect(renamed.code).toBe(0);
    expect(renamed.stdout).toContain('  connector name: conn-named -> named-renamed\n');
    expect(renamed.stdout).toContain(`the connector "conn-named" (${p.connectorId}) stays on the service until you delete it: \`${RUN_AS} source delete ${p.connectorId}\``);
    expect(readProfileState(p.home, 'named')).not.toHaveProperty('connectorId');

    expect((await run(p, ['refresh', '--profile', 'named'])).code).toBe(0);
    const made = sources(ob).find((s) => s.name === 'named-renamed');
    expect(made).toBeDefined();
    expect(readProfileState(p.home, 'named')).toMatchObject({ connectorId: made?.id, connectorName: 'named-renamed' });
    expect(sources(ob).some((s) => s.id === p.connectorId)).toBe(true);
  });
});
