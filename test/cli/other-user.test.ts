// The CLI the permission tests run as another user (test/helpers/other-user.ts). From a checkout that user
// cannot enter (cloned into a `mktemp -d` directory) it runs a copy of the package; the copy is exercised here
// on every run, so it works before such a checkout needs it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { copyForOtherUser, runAsOtherUser, sharedDir } from '../helpers/other-user.js';

describe('the copy of the CLI another user runs', () => {
  it('runs as nobody, dependencies and all, from outside the checkout', async () => {
    const cli = copyForOtherUser();
    expect(path.relative(ROOT, cli).startsWith('..')).toBe(true);
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const shown = await runAsOtherUser([process.execPath, cli, '--version']);
    expect(shown.stderr).toBe('');
    expect(shown.stdout.trim()).toBe(version);
    // A command that loads the configuration, the secret stores and the service client.
    const cwd = sharedDir();
    const status = await runAsOtherUser([process.execPath, cli, 'status'], { cwd, env: { SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config') } });
    expect(status.stderr).toBe('');
    expect(status.code).toBe(0);
  });
});
