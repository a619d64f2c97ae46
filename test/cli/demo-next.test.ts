// What the demo leaves a newcomer with: it removes its profile when it ends, so nothing it prints may send them
// to that profile (setup's "Next: … --profile demo"); its last words name what to run with their own accounts.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLI, tempDir } from '../helpers/cli.js';

describe('the demo', () => {
  it('ends pointing at setup for real accounts, never at the profile it removed', () => {
    const home = tempDir('syncauth-demo-');
    const result = spawnSync(process.execPath, [CLI, 'demo'], { cwd: home, encoding: 'utf8', timeout: 90_000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home } });
    expect(result.status, `${result.stdout}\n${result.stderr}`).toBe(0);
    const output = `${result.stdout}\n${result.stderr}`;
    expect(output).toContain('profile:       demo');
    expect(output).not.toMatch(/--profile demo\b/);
    expect(output).not.toMatch(/^Next: /m);
    const last = result.stdout.trim().split('\n').at(-1) ?? '';
    expect(last).toMatch(/^Done\. .*`syncauth setup`.*`syncauth daemon`/);
  }, 100_000);
});
