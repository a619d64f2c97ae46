// The service's client and Dropbox's steps name the command that fixes a failure without knowing how syncauth
// was run; the binary prints it as the person ran it (`node …/main.js`, npx, the bin on PATH), never a bare
// `syncauth` that may not be found.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, DEFAULT_EMULATOR_API_KEY, startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RUN_AS, runCli } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { obtainTokens } from '../emulator/helpers.js';

let emulator: RunningEmulator;
let env: Record<string, string>;

beforeAll(async () => {
  emulator = await startEmulator({ autoApprove: true, checkDelayMs: 100, jobStepMs: 10_000 });
  env = { SYNCAUTH_BASE_URL: emulator.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_STORE: 'env' };
});
afterAll(async () => emulator.close());

describe("a remedy of the service's client, as the person ran syncauth", () => {
  it('a workflow run refused while a job runs names `jobs list` through the script that was run', async () => {
    const tokens = await obtainTokens(emulator);
    const workflowId = emulator.seeded?.workflowId as string;
    const created = await runInProcess(['source', 'create', '--type', 'dropbox', '--name', 'remedy-src', '--config', '-', '--json'], {
      env,
      stdin: JSON.stringify({ remote_url: 'dropbox://data', recursive: true, refresh_token: tokens.refresh_token, app_key: DEFAULT_APP.appKey, app_secret: DEFAULT_APP.appSecret }),
    });
    expect(created.code, created.stderr).toBe(0);
    const sourceId = (JSON.parse(created.stdout) as { id: string }).id;
    expect((await runInProcess(['workflow', 'update', workflowId, '--source-id', sourceId], { env })).code).toBe(0);

    const run = await runCli(['workflow', 'run', workflowId], { env });
    expect(run.code, run.stderr).toBe(0);
    const again = await runCli(['workflow', 'run', workflowId], { env });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`hint: a job of this workflow is probably still running; see \`${RUN_AS} jobs list --workflow ${workflowId}\``);
    expect(again.stderr).not.toMatch(/`syncauth /);
  }, 60_000);
});
