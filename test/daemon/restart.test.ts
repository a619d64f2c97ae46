// A restart knows what it knew: a profile flagged for re-authorization is reported so at once, a state file
// that was broken at start is picked up again once fixed, and a renewal lock left by a killed process is
// taken over as soon as its owner is found dead, not after the stale time.
import { spawn } from 'node:child_process';
import { lstatSync, mkdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, emulator, fakeClock, obtainGrant, profileOf, startWorld, tempDir, tokenRequests } from './helpers.js';

describe('a restarted daemon', () => {
  it('reports a profile flagged for re-authorization at once, without asking Dropbox again', async () => {
    const world = await startWorld({ profiles: 1 });
    await world.daemon.sweep();
    // What an earlier run (or `syncauth token`) recorded when Dropbox said invalid_grant.
    await world.store.update('p1', (current) => ({
      ...current,
      needsReauthorization: true,
      lastError: { code: 'OAUTH_INVALID_GRANT', message: 'the refresh token was revoked', at: new Date(world.clock.now()).toISOString(), terminal: true },
    }));
    await world.daemon.close();
    const before = tokenRequests(world.emu);
    const log = captureLog('info');
    const restarted = await startDaemon({
      profiles: [profileOf(world.emu, { name: 'p1', grant: world.grants.get('p1')! })],
      profileStore: world.store,
      renewMarginMs: 5_000,
      schedule: false,
      logger: log.logger,
      now: world.clock.now,
    });
    try {
      const status = restarted.status();
      expect(status.ready).toBe(false);
      expect(status.profiles[0]).toMatchObject({ ready: false, terminal: { reason: 'reauthorization_needed', code: 'OAUTH_INVALID_GRANT' } });
      expect(status.profiles[0]?.reason).toContain('syncauth setup --profile p1');
      await restarted.sweep();
      expect(tokenRequests(world.emu)).toBe(before);
    } finally {
      await restarted.close();
    }
  });

  it('takes up a profile whose state file was broken at start once the file is fixed, without a reload', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 20 });
    const grant = await obtainGrant(emu);
    const dir = tempDir();
    const store = openProfileStore(dir);
    await store.update('p1', () => ({}));
    const file = path.join(dir, 'profiles', 'p1.json');
    const good = readFileSync(file, 'utf8');
    writeFileSync(file, '{ this is not json', { mode: 0o600 });
    const clock = fakeClock();
    const daemon = await startDaemon({
      profiles: [profileOf(emu, { name: 'p1', grant })],
      profileStore: store,
      renewMarginMs: 5_000,
      schedule: false,
      logger: captureLog().logger,
      now: clock.now,
    });
    try {
      await daemon.sweep();
      expect(daemon.status().profiles[0]).toMatchObject({ ready: false, terminal: { reason: 'configuration_error', code: 'PROFILE_CORRUPT' } });
      writeFileSync(file, good, { mode: 0o600 });
      clock.advance(1_000);
      const report = await daemon.sweep();
      expect(report.profiles[0]).toMatchObject({ action: 'renewal', renewal: 'renewed' });
      expect(daemon.status().ready).toBe(true);
    } finally {
      await daemon.close();
    }
  });

  it('loads a profile that could not be loaded at start again by itself, with backoff', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 20 });
    const grant = await obtainGrant(emu);
    const clock = fakeClock();
    let broken = true;
    const attempts: number[] = [];
    const daemon = await startDaemon({
      profiles: [{ name: 'p1', error: new Error('the state file of profile "p1" is not valid') }],
      loadProfile: async (name) => {
        attempts.push(clock.now());
        return broken ? { name, error: new Error('still broken') } : profileOf(emu, { name, grant });
      },
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 5_000,
      schedule: false,
      logger: captureLog().logger,
      now: clock.now,
      random: () => 0.5,
      backoff: { baseMs: 1_000, maxMs: 4_000 },
    });
    try {
      for (let i = 0; i < 10; i++) {
        await daemon.sweep();
        clock.advance(500);
      }
      expect(daemon.status().profiles[0]).toMatchObject({ ready: false, terminal: { reason: 'unavailable' } });
      // Backing off: not once per sweep (10 sweeps in 5 s), but at growing intervals.
      expect(attempts.length).toBeGreaterThanOrEqual(2);
      expect(attempts.length).toBeLessThanOrEqual(5);
      broken = false;
      clock.advance(4_000);
      const report = await daemon.sweep();
      expect(report.profiles[0]).toMatchObject({ action: 'renewal', renewal: 'renewed' });
      expect(daemon.status().ready).toBe(true);
    } finally {
      await daemon.close();
    }
  });
});

/** Runs `script` (an ES module) in a real process, waits for it to print `marker`, and kills it there (SIGKILL). */
async function killedWhile(marker: string, script: string): Promise<void> {
  const holder = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.on('data', (chunk: Buffer) => chunk.toString().includes(marker) && resolve());
    holder.once('exit', () => reject(new Error(`the process exited before it printed "${marker}"`)));
  });
  const exited = new Promise((resolve) => holder.once('exit', (_code, signal) => resolve(signal)));
  holder.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
}

