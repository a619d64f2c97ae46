// The real `syncauth exec` as a process, with the recording child of fixtures/child.mjs, and readers of what
// that child wrote.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI, watchNodeWarnings } from '../helpers/cli.js';

export const CHILD = fileURLToPath(new URL('./fixtures/child.mjs', import.meta.url));

export interface ChildStart {
  pid: number;
  token: string | undefined;
  expiresAt: string | undefined;
}

export interface ChildSignal {
  pid: number;
  signal: NodeJS.Signals;
  file?: string;
}

/** Starts `syncauth exec ARGS` in `cwd` with exactly `env`; stdout and stderr (the child's too) captured. */
export function spawnExec(env: Record<string, string>, cwd: string, args: string[]) {
  const child = spawn(process.execPath, [CLI, 'exec', ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out.stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out.stderr += chunk));
  watchNodeWarnings(`syncauth exec ${args.join(' ')}`, () => out.stderr);
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, out, exited };
}

/** `-- node child.mjs DIR MODE`: the command part of an exec invocation running the recording child. */
export function childCommand(dir: string, mode: string): string[] {
  return ['--', process.execPath, CHILD, dir, mode];
}

function lines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

export function startsIn(dir: string): ChildStart[] {
  return lines<ChildStart>(path.join(dir, 'starts.jsonl'));
}

export function signalsIn(dir: string): ChildSignal[] {
  return lines<ChildSignal>(path.join(dir, 'signals.jsonl'));
}

export function dumpOf(dir: string, pid: number): { env: Record<string, string>; argv: string[] } {
  return JSON.parse(readFileSync(path.join(dir, `env-${pid}.json`), 'utf8')) as { env: Record<string, string>; argv: string[] };
}
