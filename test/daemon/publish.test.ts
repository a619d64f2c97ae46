// The token file: 0600, replaced atomically (a reader in another process never sees a partial token),
// gone once the token expires, gone when the daemon stops, and never left over from an earlier run.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/index.js';
import { ValidationError } from '../../src/errors.js';
import { openProfileStore } from '../../src/profile/index.js';
import { captureLog, drive, emulator, obtainGrant, profileOf, startWorld, tempDir } from './helpers.js';

const READER = `
const fs = require('node:fs');
const [file, ms] = process.argv.slice(1);
const end = Date.now() + Number(ms);
let reads = 0, bad = 0;
const seen = new Set();
while (Date.now() < end) {
  try {
    const text = fs.readFileSync(file, 'utf8');
    reads++;
    if (/^sl\\.u\\.[A-Za-z0-9_-]{1320}$/.test(text)) seen.add(text.slice(-24)); else bad++;
  } catch (error) {
    if (error.code !== 'ENOENT') bad++;
  }
}
process.stdout.write(JSON.stringify({ reads, bad, distinct: seen.size }));
`;

function readConcurrently(file: string, ms: number): Promise<{ reads: number; bad: number; distinct: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', READER, file, String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('close', () => resolve(JSON.parse(out) as { reads: number; bad: number; distinct: number }));
  });
}

describe('the token file', () => {
  it('is 0600 and replaced atomically: a concurrent reader only ever sees whole tokens', async () => {
    const dir = tempDir();
    const tokenFile = path.join(dir, 'token');
    const world = await startWorld({ profiles: 1, lifetimeSeconds: 6, daemon: { tokenFile, renewMarginMs: 5_000 } });
    await world.daemon.sweep();
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    let inode = statSync(tokenFile).ino;
    let renewals = 0;
    let replaced = 0;
    const reader = readConcurrently(tokenFile, 1500);
    const started = Date.now();
    // Lifetime 6 s and margin 5 s: a renewal every simulated second, as fast as the machine goes.
    while (Date.now() - started < 1400) {
      const report = await world.daemon.sweep();
      world.clock.advance(1000);
      if (report.profiles[0]?.renewal !== 'renewed') continue;
      renewals += 1;
      const next = statSync(tokenFile).ino;
      if (next !== inode) replaced += 1;
      inode = next;
    }
    const seen = await reader;
    expect(seen.bad).toBe(0);
    expect(seen.reads).toBeGreaterThan(100);
    expect(seen.distinct).toBeGreaterThan(5);
    // A new file renamed over the old one each time, never the old one rewritten in place.
    expect(renewals).toBeGreaterThan(5);
    expect(replaced).toBe(renewals);
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
  });

  it('is removed the moment its token expires when renewals keep failing; on close only when about to expire', async () => {
    const dir = tempDir();
    const tokenFile = path.join(dir, 'token');
    const world = await startWorld({ profiles: 1, daemon: { tokenFile } });
    await world.daemon.sweep();
    const first = readFileSync(tokenFile, 'utf8');
    const expiresAt = world.emu.state.accessTokens.get(first)?.expiresAt ?? 0;
    world.emu.setFaults([{ route: 'token', status: 503 }]);
    let removedAt: number | undefined;
    await drive(world, 50, 500, () => {
      const now = world.clock.now();
      if (existsSync(tokenFile)) {
        expect(readFileSync(tokenFile, 'utf8')).toBe(first);
        expect(now).toBeLessThan(expiresAt);
      } else {
        removedAt ??= now;
      }
    });
    expect(removedAt).toBe(expiresAt);
    const status = world.daemon.status();
    expect(status.profiles[0]).toMatchObject({ ready: false, holdsToken: false, reason: 'the access token expired' });

    world.emu.setFaults([]);
    world.clock.advance(2_000);
    await world.daemon.sweep();
    expect(existsSync(tokenFile)).toBe(true);
    const renewed = readFileSync(tokenFile, 'utf8');
    const renewedExpiry = world.emu.state.accessTokens.get(renewed)?.expiresAt ?? 0;
    // Past the safety window (half the 5 s margin here) before expiry: nobody would remove it in time.
    world.clock.advance(renewedExpiry - world.clock.now() - 2_000);
    await world.daemon.close();
    expect(existsSync(tokenFile)).toBe(false);
    expect(existsSync(`${tokenFile}.expires_at`)).toBe(false);
  });

  it('left over from an earlier run is removed at start, before any renewal', async () => {
    const dir = tempDir();
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, 'sl.u.an-old-token-of-unknown-age', { mode: 0o600 });
    await startWorld({ profiles: 1, daemon: { tokenFile } });
    expect(existsSync(tokenFile)).toBe(false);
  });

  it('must name {profile} when several profiles publish', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const start = startDaemon({
      profiles: [profileOf(emu, { name: 'a', grant }), profileOf(emu, { name: 'b', grant })],
      profileStore: openProfileStore(tempDir()),
      renewMarginMs: 5_000,
      schedule: false,
      tokenFile: path.join(tempDir(), 'token'),
      logger: captureLog().logger,
    });
    await expect(start).rejects.toBeInstanceOf(ValidationError);
    await expect(start).rejects.toMatchObject({ issues: [{ field: 'tokenFile' }] });
  });
});
