// Runs the built CLI as a user would: a separate process, a clean environment, real exit codes.
import childProcess, { spawn, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = path.join(ROOT, 'dist/cli/main.js');
/**
 * How the CLI run by these helpers names itself in the commands it tells a person to run: as it was invoked
 * (src/profile/name.ts), here the script run by node from a temporary directory.
 */
export const RUN_AS = `node ${CLI}`;

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  stdin?: string;
  cwd?: string;
  timeoutMs?: number;
}

const made: string[] = [];

/**
 * Node's own warnings (`(node:1234) MaxListenersExceededWarning: …`, deprecations) are not for the person
 * running syncauth: every run of the CLI in a test fails on one, so none reaches a user unseen.
 */
export function nodeWarnings(stderr: string): string[] {
  return stderr.split(/\r?\n/).filter((line) => /^\s*\(node:\d*\)/.test(line));
}

/** The error a test run of the CLI fails with when Node printed a warning of its own, or undefined. */
export function nodeWarningError(args: readonly string[], stderr: string): Error | undefined {
  const lines = nodeWarnings(stderr);
  return lines.length ? new Error(`syncauth ${args.join(' ')} printed Node's warnings on stderr:\n${lines.join('\n')}\n--- stderr ---\n${stderr}`) : undefined;
}

/** Spawned processes whose stderr is checked after each test, with how much of it was checked already. */
const watched: { what: string; stderr: () => string; checked: number }[] = [];

/**
 * Has every test check the process's stderr for Node's own warnings (see `checkNodeWarnings`, run after each
 * test by test/setup.ts): for the helpers whose processes run on (a daemon, `exec --watch`) or are killed, and
 * so never hand a finished result to check.
 */
export function watchNodeWarnings(what: string, stderr: () => string): void {
  watched.push({ what, stderr, checked: 0 });
}

/** Throws naming each watched process that printed Node's warnings since the last check. */
export function checkNodeWarnings(): void {
  const found: string[] = [];
  for (const entry of watched) {
    const text = entry.stderr();
    const lines = nodeWarnings(text.slice(entry.checked));
    entry.checked = text.length;
    if (lines.length > 0) found.push(`${entry.what}:\n${lines.join('\n')}\n--- stderr ---\n${text}`);
  }
  if (found.length > 0) throw new Error(`a spawned process printed Node's warnings on stderr:\n${found.join('\n')}`);
}

/** Whether a spawn runs the built CLI (or a link to it, or a bin named syncauth): argv mentions it. */
function runsSyncauth(command: string, args: readonly unknown[]): boolean {
  return [command, ...args].some((arg) => typeof arg === 'string' && (arg === CLI || arg.endsWith('/dist/cli/main.js') || path.basename(arg) === 'syncauth'));
}

/**
 * Every test file's own spawns of the CLI (beside the helpers above) are watched too: `spawn` and `spawnSync` of
 * node:child_process are wrapped for the file's run (test/setup.ts), so a test that runs syncauth its own way
 * fails on Node's warnings as well. Only processes that run syncauth are watched.
 */
export function watchSpawnedCli(): void {
  const original = { spawn: childProcess.spawn, spawnSync: childProcess.spawnSync };
  if ((original.spawn as { watched?: boolean }).watched) return;
  const spawnWatched = function (this: unknown, command: string, ...rest: unknown[]) {
    const child = (original.spawn as (...a: unknown[]) => ChildProcess).call(this, command, ...rest);
    const args = Array.isArray(rest[0]) ? (rest[0] as unknown[]) : [];
    if (child.stderr && runsSyncauth(command, args)) {
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer | string) => (stderr += chunk.toString()));
      watchNodeWarnings(`${command} ${args.join(' ')}`, () => stderr);
    }
    return child;
  };
  const spawnSyncWatched = function (this: unknown, command: string, ...rest: unknown[]) {
    const result = (original.spawnSync as (...a: unknown[]) => SpawnSyncReturns<Buffer | string>).call(this, command, ...rest);
    const args = Array.isArray(rest[0]) ? (rest[0] as unknown[]) : [];
    if (result.stderr && runsSyncauth(command, args)) {
      const stderr = result.stderr.toString();
      watchNodeWarnings(`${command} ${args.join(' ')}`, () => stderr);
    }
    return result;
  };
  Object.assign(spawnWatched, { watched: true });
  childProcess.spawn = spawnWatched as typeof childProcess.spawn;
  childProcess.spawnSync = spawnSyncWatched as typeof childProcess.spawnSync;
  // `import { spawn } from 'node:child_process'` in the test files sees the wrapped one.
  syncBuiltinESMExports();
}

/** Stops watching (the test file is done: its processes are gone). */
export function forgetWatched(): void {
  watched.splice(0);
}

/** A fresh directory to run in, so no `.env` of the repository or the user leaks into a test. */
export function tempDir(prefix = 'syncauth-test-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes the directories tempDir() made in this test file (run after each file, see test/setup.ts). */
export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  const cwd = options.cwd ?? tempDir();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: cwd,
    SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config'),
  };
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 20_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const warned = nodeWarningError(args, stderr);
      if (warned) reject(warned);
      else resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.stdin ?? '');
  });
}
