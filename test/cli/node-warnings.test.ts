// The check every test gets (test/setup.ts): a syncauth spawned by a helper, or by a test itself, that prints one
// of Node's own warnings on stderr fails the test. Proved here with a warning injected through NODE_OPTIONS.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnDaemon } from '../daemon/process.js';
import { CLI, checkNodeWarnings, tempDir } from '../helpers/cli.js';

function warningPreload(): string {
  const file = path.join(tempDir('syncauth-warn-'), 'warn.cjs');
  writeFileSync(file, "process.emitWarning('injected by the test', 'InjectedWarning');\n");
  return file;
}

describe("Node's warnings on a spawned syncauth's stderr", () => {
  it("fail the test, for a process the test spawned itself and for the daemon helper's", async () => {
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_OPTIONS: `--require ${warningPreload()}` };
    const child = spawn(process.execPath, [CLI, '--version'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise((resolve) => child.once('close', resolve));
    expect(() => checkNodeWarnings()).toThrow(/InjectedWarning: injected by the test/);

    const home = tempDir();
    const daemon = spawnDaemon({ ...env, HOME: home, SYNCAUTH_CONFIG_DIR: home }, home, ['--once']);
    await daemon.exited;
    expect(() => checkNodeWarnings()).toThrow(/syncauth daemon .*\n.*InjectedWarning/);

    // A clean run passes.
    const clean = spawn(process.execPath, [CLI, '--version'], { env: { PATH: env.PATH }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise((resolve) => clean.once('close', resolve));
    expect(() => checkNodeWarnings()).not.toThrow();
  });
});
