// A token file that could not be written when the token was renewed (its directory briefly unusable: a full
// or read-only volume, a directory swapped under the daemon) is written again at the next sweep, not left
// holding the previous token until it expires hours later; nor, when the token expired meanwhile and its removal
// failed, holding that expired token until some renewal succeeds. Found by the year soak (soak/virtual.mjs,
// token_file_unwritable).
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { latestTokenOf, startWorld, tempDir } from '../daemon/helpers.js';

describe('publishing after a failed write', () => {
  it('writes the renewed token at the next sweep once the directory is usable again', async () => {
    const dir = path.join(tempDir(), 'tokens');
    mkdirSync(dir);
    const world = await startWorld({ profiles: 1, lifetimeSeconds: 60, daemon: { tokenFile: path.join(dir, '{profile}.token') } });
    const refresh = world.grants.get('p1')?.refreshToken as string;
    const file = path.join(dir, 'p1.token');
    await world.daemon.sweep();
    const first = readFileSync(file, 'utf8');
    expect(first).toBe(latestTokenOf(world.emu, refresh)?.token);

    // The directory becomes a plain file: every write under it fails (as root, chmod would not stop one).
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, '');
    world.clock.advance(56_000);
    await world.daemon.sweep();
    const renewed = latestTokenOf(world.emu, refresh)?.token;
    expect(renewed).not.toBe(first);
    expect(world.log.records().some((r) => r.event === 'token_file.failed')).toBe(true);

    // Usable again, with the old file back: the next sweep writes the token the daemon holds.
    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    expect(readFileSync(file, 'utf8')).toBe(first);
    world.clock.advance(1_000);
    await world.daemon.sweep();
    expect(readFileSync(file, 'utf8')).toBe(renewed);
    expect(world.daemon.status().profiles[0]?.ready).toBe(true);
  });

  it('removes an expired token at the next sweep when its removal failed and no renewal succeeds', async () => {
    const dir = path.join(tempDir(), 'tokens');
    mkdirSync(dir);
    const world = await startWorld({ profiles: 1, lifetimeSeconds: 60, daemon: { tokenFile: path.join(dir, '{profile}.token') } });
    const file = path.join(dir, 'p1.token');
    await world.daemon.sweep();
    expect(existsSync(file)).toBe(true);

    // The directory goes, the token endpoint fails, and the token expires: its removal fails too.
    renameSync(dir, `${dir}.away`);
    writeFileSync(dir, '');
    world.emu.setFaults([{ route: 'token', status: 503 }]);
    world.clock.advance(61_000);
    await world.daemon.sweep();
    expect(world.log.records().filter((r) => r.event === 'token_file.failed').length).toBeGreaterThan(0);

    // Usable again, with the expired file back, and still no renewal: the next sweep removes it.
    rmSync(dir);
    renameSync(`${dir}.away`, dir);
    expect(existsSync(file)).toBe(true);
    world.clock.advance(1_000);
    await world.daemon.sweep();
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.expires_at`)).toBe(false);
    expect(world.daemon.status().profiles[0]?.ready).toBe(false);
  });
});
