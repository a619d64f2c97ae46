// The lock beside a sink: held by a live process, it is refused to another, naming the holder; left by a
// process killed with -9 (whatever its pid), it is taken over; two processes finding it stale at once do not
// both take it; a path too long for a Unix socket still works; giving it back never removes a newer holder's.
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { lockPathOf, SinkLocks } from '../../src/publish/sink-lock.js';
import { ValidationError } from '../../src/errors.js';
import { ROOT, tempDir } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

const who = (pid: number) => ({ pid, startedAt: '2030-01-01T00:00:00.000Z', command: `syncauth daemon #${pid}` });

async function refusal(locks: SinkLocks, sink: string): Promise<string> {
  const error = await locks.take([{ path: sink, field: 'sink' }]).then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ValidationError);
  return (error as ValidationError).message;
}

/** A process of its own that takes the lock of `sink` and says so, then waits to be killed. */
async function holderProcess(sink: string): Promise<{ pid: number; kill: () => Promise<void> }> {
  const script = `
    import { SinkLocks } from ${JSON.stringify(path.join(ROOT, 'dist/publish/sink-lock.js'))};
    const locks = new SinkLocks({ pid: 1, startedAt: '2030-01-01T00:00:00.000Z', command: 'syncauth daemon (in a container)' });
    await locks.take([{ path: process.argv[1], field: 'sink' }]);
    process.stdout.write('held\\n');
    setInterval(() => undefined, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, sink], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  await waitFor('the holder', () => (out.includes('held') ? true : undefined));
  const exited = new Promise((resolve) => child.once('close', resolve));
  return { pid: child.pid as number, kill: async () => void (child.kill('SIGKILL'), await exited) };
}

describe('the lock beside a sink', () => {
  it('is refused to a second holder while the first lives, naming it; taken once it is given back', async () => {
    const sink = path.join(tempDir(), 'token');
    const first = new SinkLocks(who(101));
    await first.take([{ path: sink, field: 'sink' }]);
    expect(lstatSync(lockPathOf(sink)).isSocket()).toBe(true);
    const second = new SinkLocks(who(202));
    expect(await refusal(second, sink)).toContain('held by another running process (pid 101, started 2030-01-01T00:00:00.000Z, running `syncauth daemon #101`)');
    await first.release();
    expect(existsSync(lockPathOf(sink))).toBe(false);
    await second.take([{ path: sink, field: 'sink' }]);
    await second.release();
    // Nothing of either is left in the directory.
    expect(readdirSync(path.dirname(sink))).toEqual([]);
  });

  it('left by a process killed with -9 that called itself pid 1 (as every container does), is taken over', async () => {
    const dir = tempDir();
    const sink = path.join(dir, 'token');
    const holder = await holderProcess(sink);
    const mine = new SinkLocks(who(1));
    expect(await refusal(mine, sink)).toContain('pid 1, started 2030-01-01T00:00:00.000Z, running `syncauth daemon (in a container)`');
    await holder.kill();
    await mine.take([{ path: sink, field: 'sink' }]);
    expect(await refusal(new SinkLocks(who(3)), sink)).toContain('pid 1, started 2030-01-01T00:00:00.000Z, running `syncauth daemon #1`');
    // The dead holder's socket went with the takeover; this process's own is the only one there.
    expect(readdirSync(dir).filter((name) => name.startsWith('.syncauth-holder-'))).toHaveLength(1);
    await mine.release();
  }, 20_000);

  it('found stale by two takers at once, is taken by one of them only', async () => {
    const sink = path.join(tempDir(), 'token');
    const holder = await holderProcess(sink);
    await holder.kill();
    const a = new SinkLocks(who(11));
    const b = new SinkLocks(who(22));
    const results = await Promise.allSettled([a.take([{ path: sink, field: 'sink' }]), b.take([{ path: sink, field: 'sink' }])]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(a.size + b.size).toBe(1);
    await a.release();
    await b.release();
  }, 20_000);

  it('works where the path is longer than a Unix socket may be, and for a name too long to add .lock to', async () => {
    const dir = path.join(tempDir(), 'a-directory-whose-name-is-long'.repeat(3), 'and-then-some-more-of-it'.repeat(3));
    mkdirSync(dir, { recursive: true });
    expect(Buffer.byteLength(path.join(dir, 'token.lock'))).toBeGreaterThan(108);
    for (const name of ['token', `${'n'.repeat(250)}.env`]) {
      const sink = path.join(dir, name);
      const first = new SinkLocks(who(7));
      await first.take([{ path: sink, field: 'sink' }]);
      expect(path.dirname(lockPathOf(sink))).toBe(dir);
      expect(await refusal(new SinkLocks(who(8)), sink)).toContain('pid 7');
      await first.release();
    }
    const holder = await holderProcess(path.join(dir, 'token'));
    await holder.kill();
    const next = new SinkLocks(who(9));
    await next.take([{ path: path.join(dir, 'token'), field: 'sink' }]);
    await next.release();
  }, 20_000);

  it('given back, removes only its own lock: one a later holder took over stays', async () => {
    const sink = path.join(tempDir(), 'token');
    const first = new SinkLocks(who(1));
    await first.take([{ path: sink, field: 'sink' }]);
    // Its lock is removed by hand (as a cleanup script might), and another process takes the sink.
    unlinkSync(lockPathOf(sink));
    const second = new SinkLocks(who(2));
    await second.take([{ path: sink, field: 'sink' }]);
    await first.release();
    expect(await refusal(new SinkLocks(who(3)), sink)).toContain('pid 2');
    await second.release();
  });
});
