// `syncauth profile rotate api-key|app-secret`, run as a user would: the built CLI against the emulator, the new
// value on stdin (or typed at a hidden prompt in a real terminal). A value the service or Dropbox refuses is
// never stored; an accepted one is stored, bumps secretsVersion, and appears in no output and no plain file.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { decodeAccessToken } from '../../src/sync/token-cache.js';
import { CLI, RUN_AS, type CliResult } from '../helpers/cli.js';
import {
  filesUnder, newHome, newestAccessTokenOf, onboardWithGrant, runCli, sources, spawnedArgv, startOnboarding, storedSecrets, type Onboarded, type Onboarding,
} from '../helpers/onboarding.js';
import { isCI } from '../helpers/secret-service.js';
import { waitFor } from '../helpers/wait.js';

// The hidden-prompt test drives a real terminal: tmux. Outside CI it is skipped where tmux is missing, saying so.
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const tmuxNote = hasTmux ? '' : '[skipped: tmux is not installed; with CI set this fails instead] ';

const NEW_API_KEY = 'rotated-api-key-canary-7f3a9c21d4';
const OTHER_WORKSPACE_KEY = 'other-workspace-key-canary-1b2c3d';
const UNKNOWN_KEY = 'unknown-api-key-canary-9e8d7c6b5a';

function forms(value: string): string[] {
  return [value, Buffer.from(value).toString('base64')];
}

/** No value, raw or base64, in the command's output, in any file under the config dir, or in any argv spawned. */
function expectNowhere(values: string[], result: CliResult, p: Onboarded): void {
  const files = filesUnder(p.home.configDir).map((file) => readFileSync(file, 'utf8'));
  const argv = spawnedArgv.map((args) => args.join(' '));
  for (const value of values) {
    for (const form of forms(value)) {
      expect(result.stdout).not.toContain(form);
      expect(result.stderr).not.toContain(form);
      for (const text of [...files, ...argv]) expect(text).not.toContain(form);
    }
  }
}

function run(p: Onboarded, args: string[], stdin: string, env: Record<string, string | undefined> = {}) {
  return runCli(args, { env: { ...p.env, ...env }, cwd: p.home.dir, stdin });
}

/** The profile's record in the file store, where a rotated key would be written. */
const secretsFile = (p: Onboarded) => `${p.home.configDir}/secrets/${p.profile}.enc`;
const stateOf = (p: Onboarded) => JSON.parse(readFileSync(`${p.home.configDir}/profiles/${p.profile}.json`, 'utf8')) as Record<string, unknown>;

