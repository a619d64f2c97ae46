// What setup says, in the order the person needs it: the checklist starts where they start (creating the
// app) and says where the service's API key comes from; at the end, what was made is said before the
// connection check of it runs (stdout and stderr read together, as on a terminal).
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, nodeWarnings } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { grantRefreshToken, newHome, onboardingEnv, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;
beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

/** Runs the binary with stdout and stderr in one stream, in the order written. */
function runMerged(args: string[], env: Record<string, string | undefined>, cwd: string): Promise<{ code: number | null; output: string }> {
  const clean: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) clean[key] = value;
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', '"$0" "$@" 2>&1', process.execPath, CLI, ...args], { cwd, env: clean, stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { output += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('the order of what setup says', () => {
  it('the checklist starts with creating the app, and says where the API key comes from', async () => {
    const result = await runInProcess(['setup', '--yes'], { env: { SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: 'a-store-key-long-enough-for-it' } });
    expect(result.code, result.stderr).toBe(2);
    const lines = result.stderr.split('\n');
    const create = lines.findIndex((l) => /^ {2}1\. "Create app"/.test(l));
    const scoped = lines.findIndex((l) => l.includes('Scoped access'));
    expect(create, result.stderr).toBeGreaterThanOrEqual(0);
    expect(lines[create]).toContain('app key and app secret');
    expect(scoped).toBeGreaterThan(create);
    expect(result.stderr).toMatch(/The service's API key comes from the service's UI, API keys/);
  });

  it("the connector is said to be made before its connection check starts", async () => {
    const home = newHome();
    const env = { ...onboardingEnv(ob, home, { SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob), SYNCAUTH_CONNECTOR_NAME: 'ordered' }), PATH: process.env.PATH, HOME: home.dir };
    const { code, output } = await runMerged(['setup', '--yes', '--no-workflow'], env, home.dir);
    expect(code, output).toBe(0);
    expect(nodeWarnings(output)).toEqual([]);
    const made = output.indexOf('✓ source connector ordered created');
    const checking = output.indexOf('checking that the service can use source connector');
    const passed = output.indexOf("✓ the service's connection check of the connector passed");
    expect(made, output).toBeGreaterThanOrEqual(0);
    expect(checking, output).toBeGreaterThan(made);
    expect(passed).toBeGreaterThan(checking);
  });
});
