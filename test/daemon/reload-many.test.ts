// SIGHUP over many stored profiles: the daemon starts with the profiles it loaded for its checks, and every
// reload reads the store anew, a few profiles at a time: a profile added since is served, a removed one goes.
import { describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { waitFor } from '../helpers/wait.js';
import { spawnDaemon } from './process.js';
import { storedProfilesHome } from './stored-profiles-home.js';

const PROFILES = 200;

describe('SIGHUP over many stored profiles', () => {
  it('reloads from the store each time: an added profile is served, a removed one is dropped', async () => {
    const { home, names } = await storedProfilesHome(PROFILES);
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir,
      SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey,
    };
    const daemon = spawnDaemon(env, home.dir, ['--concurrency', '8']);
    const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
    const state = openProfileStore(home.configDir);
    const reloaded = (count: number): Promise<string[]> =>
      waitFor(`reload ${count}`, () => {
        const lines = daemon.out.stdout.split('\n').filter((line) => line.includes('"event":"daemon.reloaded"'));
        return lines.length >= count ? (JSON.parse(lines[count - 1] as string) as { profiles: string[] }).profiles : undefined;
      }, 30_000);
    try {
      expect((await daemon.started()).profiles).toEqual(names);
      await secrets.set('added', { app_key: 'ak-added', app_secret: 'as-added', refresh_token: 'rt-added' });
      await state.update('added', () => ({ tokenUrl: 'http://127.0.0.1:9/oauth2/token' }));
      await state.delete('p000');
      daemon.child.kill('SIGHUP');
      expect((await reloaded(1)).sort()).toEqual([...names.slice(1), 'added'].sort());
      await state.delete('p001');
      daemon.child.kill('SIGHUP');
      expect((await reloaded(2)).sort()).toEqual([...names.slice(2), 'added'].sort());
      expect(daemon.child.exitCode).toBe(null);
    } finally {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
  }, 90_000);
});
