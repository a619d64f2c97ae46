// Setup ends with the next command to run, printed as the person ran setup: through npx, `syncauth` alone
// fails with "command not found". From the bin on PATH it is `syncauth`, through npx what npx was given, and
// otherwise the script run by node. The binary is run each way for real; npx's own install is stood in for
// by the directory npx installs into (<cache>/_npx/<hash>/, with the package.json naming what it was given).
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { invocation } from '../../src/profile/name.js';
import { CLI, ROOT, nodeWarningError, tempDir, type CliResult } from '../helpers/cli.js';
import { grantRefreshToken, newHome, onboardingEnv, startOnboarding, type Onboarding } from '../helpers/onboarding.js';

let ob: Onboarding;
beforeAll(async () => {
  ob = await startOnboarding();
});
afterAll(async () => ob.emulator.close());

/** A fake npx cache entry for `spec`, with the bin linked to the built CLI; returns the bin's path. */
function npxInstall(spec: string | undefined): string {
  const dir = path.join(tempDir('syncauth-npx-'), '_npx', '5e1f0c0ffee');
  mkdirSync(path.join(dir, 'node_modules/.bin'), { recursive: true });
  if (spec) writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ dependencies: { syncauth: 'file:x' }, _npx: { packages: [spec] } }));
  const bin = path.join(dir, 'node_modules/.bin/syncauth');
  symlinkSync(CLI, bin);
  return bin;
}

function run(command: string, args: string[], env: Record<string, string | undefined>, cwd: string): Promise<CliResult> {
  const clean: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) clean[key] = value;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: clean, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => {
      const warned = nodeWarningError(args, stderr);
      if (warned) reject(warned);
      else resolve({ code, stdout, stderr });
    });
  });
}

async function setupVia(command: string, args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  const home = newHome();
  const env = { ...onboardingEnv(ob, home, { SYNCAUTH_PROFILE: 'docs', SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }), PATH: process.env.PATH, HOME: home.dir, ...extraEnv };
  const result = await run(command, [...args, 'setup', '--yes', '--no-check', '--no-workflow'], env, home.dir);
  expect(result.code, result.stderr).toBe(0);
  return result.stdout;
}

describe('the next command, as the person ran setup', () => {
  it('through npx with a tarball: `npx --yes ./syncauth-<version>.tgz status …`', async () => {
    const out = await setupVia(process.execPath, [npxInstall('./syncauth-0.1.0.tgz')], { npm_command: 'exec', npm_lifecycle_event: 'npx' });
    expect(out).toContain('check the profile with `npx --yes ./syncauth-0.1.0.tgz status --profile docs`');
    expect(out).toContain('`npx --yes ./syncauth-0.1.0.tgz daemon --profile docs`');
    expect(out).not.toMatch(/`syncauth /);
  });

  it('from the bin on PATH: `syncauth status …`', async () => {
    const bin = tempDir('syncauth-bin-');
    symlinkSync(CLI, path.join(bin, 'syncauth'));
    // What npm's install does to a package's bin.
    chmodSync(CLI, 0o755);
    const out = await setupVia('syncauth', [], { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}` });
    expect(out).toContain('check the profile with `syncauth status --profile docs`');
  });

  it('run as a script: `node <the script> status …`', async () => {
    const out = await setupVia(process.execPath, [CLI]);
    expect(out).toContain(`check the profile with \`node ${CLI} status --profile docs\``);
  });

  it('derives each form from argv and the environment', () => {
    const npxBin = npxInstall('syncauth@1.2.0');
    expect(invocation({ argv: ['node', npxBin], env: { npm_command: 'exec' }, cwd: '/' })).toBe('npx syncauth@1.2.0');
    expect(invocation({ argv: ['node', npxInstall(undefined)], env: { npm_command: 'exec' }, cwd: '/' })).toBe('npx syncauth');
    // A project's own dependency, run with `npx syncauth`.
    expect(invocation({ argv: ['node', path.join(ROOT, 'node_modules/.bin/syncauth')], env: { npm_command: 'exec' }, cwd: ROOT })).toBe('npx syncauth');
    expect(invocation({ argv: ['node', path.join(ROOT, 'dist/cli/main.js')], env: {}, cwd: ROOT })).toBe('node dist/cli/main.js');
    expect(invocation({ argv: ['node', '/opt/my tools/main.js'], env: {}, cwd: '/srv' })).toBe("node '/opt/my tools/main.js'");
    // A link named syncauth that PATH does not find: its path, as typed.
    const bin = tempDir('syncauth-bin-');
    symlinkSync(CLI, path.join(bin, 'syncauth'));
    expect(invocation({ argv: ['node', path.join(bin, 'syncauth')], env: { PATH: '/usr/bin' }, cwd: bin })).toBe('./syncauth');
    expect(invocation({ argv: ['node', path.join(bin, 'syncauth')], env: { PATH: bin }, cwd: '/' })).toBe('syncauth');
  });
});

describe('every fix a person reads, as they ran syncauth', () => {
  it('status, doctor, token and the daemon (its log and its exit line) name `node tools/sa setup …` when run that way', async () => {
    const home = newHome();
    mkdirSync(path.join(home.dir, 'tools'));
    symlinkSync(CLI, path.join(home.dir, 'tools/sa'));
    const via = (args: string[], extra: Record<string, string> = {}) =>
      run(process.execPath, ['tools/sa', ...args], { PATH: process.env.PATH, HOME: home.dir, ...onboardingEnv(ob, home), ...extra }, home.dir);

    const status = await via(['status', '--profile', 'ghost']);
    expect(status.code).toBe(4);
    expect(status.stderr).toContain('hint: run `node tools/sa setup --profile ghost`');
    const doctor = await via(['doctor', '--profile', 'ghost']);
    expect(doctor.stdout).toContain('→ run `node tools/sa setup --profile ghost`');
    expect(`${status.stderr}${doctor.stdout}`).not.toMatch(/`syncauth /);

    // A revoked grant, read from the environment as a container gives it.
    const refreshToken = await grantRefreshToken(ob);
    ob.emulator.revokeGrant(refreshToken);
    const container = { SYNCAUTH_STORE: 'env', SYNCAUTH_PROFILE: 'gone', SYNCAUTH_REFRESH_TOKEN: refreshToken, SYNCAUTH_TOKEN_FILE: path.join(home.dir, 'token') };
    const token = await via(['token'], container);
    expect(token.code).toBe(4);
    expect(token.stderr).toContain('`node tools/sa setup --profile gone`');
    const once = await via(['daemon', '--once'], container);
    expect(once.code).toBe(4);
    expect(once.stderr).toContain('hint: run `node tools/sa setup --profile gone` to authorize again');
    const parked = once.stdout.split('\n').filter((line) => line.includes('re-authorization'));
    expect(parked.length, once.stdout).toBeGreaterThan(0);
    for (const line of parked) expect(line).toContain('`node tools/sa setup --profile gone`');
    expect(`${token.stderr}${once.stderr}${once.stdout}`).not.toMatch(/`syncauth /);
  }, 60_000);
});
