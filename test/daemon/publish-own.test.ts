// A daemon removes only what it published itself: a token file someone replaced under it (another program, a
// person by hand) is left in place when the daemon stops with its own token about to expire, and when its own
// token expires; what is still its own goes as before.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/cli.js';
import { startWorld } from './helpers.js';

describe('removing only what it published', () => {
  it('a token file replaced under the daemon is not removed when it stops with its token about to expire', async () => {
    const tokenFile = path.join(tempDir(), 'token');
    const world = await startWorld({ profiles: 1, daemon: { tokenFile } });
    await world.daemon.sweep();
    const token = readFileSync(tokenFile, 'utf8');
    const expiresAt = world.emu.state.accessTokens.get(token)?.expiresAt ?? 0;
    writeFileSync(tokenFile, 'written by someone else', { mode: 0o600 });
    // Within the safety window of its expiry: a stop removes its own token file, since nobody else would in time.
    world.clock.advance(expiresAt - world.clock.now() - 2_000);
    await world.daemon.close();
    expect(readFileSync(tokenFile, 'utf8')).toBe('written by someone else');
    // Its expiry file was still its own, and went.
    expect(existsSync(`${tokenFile}.expires_at`)).toBe(false);
  });

  it('an expiry file replaced under the daemon is not removed when its token expires', async () => {
    const tokenFile = path.join(tempDir(), 'token');
    const world = await startWorld({ profiles: 1, daemon: { tokenFile } });
    await world.daemon.sweep();
    const token = readFileSync(tokenFile, 'utf8');
    const expiresAt = world.emu.state.accessTokens.get(token)?.expiresAt ?? 0;
    world.emu.setFaults([{ route: 'token', status: 503 }]);
    writeFileSync(`${tokenFile}.expires_at`, 'kept by its writer\n', { mode: 0o600 });
    world.clock.advance(expiresAt - world.clock.now() + 1);
    await world.daemon.sweep();
    expect(existsSync(tokenFile)).toBe(false);
    expect(readFileSync(`${tokenFile}.expires_at`, 'utf8')).toBe('kept by its writer\n');
  });
});