describe('profile rotate api-key', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding({
      emulator: { workspaces: [{ name: 'default', apiKeys: [DEFAULT_EMULATOR_API_KEY, NEW_API_KEY] }, { name: 'other', apiKeys: [OTHER_WORKSPACE_KEY] }] },
    });
  });
  afterAll(async () => ob.emulator.close());

  it('checks the new key with the service, stores it, bumps secretsVersion, and later commands use it', async () => {
    const p = await onboardWithGrant(ob, 'rot', newHome());
    const versionBefore = stateOf(p).secretsVersion;
    const result = await run(p, ['profile', 'rotate', 'api-key', '--profile', 'rot'], `${NEW_API_KEY}\n`);
    expect(result.stderr).not.toMatch(/error/);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`✓ the service shows connector ${p.connectorId} to the new key`);
    expect(result.stdout).toContain('✓ the API key of profile "rot" is replaced in the file store');
    expect(result.stdout).toContain('a running daemon uses it after a reload (SIGHUP)');
    expect((await storedSecrets(p.home, 'rot')).api_key).toBe(NEW_API_KEY);
    expect(stateOf(p).secretsVersion).toEqual(expect.any(String));
    expect(stateOf(p).secretsVersion).not.toBe(versionBefore);
    expectNowhere([NEW_API_KEY, DEFAULT_EMULATOR_API_KEY], result, p);

    // The old key is withdrawn at the service: the profile goes on working with the new one.
    const workspace = ob.emulator.state.workspaces.get('default');
    // The emulator's key index is internal state; taking a key out of it is what revoking it in the service does.
    const keys = (ob.emulator.state as unknown as { apiKeys: Map<string, unknown> }).apiKeys;
    keys.delete(DEFAULT_EMULATOR_API_KEY);
    try {
      const refreshed = await run(p, ['refresh', '--profile', 'rot'], '');
      expect(refreshed.stderr).toBe('');
      expect(refreshed.code).toBe(0);
    } finally {
      keys.set(DEFAULT_EMULATOR_API_KEY, workspace);
    }
  });

  it('a key the service refuses (401) is not stored, exit 2, and the profile keeps its key', async () => {
    const p = await onboardWithGrant(ob, 'refused', newHome());
    const before = { secrets: readFileSync(secretsFile(p), 'utf8'), state: stateOf(p) };
    const result = await run(p, ['profile', 'rotate', 'api-key', '--profile', 'refused'], `${UNKNOWN_KEY}\n`);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('error: the new API key was not stored: the service refused it (HTTP 401)');
    expect(result.stderr).toContain('the profile keeps its current key');
    expect(readFileSync(secretsFile(p), 'utf8')).toBe(before.secrets);
    expect(stateOf(p)).toEqual(before.state);
    expectNowhere([UNKNOWN_KEY], result, p);
  });

  it("a key of another workspace, which cannot see the profile's connector, is not stored", async () => {
    const p = await onboardWithGrant(ob, 'elsewhere', newHome());
    const before = readFileSync(secretsFile(p), 'utf8');
    const result = await run(p, ['profile', 'rotate', 'api-key', '--profile', 'elsewhere'], `${OTHER_WORKSPACE_KEY}\n`);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`error: the new API key was not stored: the service does not show connector ${p.connectorId} to it: the key belongs to another workspace`);
    expect(readFileSync(secretsFile(p), 'utf8')).toBe(before);
    expectNowhere([OTHER_WORKSPACE_KEY], result, p);
  });

  it('needs the value on stdin or a terminal; an unknown profile exits 1; the env store cannot be written', async () => {
    const p = await onboardWithGrant(ob, 'edges', newHome());
    const empty = await run(p, ['profile', 'rotate', 'api-key', '--profile', 'edges'], '');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('error: new API key: expected it as one line on stdin (or run in a terminal to be asked)');

    const unknown = await run(p, ['profile', 'rotate', 'api-key', '--profile', 'nosuch'], `${NEW_API_KEY}\n`);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('error: there is no profile "nosuch"; nothing was changed');

    const wrongWhat = await run(p, ['profile', 'rotate', 'refresh-token', '--profile', 'edges'], '');
    expect(wrongWhat.code).toBe(2);
    expect(wrongWhat.stderr).toContain("error: command-argument value 'refresh-token' is invalid for argument 'secret'. Allowed choices are api-key, app-secret.");

    const envStore = await run(p, ['profile', 'rotate', 'api-key', '--profile', 'edges'], `${NEW_API_KEY}\n`, {
      SYNCAUTH_STORE: 'env', SYNCAUTH_STORE_KEY: undefined, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY,
    });
    expect(envStore.code).toBe(2);
    expect(envStore.stderr).toContain('error: cannot rotate the API key of profile "edges": with SYNCAUTH_STORE=env the secrets come from the environment');
    expect(envStore.stderr).toContain('Set SYNCAUTH_API_KEY to the new value where that environment is defined');
    expectNowhere([NEW_API_KEY], envStore, p);
  });

  it.skipIf(!hasTmux && !isCI())(`${tmuxNote}asks with hidden input in a terminal (tmux): what is typed is never shown`, async () => {
    const p = await onboardWithGrant(ob, 'typed', newHome());
    const socket = `syncauth-rotate-${process.pid}`;
    const tmux = (...args: string[]) => spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], {
      encoding: 'utf8',
      // The server, started by the first call, hands this environment to the command; nothing secret is in argv.
      env: { PATH: process.env.PATH, HOME: p.home.dir, TERM: 'xterm-256color', ...p.env },
    });
    const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-100', '-t', 'rotate').stdout;
    try {
      const started = tmux('new-session', '-d', '-s', 'rotate', '-x', '160', '-y', '40', '-c', p.home.dir,
        `${process.execPath} ${CLI} profile rotate api-key --profile typed; echo "exit=$?"; sleep 60`);
      expect(started.status, started.stderr).toBe(0);
      await waitFor('the prompt', () => (/New API key/.test(screen()) ? true : undefined), 15_000);
      tmux('send-keys', '-t', 'rotate', '-l', NEW_API_KEY);
      tmux('send-keys', '-t', 'rotate', 'Enter');
      const final = await waitFor('the command to end', () => {
        const text = screen();
        return /exit=\d+/.test(text) ? text : undefined;
      }, 20_000);
      expect(final).toContain('exit=0');
      expect(final).toContain('the API key of profile "typed" is replaced');
      for (const form of forms(NEW_API_KEY)) expect(final).not.toContain(form);
      expect((await storedSecrets(p.home, 'typed')).api_key).toBe(NEW_API_KEY);
    } finally {
      tmux('kill-server');
    }
  });
});

