// `syncauth doctor` on where the sinks live: a token file, template DEST or socket in a directory other users
// may write is flagged with where the daemon publishes it instead; a squatted subdirectory, or a link or another
// user's file at a sink, fails with the fix.
import { spawnSync } from 'node:child_process';
import { chmodSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';

const NOBODY = 65534;
const UID = process.geteuid?.() ?? 0;

interface Check {
  check: string;
  subject: string;
  status: 'ok' | 'warn' | 'fail';
  message: string;
  fix?: string;
}

async function sinkChecks(args: string[], env: Record<string, string> = {}): Promise<Check[]> {
  const home = tempDir();
  const result = await runCli(['doctor', '--json', ...args], { env: { SYNCAUTH_STORE: 'env', ...env }, cwd: home });
  const body = JSON.parse(result.stdout) as { checks: Check[] };
  return body.checks.filter((c) => ['token-file', 'template', 'socket'].includes(c.check));
}

function sticky(): string {
  const dir = tempDir('syncauth-doctor-');
  chmodSync(dir, 0o1777);
  return dir;
}

describe('doctor on where sinks live', () => {
  it('a token file in a private directory is ok; in a sticky world-writable one it warns where the daemon publishes it', async () => {
    const mine = tempDir('syncauth-doctor-');
    expect(await sinkChecks(['--token-file', path.join(mine, 'token')])).toEqual([expect.objectContaining({ check: 'token-file', status: 'ok' })]);
    const shared = sticky();
    const [check] = await sinkChecks(['--token-file', path.join(shared, 'token')]);
    expect(check).toMatchObject({ check: 'token-file', status: 'warn' });
    expect(check?.message).toContain(`${shared} is world-writable (01777)`);
    expect(check?.message).toContain(path.join(shared, `syncauth-${UID}`, 'token'));
  });

  it('fails when the subdirectory there belongs to another user: the daemon would refuse to start', async () => {
    const shared = sticky();
    const own = path.join(shared, `syncauth-${UID}`);
    const made = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'mkdir', own]);
    expect(made.status).toBe(0);
    const [check] = await sinkChecks(['--token-file', path.join(shared, 'token')]);
    expect(check).toMatchObject({ check: 'token-file', status: 'fail' });
    expect(check?.message).toContain(`${own} belongs to uid ${NOBODY}`);
    expect(check?.fix).toContain(`remove ${own}`);
  });

  it('fails for a link at a template DEST or at the token file, and warns for a socket in a group-writable directory', async () => {
    const dir = tempDir('syncauth-doctor-');
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const dest = path.join(dir, 'app.env');
    symlinkSync('/etc/passwd', dest);
    const token = path.join(dir, 'token');
    symlinkSync('/etc/shadow', token);
    const group = tempDir('syncauth-doctor-');
    chmodSync(group, 0o770);
    const checks = await sinkChecks(['--token-file', token, '--template', `${source}:${dest}`], { SYNCAUTH_SOCKET: path.join(group, 'token.sock') });
    expect(checks).toEqual([
      expect.objectContaining({ check: 'token-file', status: 'fail', message: `${token} is a symbolic link: the daemon never adopts it` }),
      expect.objectContaining({ check: 'template', status: 'fail', message: `${dest} is a symbolic link: the daemon never writes through it` }),
      expect.objectContaining({ check: 'socket', status: 'warn', message: expect.stringContaining(`${group} is group-writable (0770)`) as string }),
    ]);
  });
});
