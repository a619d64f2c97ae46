// Runs the built CLI as a user would: a separate process, a clean environment, real exit codes.
import { spawn } from 'node:child_process';
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
