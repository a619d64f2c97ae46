// `syncauth exec --watch` when renewals fail: a transient failure is retried with backoff while the child
// keeps running; a revoked grant is reported and the child keeps its token until it expires.
import { describe, expect, it } from 'vitest';
import { RUN_AS } from '../helpers/cli.js';
import { alive, waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant, tempDir } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';
import { childCommand, spawnExec, startsIn } from './helpers.js';

describe('syncauth exec --watch, renewals failing', () => {
  it('retries a failed renewal while the child runs on, and keeps the child when the grant is revoked', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 6 });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const { child, out, exited } = spawnExec(containerEnv(emu, grant, home), home, ['--watch', '--renew-margin', '3', ...childCommand(home, 'wait')]);
    try {
      const first = await waitFor('the child', () => startsIn(home)[0]);
      emu.setFaults([{ route: 'token', status: 503, times: 2 }]);
      const second = await waitFor('the restart after the failures', () => startsIn(home)[1], 15_000);
      const lines = out.stderr.split('\n');
      const failed = lines.filter((l) => /^syncauth exec: token renewal failed: .*HTTP 503.*the child keeps its current token; retrying in 1 s$/.test(l));
      expect(failed).toHaveLength(2);
      expect(lines.indexOf('syncauth exec: token renewal works again')).toBeGreaterThan(lines.indexOf(failed[1] as string));
      expect(second.token).not.toBe(first.token);

      emu.revokeGrant(grant.refreshToken);
      await waitFor('the re-authorization line', () => (out.stderr.includes('the grant needs re-authorization') ? true : undefined), 15_000);
      expect(out.stderr).toContain(`run \`${RUN_AS} setup --profile container\` to authorize again`);
      // Not restarted, not stopped: it keeps the token it has.
      expect(startsIn(home)).toHaveLength(2);
      expect(alive(second.pid)).toBe(true);
      expect(child.exitCode).toBeNull();
      child.kill('SIGTERM');
      expect(await exited).toBe(42);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