describe('the renewal lock', () => {
  it('is taken over within 2 s when the process holding it was killed', async () => {
    const dir = tempDir();
    const store = openProfileStore(dir, { staleMs: 10_000 });
    // A real process takes the lock through the built module and is killed while holding it.
    const lockModule = pathToFileURL(path.resolve('dist/profile/index.js')).href;
    await killedWhile(
      'locked',
      `import { openProfileStore } from ${JSON.stringify(lockModule)};
       await openProfileStore(${JSON.stringify(dir)}).withLock('p1', async () => { process.stdout.write('locked\\n'); await new Promise(() => setInterval(() => undefined, 1_000)); });`,
    );
    // Killed while holding it: no exit handler ran, so the lock (a link naming its holder) is left behind.
    expect(lstatSync(path.join(dir, 'profiles', 'p1.renewal.lock'), { throwIfNoEntry: false })?.isSymbolicLink()).toBe(true);
    const started = performance.now();
    const waited = await store.withLock('p1', async () => performance.now() - started, { waitMs: 30_000 });
    console.log(`lock of a killed process taken over after ${Math.round(waited)} ms (stale time 10 s)`);
    expect(waited).toBeLessThan(2_000);
  });

  // A record left by a holder that died, whose lock then went stale and was taken over by the stale-time rule,
  // must not make the next, live holding look dead.
  it.each([
    ['with no record left before it', false],
    ['with the record of a dead holder left beside it', true],
  ])('is not taken from a live holder (%s)', async (_label, staleRecord) => {
    const dir = tempDir();
    const store = openProfileStore(dir);
    if (staleRecord) {
      const dead = spawn(process.execPath, ['-e', '0']);
      await new Promise((resolve) => dead.once('exit', resolve));
      mkdirSync(path.join(dir, 'profiles'), { recursive: true });
      symlinkSync(`${hostname()} ${dead.pid} a-holding-long-gone`, path.join(dir, 'profiles', 'p1.renewal.lock.owner'));
    }
    let release: () => void = () => undefined;
    const held = store.withLock('p1', () => new Promise<void>((resolve) => (release = resolve)));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const other = openProfileStore(dir);
    await expect(other.withLock('p1', async () => 'taken', { waitMs: 1_000 })).rejects.toMatchObject({ code: 'PROFILE_LOCK_TIMEOUT' });
    release();
    await held;
  });
});

// Earlier releases locked with a directory at the lock's path and named its holder in `<lock>.owner`; during an
// upgrade one of their processes may still hold a lock, and each kind of lock must keep the other out.
describe("an earlier release's lock directory", () => {
  async function liveAndDeadPids(): Promise<{ live: ReturnType<typeof spawn>; dead: number }> {
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((resolve) => dead.once('exit', resolve));
    const live = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
    return { live, dead: dead.pid as number };
  }

  it('held by a live process keeps this release out; held by a dead one is taken over at once', async () => {
    const dir = tempDir();
    const store = openProfileStore(dir, { staleMs: 10_000 });
    const lock = path.join(dir, 'profiles', 'p1.renewal.lock');
    const { live, dead } = await liveAndDeadPids();
    try {
      mkdirSync(lock, { recursive: true });
      symlinkSync(`${hostname()} ${live.pid} an-earlier-release`, `${lock}.owner`);
      await expect(store.withLock('p1', async () => 'taken', { waitMs: 1_000 })).rejects.toMatchObject({ code: 'PROFILE_LOCK_TIMEOUT' });
      // The holder dies: its record now names a dead process.
      const record = `${lock}.owner`;
      unlinkSync(record);
      symlinkSync(`${hostname()} ${dead} an-earlier-release`, record);
      const started = performance.now();
      expect(await store.withLock('p1', async () => 'taken', { waitMs: 30_000 })).toBe('taken');
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      live.kill();
    }
  });

  it('cannot be made while this release holds the lock', async () => {
    const dir = tempDir();
    const store = openProfileStore(dir);
    await store.withLock('p1', async () => {
      // What an earlier release does to take it: the directory.
      expect(() => mkdirSync(path.join(dir, 'profiles', 'p1.renewal.lock'))).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    });
  });
});

describe('the state write lock', () => {
  // Found by the real-process soak (seed 2): a replica killed while it wrote a profile's state (just after a
  // renewal) left that write's lock behind, and the restarted replica's next renewal of the profile held a fresh
  // token for the stale time (10 s) before it could record and publish it. The state lock names its holder too.
  it('is taken over within 2 s when the process writing was killed', async () => {
    const dir = tempDir();
    const store = openProfileStore(dir, { staleMs: 10_000 });
    await store.update('p1', () => ({ connectorId: 'before' }));
    const storeModule = pathToFileURL(path.resolve('dist/profile/index.js')).href;
    // The holder blocks inside the write (its state mutation never returns), and is killed there.
    await killedWhile(
      'writing',
      `import { openProfileStore } from ${JSON.stringify(storeModule)};
       await openProfileStore(${JSON.stringify(dir)}).update('p1', (current) => {
         process.stdout.write('writing\\n');
         Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
         return current;
       });`,
    );
    expect(lstatSync(path.join(dir, 'profiles', 'p1.json.lock'), { throwIfNoEntry: false })?.isSymbolicLink()).toBe(true);
    const started = performance.now();
    await store.update('p1', (current) => ({ ...current, connectorId: 'after' }));
    const waited = performance.now() - started;
    console.log(`state lock of a killed process taken over after ${Math.round(waited)} ms (stale time 10 s)`);
    expect(waited).toBeLessThan(2_000);
    expect((await store.read('p1'))?.connectorId).toBe('after');
  });
});
