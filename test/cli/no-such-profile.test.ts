// A profile name that does not exist, typed as a newcomer types it: `token`, `refresh`, the daemon's config file
// and the library's getAccessToken say there is no such profile and name the ones there are (exit 2, kind
// `configuration`), as `status --profile` does, on a machine without a Secret Service as on one with it; never
// that the keychain is not available, which invites retries forever.
import { cpSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SyncauthError } from '../../src/errors.js';
import { getAccessToken } from '../../src/index.js';
import { recordProfileChoices } from '../../src/profile/config-file.js';
import { ROOT, runCli, tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/in-process.js';
import { isCI, startSecretService } from '../helpers/secret-service.js';

const FIXTURE = path.join(ROOT, 'test/fixtures/previous-release/config');
const STORE_KEY = 'previous-release-fixture-store-key';
// No keychain on this "host": a session bus that is not there.
const NO_BUS = 'unix:path=/nonexistent/syncauth-no-bus';

const started = await startSecretService();
const skipBus = !started.ok && !isCI();
if (!started.ok) console.warn(`no Secret Service (${started.reason}): the cases with one are ${isCI() ? 'failed' : 'skipped'}`);
afterAll(async () => {
  if (started.ok) await started.bus.stop();
});

/** A config dir holding the profile `docs` (file store, as setup records it); the store key in the environment. */
async function configDir(): Promise<string> {
  const dir = path.join(tempDir('syncauth-nosuch-'), 'config');
  cpSync(FIXTURE, dir, { recursive: true });
  await recordProfileChoices(dir, 'docs', { store: 'file' });
  return dir;
}

const hosts = [
  { host: 'without a Secret Service', bus: () => NO_BUS, skip: false },
  { host: 'with a Secret Service', bus: () => (started.ok ? started.bus.address : NO_BUS), skip: skipBus },
];

describe.each(hosts)('a profile that does not exist, $host', ({ bus, skip }) => {
  const envOf = (dir: string) => ({ SYNCAUTH_CONFIG_DIR: dir, SYNCAUTH_STORE_KEY: STORE_KEY, DBUS_SESSION_BUS_ADDRESS: bus() });

  function expectNoSuchProfile(result: { code: number | null; stderr: string }): void {
    expect(result.stderr).toMatch(/^error: no profile named "nosuch"/m);
    expect(result.stderr).toMatch(/^hint: the profiles there are: docs\b/m);
    expect(result.stderr).not.toMatch(/keychain|DBus|D-Bus/i);
    expect(result.code).toBe(2);
  }

  it.skipIf(skip)('token --profile nosuch', async () => {
    const dir = await configDir();
    expectNoSuchProfile(await runInProcess(['token', '--profile', 'nosuch'], { env: envOf(dir) }));
  });

  it.skipIf(skip)('refresh --profile nosuch', async () => {
    const dir = await configDir();
    expectNoSuchProfile(await runInProcess(['refresh', '--profile', 'nosuch'], { env: envOf(dir) }));
  });

  it.skipIf(skip)('exec --profile nosuch -- true', async () => {
    const dir = await configDir();
    // exec reads its command after `--` from the process's own argv, so this one runs the binary.
    expectNoSuchProfile(await runCli(['exec', '--profile', 'nosuch', '--', 'true'], { env: envOf(dir) }));
  });

  it.skipIf(skip)('a misspelled profile in `daemon --config`', async () => {
    const dir = await configDir();
    const file = path.join(path.dirname(dir), 'daemon.yaml');
    writeFileSync(file, 'version: 1\nprofiles:\n  - nosuch\n', { mode: 0o600 });
    const result = await runInProcess(['daemon', '--once', '--config', file], { env: envOf(dir) });
    expectNoSuchProfile(result);
  });

  it.skipIf(skip)("the library's getAccessToken({ profile: 'nosuch' })", async () => {
    const dir = await configDir();
    const error = await getAccessToken({ profile: 'nosuch', env: envOf(dir) }).then(() => undefined, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(SyncauthError);
    const e = error as SyncauthError;
    expect(e.message).toMatch(/^no profile named "nosuch"/);
    expect(e.hint).toMatch(/the profiles there are: docs\b/);
    expect({ code: e.code, kind: e.kind, exitCode: e.exitCode }).toEqual({ code: 'SYNCAUTH_NO_PROFILE', kind: 'configuration', exitCode: 2 });
  });
});
