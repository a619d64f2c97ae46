// The real daemon under Debian's libfaketime, whose wall clock the test steps while the monotonic clock runs
// on (FAKETIME_DONT_FAKE_MONOTONIC): NTP stepping the clock back an hour, and the clock thrown an hour ahead as
// after a resume. The emulator, in this process, keeps the provider's real time.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isCI } from '../helpers/secret-service.js';
import { emulator, obtainGrant, renewalsOf, tempDir } from './helpers.js';
import { waitFor } from '../helpers/wait.js';
import { containerEnv, spawnDaemon } from './process.js';

const LIBFAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1']
  .find((file) => existsSync(file));
const MISSING = 'libfaketime not found; install the Debian package: apt-get install -y faketime';
if (!LIBFAKETIME && isCI()) throw new Error(`${MISSING} (required in CI: CI is set)`);
if (!LIBFAKETIME) console.warn(`${MISSING}; skipping the clock-step tests (they fail instead when CI is set)`);

const LIFETIME_S = 6;

async function daemonUnderFaketime() {
  const emu = await emulator({ tokenLifetimeSeconds: LIFETIME_S });
  const grant = await obtainGrant(emu);
  const home = tempDir();
  const tokenFile = path.join(home, 'token');
  const offsetFile = path.join(home, 'faketime');
  writeFileSync(offsetFile, '+0\n');
  const env = {
    ...containerEnv(emu, grant, home, { tokenFile }),
    LD_PRELOAD: LIBFAKETIME as string,
    FAKETIME_TIMESTAMP_FILE: offsetFile,
    FAKETIME_NO_CACHE: '1',
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  };
  const daemon = spawnDaemon(env, home, ['--sweep', '* * * * * *', '--renew-margin', '2']);
  await daemon.ready((await daemon.started()).listen);
  /** The token in the file, as the provider sees it now: live, expired, or absent. */
  const published = (): 'live' | 'expired' | 'absent' => {
    const token = existsSync(tokenFile) ? readFileSync(tokenFile, 'utf8') : undefined;
    if (!token) return 'absent';
    return (emu.state.accessTokens.get(token)?.expiresAt ?? 0) > Date.now() ? 'live' : 'expired';
  };
  return {
    emu, grant, daemon, published,
    step: (offset: string) => writeFileSync(offsetFile, `${offset}\n`),
    lines: () => daemon.out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { msg: string }),
  };
}

describe.skipIf(!LIBFAKETIME)('the daemon when the wall clock steps', () => {
  it('keeps renewing, and never publishes an expired token, after the wall clock steps back an hour', async () => {
    const run = await daemonUnderFaketime();
    try {
      const before = renewalsOf(run.emu, run.grant.refreshToken);
      run.step('-3600');
      const states: string[] = [];
      // Three token lifetimes, sampled every 100 ms.
      for (let t = 0; t < LIFETIME_S * 3 * 10; t++) {
        states.push(run.published());
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(states.filter((s) => s === 'expired')).toEqual([]);
      expect(states.filter((s) => s === 'absent').length).toBeLessThan(5);
      // One renewal every lifetime less the margin (4 s), so at least three more in 18 s.
      expect(renewalsOf(run.emu, run.grant.refreshToken) - before).toBeGreaterThanOrEqual(3);
      const lines = run.lines();
      expect(lines.filter((l) => l.msg.includes('stepped back'))).toHaveLength(1);
      expect(lines.filter((l) => l.msg.includes('missed execution'))).toHaveLength(0);
    } finally {
      run.daemon.child.kill('SIGKILL');
    }
  }, 40_000);

  it('takes the wall clock thrown an hour ahead as time that passed: renews at once, one log line, no flood', async () => {
    const run = await daemonUnderFaketime();
    try {
      const before = renewalsOf(run.emu, run.grant.refreshToken);
      run.step('+3600');
      await waitFor('a renewal after the jump', () => (renewalsOf(run.emu, run.grant.refreshToken) > before ? true : undefined), 15_000);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(run.published()).toBe('live');
      const lines = run.lines();
      expect(lines.filter((l) => l.msg.includes('moved') && l.msg.includes('ahead'))).toHaveLength(1);
      // node-cron would report each of the 3,600 ticks the jump skipped.
      expect(lines.filter((l) => l.msg.includes('missed execution'))).toHaveLength(0);
      expect(lines.length).toBeLessThan(40);
    } finally {
      run.daemon.child.kill('SIGKILL');
    }
  }, 30_000);
});
