// A token file that could not be written when the token was renewed (its directory briefly unusable: a full
// or read-only volume, a directory swapped under the daemon) is written again at the next sweep, not left
// holding the previous token until it expires hours later. Found by the year soak (soak/virtual.mjs,
// token_file_unwritable).
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
});
