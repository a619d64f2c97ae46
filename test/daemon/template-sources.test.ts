// The real `syncauth daemon` and `syncauth exec` with a template SRC that is not a regular file: refused at
// start (exit 2, nothing asked of Dropbox), and swapped in while the daemon runs, it fails its renders without
// holding up renewals, the removal of an expired token, the health server or a SIGTERM.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant } from './helpers.js';
import { containerEnv, spawnDaemon } from './process.js';

const running: { kill: () => void }[] = [];
afterEach(() => {
  for (const daemon of running.splice(0)) daemon.kill();
});

function linesOf(stdout: string, event: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((l) => l.includes(`"event":"${event}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('a template SRC that is not a regular file', () => {
  it('swapped to a FIFO, then /dev/zero, while the daemon runs: renewals go on, the expired token leaves the file, SIGTERM ends it in time', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 6 });
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const tokenFile = path.join(dir, 'token');
    const source = path.join(dir, 'env.tpl');
    const dest = path.join(dir, 'dropbox.env');
    writeFileSync(source, 'DROPBOX_ACCESS_TOKEN={{ access_token }}\n');
    const daemon = spawnDaemon(containerEnv(emu, grant, dir, { profile: 'fifo', tokenFile }), dir, [
      '--sweep', '* * * * * *', '--renew-margin', '3', '--shutdown-timeout', '3',
      // More sources than libuv has threads: were each open to block one, nothing would run any more.
      ...['a', 'b', 'c', 'd', 'e'].flatMap((n) => ['--template', `${source}:${dest}.${n}`]),
    ]);
    running.push({ kill: () => daemon.child.kill('SIGKILL') });
    const { listen } = await daemon.started();
    await daemon.ready(listen);
    expect(readFileSync(`${dest}.a`, 'utf8')).toBe(`DROPBOX_ACCESS_TOKEN=${readFileSync(tokenFile, 'utf8')}\n`);

    rmSync(source);
    execFileSync('mkfifo', [source]);
    const renewals = (): number => linesOf(daemon.out.stdout, 'renewal.succeeded').length;
    const count = renewals();
    await waitFor('two renewals after the swap', () => (renewals() >= count + 2 ? true : undefined), 15_000);
    const failed = linesOf(daemon.out.stdout, 'template.failed');
    expect(failed.length).toBeGreaterThanOrEqual(5);
    expect(failed[0]?.error).toBe(`${source}: is a FIFO (named pipe), not a regular file`);
    // The token file still follows every renewal, and the health server answers.
    const published = readFileSync(tokenFile, 'utf8');
    expect(emu.state.accessTokens.get(published)?.expiresAt).toBeGreaterThan(Date.now());
    expect((await fetch(`${listen}/healthz`)).status).toBe(200);
    expect((await fetch(`${listen}/readyz`)).status).toBe(200);

    // /dev/zero behind a link: refused as well.
    rmSync(source);
    symlinkSync('/dev/zero', source);
    const zero = (): boolean => linesOf(daemon.out.stdout, 'template.failed').some((r) => r.error === `${source}: is a character device, not a regular file`);
    await waitFor('a render from /dev/zero refused', () => (zero() ? true : undefined), 15_000);

    // Renewals now fail: the token must still leave the file at its expiry.
    emu.setFaults([{ route: 'token', status: 503 }]);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const last = readFileSync(tokenFile, 'utf8');
    const expiresAt = emu.state.accessTokens.get(last)?.expiresAt as number;
    await waitFor('the expired token removed', () => (existsSync(tokenFile) ? undefined : true), 15_000);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt - 1_000);
    expect(Date.now()).toBeLessThan(expiresAt + 2_000);
    for (const token of emu.state.accessTokens.keys()) expect(daemon.out.stdout).not.toContain(token);

    const stopAt = Date.now();
    daemon.child.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
    expect(Date.now() - stopAt).toBeLessThan(3_000 + 2_000);
  }, 60_000);

  it('swapped to a FIFO just before a renewal: SIGTERM ends the daemon within --shutdown-timeout', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 4 });
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, 'T={{ access_token }}\n');
    const daemon = spawnDaemon(containerEnv(emu, grant, dir, { profile: 'stop', tokenFile: path.join(dir, 'token') }), dir, [
      '--sweep', '* * * * * *', '--renew-margin', '2', '--shutdown-timeout', '3', '--template', `${source}:${path.join(dir, 'out')}`,
    ]);
    running.push({ kill: () => daemon.child.kill('SIGKILL') });
    await daemon.ready((await daemon.started()).listen);
    rmSync(source);
    execFileSync('mkfifo', [source]);
    const attempts = (): number => linesOf(daemon.out.stdout, 'renewal.succeeded').length + linesOf(daemon.out.stdout, 'template.failed').length;
    const before = attempts();
    // A renewal (and with it a render) comes within 2 s; wait for it, or for its time if it never logs.
    await waitFor('a renewal after the swap', () => (attempts() > before ? true : undefined), 4_000).catch(() => undefined);
    const stopAt = Date.now();
    daemon.child.kill('SIGTERM');
    const code = await Promise.race([daemon.exited, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 8_000))]);
    expect(code).toBe(0);
    expect(Date.now() - stopAt).toBeLessThan(3_000 + 2_000);
  }, 30_000);

  it('is refused when the daemon starts and when exec starts: exit 2, naming the flag, before anything is asked', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const env = containerEnv(emu, grant, dir);
    const before = emu.state.requests.length;
    const [execFifo, daemonFifo, daemonZero] = await Promise.all([
      runCli(['exec', '--template', `fifo:${path.join(dir, 'out')}`, '--', 'true'], { env, cwd: dir, timeoutMs: 10_000 }),
      runCli(['daemon', '--template', `${fifo}:${path.join(dir, 'out')}`], { env, cwd: dir, timeoutMs: 10_000 }),
      runCli(['daemon', '--template', `/dev/zero:${path.join(dir, 'out')}`], { env, cwd: dir, timeoutMs: 10_000 }),
    ]);
    expect(execFifo.code).toBe(2);
    expect(execFifo.stderr).toContain(`--template: cannot read template ${fifo}: it is a FIFO (named pipe), not a regular file`);
    expect(daemonFifo.code).toBe(2);
    expect(daemonFifo.stderr).toContain(`--template: cannot read template ${fifo}: it is a FIFO (named pipe), not a regular file`);
    expect(daemonZero.code).toBe(2);
    expect(daemonZero.stderr).toContain('--template: cannot read template /dev/zero: it is a character device, not a regular file');
    expect(emu.state.requests.length).toBe(before);
    expect(existsSync(path.join(dir, 'out'))).toBe(false);
  }, 30_000);
});
