// `syncauth --help` is printed from a file rendered at build time, without loading the command tree: the file
// must be exactly what the command tree prints, and the binary must print it whatever the terminal's width,
// and fall back to the command tree when the file is missing.
import { readFileSync, renameSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderTopHelp } from '../../src/cli/help-cache.js';
import { CLI, ROOT } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';

const BUILT = path.join(ROOT, 'dist/cli/help.txt');

function binary(args: string[], env: Record<string, string> = {}): { code: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

describe('the pre-rendered help', () => {
  it('is what the command tree prints for --help, and what the built binary prints for --help and -h', async () => {
    const rendered = await renderTopHelp();
    expect(rendered).toContain('Usage: syncauth [options] [command]');
    expect(rendered).toContain('Exit codes: 0 ok');
    expect((await runInProcess(['--help'])).stdout).toBe(rendered);
    expect(readFileSync(BUILT, 'utf8')).toBe(rendered);
    for (const flag of ['--help', '-h']) {
      const run = binary([flag]);
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('');
      expect(run.stdout).toBe(rendered);
    }
  });

  it('does not depend on the terminal: on a 200- or 50-column terminal a run prints the same', async () => {
    const expected = readFileSync(BUILT, 'utf8');
    const stdout = process.stdout as { isTTY?: boolean; columns?: number };
    const saved = { isTTY: stdout.isTTY, columns: stdout.columns };
    try {
      for (const columns of [200, 50]) {
        Object.assign(stdout, { isTTY: true, columns });
        expect((await runInProcess(['--help'])).stdout, `${columns} columns`).toBe(expected);
      }
    } finally {
      Object.assign(stdout, saved);
    }
  });

  it('when the file is missing, the binary prints the same help through the command tree', () => {
    const expected = readFileSync(BUILT, 'utf8');
    renameSync(BUILT, `${BUILT}.gone`);
    try {
      const run = binary(['--help']);
      expect(run.code).toBe(0);
      expect(run.stdout).toBe(expected);
    } finally {
      renameSync(`${BUILT}.gone`, BUILT);
    }
  });
});
