// What setup says, in the order the person needs it: the checklist starts where they start (creating the
// app) and says where the service's API key comes from; at the end, what was made is said before the
// connection check of it runs (stdout and stderr read together, as on a terminal).
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, nodeWarnings } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { waitFor } from '../helpers/wait.js';
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

  it('with --public-url, the checklist names the re-authorization page\'s redirect URI to register, before anything else happens', async () => {
    const publicUrl = 'https://syncauth.example.com';
    const result = await runInProcess(['setup', '--yes', '--public-url', publicUrl], { env: { SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: 'a-store-key-long-enough-for-it' } });
    // It stops at the first check (nothing given): the checklist was said before that.
    expect(result.code, result.stderr).toBe(2);
    const checklist = result.stderr.slice(0, result.stderr.indexOf('\n\n'));
    expect(checklist).toContain('Redirect URIs:');
    expect(checklist).toContain(`${publicUrl}/reauthorize/callback`);
  });

  it('without a terminal, a setup that needs a browser says at once that it waits for one, and how long', async () => {
    const home = newHome();
    const env = { ...onboardingEnv(ob, home, { SYNCAUTH_CONNECTOR_NAME: 'no-terminal' }), PATH: process.env.PATH, HOME: home.dir };
    // No grant handed in and no terminal: the browser round is all that is left. Stopped once it has spoken.
    const child = spawn(process.execPath, [CLI, 'setup', '--yes', '--no-open', '--no-workflow', '--timeout', '120'], {
      cwd: home.dir, env: Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)), stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    try {
      await waitFor('the authorize URL', () => (/oauth2\/authorize\?/.test(err) ? true : undefined), 30_000);
      const before = err.slice(0, err.search(/Open this URL/));
      expect(before).toMatch(/no terminal here: setup needs one browser round at Dropbox and waits up to 120 s/i);
      expect(before).toMatch(/SYNCAUTH_REFRESH_TOKEN/);
    } finally {
      child.kill('SIGTERM');
    }
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
