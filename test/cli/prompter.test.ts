// Commands ask through the factory's prompter, so a test can be the person at the terminal, in-process:
// `profile rekey` asks the new store key twice, hidden; two different answers change nothing (exit 2), the
// same one twice re-encrypts the store, and no answer ever reaches the output.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { openFileSecretStore } from '../../src/credentials/index.js';
import { tempDir } from '../helpers/cli.js';
import { runInProcess, scriptedPrompter } from '../helpers/in-process.js';

const OLD_KEY = 'the-old-store-key-of-enough-length';
const NEW_KEY = 'a-new-store-key-nobody-has-seen-yet';
const SECRETS = { app_key: 'prompter-app-key', app_secret: 'prompter-app-secret', refresh_token: 'prompter-refresh-token-canary' };

async function storeWithOneProfile(): Promise<{ cwd: string; configDir: string; env: Record<string, string> }> {
  const cwd = tempDir('syncauth-prompter-');
  const configDir = path.join(cwd, 'config');
  await openFileSecretStore({ configDir, storeKey: () => OLD_KEY }).set('docs', SECRETS);
  return { cwd, configDir, env: { SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: OLD_KEY, SYNCAUTH_CONFIG_DIR: configDir } };
}

describe('the prompter seam', () => {
  it('two different answers: exit 2 naming the field, and the store still opens with the old key only', async () => {
    const home = await storeWithOneProfile();
    const before = readFileSync(path.join(home.configDir, 'secrets.enc'), 'utf8');
    const prompter = scriptedPrompter([NEW_KEY, `${NEW_KEY}-typo`]);
    const result = await runInProcess(['profile', 'rekey'], { cwd: home.cwd, env: home.env, prompter });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('new store key: the two entries differ');
    expect(prompter.asked).toEqual(['New store key', 'The new store key again']);
    expect(readFileSync(path.join(home.configDir, 'secrets.enc'), 'utf8')).toBe(before);
    for (const secret of [NEW_KEY, OLD_KEY, SECRETS.refresh_token]) expect(result.stdout + result.stderr).not.toContain(secret);
  });

  it('the same answer twice: the store is re-encrypted, opens with the new key, and no key is printed', async () => {
    const home = await storeWithOneProfile();
    const result = await runInProcess(['profile', 'rekey'], { cwd: home.cwd, env: home.env, prompter: scriptedPrompter([NEW_KEY, NEW_KEY]) });
    expect(result.stderr).not.toContain('error');
    expect(result.code).toBe(0);
    expect(await openFileSecretStore({ configDir: home.configDir, storeKey: () => NEW_KEY }).get('docs')).toMatchObject(SECRETS);
    await expect(openFileSecretStore({ configDir: home.configDir, storeKey: () => OLD_KEY }).get('docs')).rejects.toThrow();
    expect(existsSync(path.join(home.configDir, 'secrets.enc'))).toBe(true);
    for (const secret of [NEW_KEY, OLD_KEY, SECRETS.refresh_token]) expect(result.stdout + result.stderr).not.toContain(secret);
  });
});