describe('profile rotate app-secret', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding();
  });
  afterAll(async () => ob.emulator.close());

  /** The secret is regenerated in the App Console: the emulator's app now takes the new one only. */
  function regenerateAppSecret(secret: string): void {
    const app = ob.emulator.options.apps.find((a) => a.appKey === ob.app.appKey) as { appSecret: string };
    app.appSecret = secret;
  }

  it('refuses a secret Dropbox does not take, then stores the right one after a real renewal whose token it keeps', async () => {
    const p = await onboardWithGrant(ob, 'sec', newHome());
    const newSecret = 'rotated-app-secret-canary-5c4b3a29';
    const wrongSecret = 'wrong-app-secret-canary-0a1b2c3d4e';
    regenerateAppSecret(newSecret);

    // Until then the profile cannot renew: the old secret is refused.
    const broken = await run(p, ['refresh', '--profile', 'sec'], '');
    expect(broken.code).not.toBe(0);
    expect(broken.stderr).toMatch(/Dropbox refused the app credentials/);

    const before = readFileSync(secretsFile(p), 'utf8');
    const versionBefore = stateOf(p).secretsVersion;
    const refused = await run(p, ['profile', 'rotate', 'app-secret', '--profile', 'sec'], `${wrongSecret}\n`);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('error: the new app secret was not stored: Dropbox refused it (invalid_client)');
    expect(readFileSync(secretsFile(p), 'utf8')).toBe(before);
    expect(stateOf(p).secretsVersion).toBe(versionBefore);
    expectNowhere([wrongSecret], refused, p);

    const rotated = await run(p, ['profile', 'rotate', 'app-secret', '--profile', 'sec'], `${newSecret}\n`);
    expect(rotated.stderr).not.toMatch(/error/);
    expect(rotated.code).toBe(0);
    expect(rotated.stdout).toMatch(/✓ Dropbox renewed the access token with the new app secret \(valid until \S+\)/);
    expect(rotated.stdout).toContain(`the connector ${p.connectorId} on the service still holds the old app secret: \`${RUN_AS} refresh --profile sec\` updates it now`);
    const stored = await storedSecrets(p.home, 'sec');
    expect(stored.app_secret).toBe(newSecret);
    expect(stateOf(p).secretsVersion).not.toBe(versionBefore);
    expect(stateOf(p)).not.toHaveProperty('lastError');
    // The access token of that renewal is kept, as refresh keeps it: `token` hands it out without renewing.
    const issued = newestAccessTokenOf(ob, p.refreshToken);
    const cached = decodeAccessToken((stored as { access_token?: string }).access_token, { appKey: ob.app.appKey, refreshToken: p.refreshToken });
    expect(cached?.accessToken).toBe(issued);
    expect(stateOf(p).accessTokenExpiresAt).toBe(new Date(cached?.expiresAt ?? 0).toISOString());
    const tokenCount = ob.emulator.state.accessTokens.size;
    const token = await run(p, ['token', '--profile', 'sec'], '');
    expect(token.stdout).toBe(`${issued}\n`);
    expect(ob.emulator.state.accessTokens.size).toBe(tokenCount);
    expectNowhere([newSecret, issued], rotated, p);

    // refresh now works again and hands the service the new secret.
    const refreshed = await run(p, ['refresh', '--profile', 'sec'], '');
    expect(refreshed.code).toBe(0);
    expect(sources(ob).find((s) => s.id === p.connectorId)?.config.app_secret).toBe(newSecret);
  });
});
