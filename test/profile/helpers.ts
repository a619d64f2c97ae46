// Runs a TypeScript fixture in a separate node process, the way a second syncauth process would touch the
// same config directory.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../..');
const LOADER = path.join(here, 'fixtures/ts-loader.mjs');

export interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runTsChild(script: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', LOADER, script, ...args], {
      cwd: ROOT,
      env: { ...env, NODE_OPTIONS: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export function expectAllSucceeded(results: ChildResult[]): void {
  const failed = results.filter((result) => result.code !== 0);
  if (failed.length > 0) {
    throw new Error(`${failed.length} child process(es) failed:\n${failed.map((result) => result.stderr).join('\n---\n')}`);
  }
}

/**
 * Runs `count` children that each wait at a barrier (fixtures/barrier.ts) and lets them go together once all
 * have started, so their work overlaps however long each took to start. `args(barrier, index)` builds each
 * child's arguments.
 */
export async function runTogether(
  script: string,
  count: number,
  workDir: string,
  args: (barrier: string, index: number) => string[],
  env?: NodeJS.ProcessEnv,
): Promise<ChildResult[]> {
  const barrier = path.join(workDir, `barrier-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  mkdirSync(barrier);
  let exited = 0;
  const children = Array.from({ length: count }, (_, index) =>
    runTsChild(script, args(barrier, index), env).finally(() => (exited += 1)),
  );
  const deadline = Date.now() + 20_000;
  // A child that exits before the barrier has failed: stop waiting, its error is in the results.
  while (readdirSync(barrier).filter((name) => name.startsWith('ready-')).length < count && exited === 0) {
    if (Date.now() > deadline) throw new Error('the child processes did not all reach the barrier within 20 s');
    await sleep(5);
  }
  writeFileSync(path.join(barrier, 'go'), '');
  return Promise.all(children);
}
