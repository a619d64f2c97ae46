// SIGHUP over many stored profiles: the daemon starts with the profiles it loaded for its checks, and every
// reload reads the store anew, a few profiles at a time: a profile added since is served.
import { describe, expect, it } from 'vitest';
import { openSecretStore } from '../../src/credentials/index.js';
import { openProfileStore } from '../../src/profile/index.js';
import { waitFor } from '../helpers/wait.js';
import { spawnDaemon } from './process.js';
import { storedProfilesHome } from './stored-profiles-home.js';

const PROFILES = 200;

describe('SIGHUP over many stored profiles', () => {
  it('reloads from the store at each SIGHUP: a profile added since is served', async () => {
    const { home, names } = await storedProfilesHome(PROFILES);
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home.dir,
      SYNCAUTH_CONFIG_DIR: home.configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: home.storeKey,
    };
    const daemon = spawnDaemon(env, home.dir, ['--concurrency', '8']);
    const secrets = openSecretStore({ kind: 'file', configDir: home.configDir, storeKey: home.storeKey, env: {} });
    const state = openProfileStore(home.configDir);
    // The profiles named by the `count`th whole line of `event` (a line naming 200 profiles may arrive in parts).
    const logged = (event: string, count: number): Promise<string[]> =>
      waitFor(`${event} ${count}`, () => {
        const whole = daemon.out.stdout.slice(0, daemon.out.stdout.lastIndexOf('\n'));
        const lines = whole.split('\n').filter((line) => line.includes(`"event":"${event}"`));
        return lines.length >= count ? (JSON.parse(lines[count - 1] as string) as { profiles: string[] }).profiles : undefined;
      }, 30_000);
    const reloaded = (count: number): Promise<string[]> => logged('daemon.reloaded', count);
    try {
      expect(await logged('daemon.started', 1)).toEqual(names);
      const add = async (name: string): Promise<void> => {
        await secrets.set(name, { app_key: `ak-${name}`, app_secret: `as-${name}`, refresh_token: `rt-${name}` });
        await state.update(name, () => ({ tokenUrl: 'http://127.0.0.1:9/oauth2/token' }));
      };
      await add('added-1');
      daemon.child.kill('SIGHUP');
      expect(await reloaded(1)).toEqual([...names, 'added-1']);
      await add('added-2');
      daemon.child.kill('SIGHUP');
      expect(await reloaded(2)).toEqual([...names, 'added-1', 'added-2']);
      expect(daemon.child.exitCode).toBe(null);
    } finally {
      daemon.child.kill('SIGKILL');
      await daemon.exited;
    }
  }, 90_000);
});
