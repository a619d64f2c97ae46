// Re-keying the encrypted file store: in-process for the store's own guarantees (every secret carried over,
// the old key shut out, refusals that leave the file as it was, a write that dies half-way), and through
// `syncauth profile rekey` in real processes, one of them killed with SIGKILL while it writes.
import type * as Fs from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { createCipheriv, randomBytes, scryptSync } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, test, vi } from 'vitest';
import { isSecretStoreError, openFileSecretStore, openSecretStore, type StoredSecrets } from '../../src/credentials/index.js';
import { ExitCode, ValidationError, type SyncauthError } from '../../src/errors.js';
import { CLI, RUN_AS, runCli, tempDir } from '../helpers/cli.js';
import { isCI } from '../helpers/secret-service.js';
import { waitFor } from '../helpers/wait.js';

// The hidden-prompt test drives a real terminal: tmux. Outside CI it is skipped where tmux is missing, saying so.
const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const tmuxNote = hasTmux ? '' : '[skipped: tmux is not installed; with CI set this fails instead] ';
import {
  grantRefreshToken, newHome, onboardingEnv, onboardWithGrant, runCli as runOnboardingCli, startOnboarding, storedSecrets, type Onboarding,
} from '../helpers/onboarding.js';

const crash = vi.hoisted(() => ({ armed: false, tmpfiles: [] as string[] }));

// A write that dies after its temporary file holds part of the new content, as in test/profile/atomic-write.
// The rename is where an atomic write commits: failing it, after the temporary file was created and written,
// is the crash to survive. The temporary file is cut to part of its content first, as a killed writer leaves it.
vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof Fs>();
  const renameSync = (from: string, to: string): void => {
    if (!crash.armed || !/\.\d+$/.test(String(from))) return real.renameSync(from, to);
    crash.armed = false;
    crash.tmpfiles.push(String(from));
    real.truncateSync(from, 40);
    throw new Error('simulated crash during write');
  };
  return { ...real, default: { ...real, renameSync }, renameSync };
});

const FORMAT_1_FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/secrets-v1.enc');
const FORMAT_1_KEY = 'fixture-store-key-of-format-1';
const OLD_KEY = 'old-store-key-canary-4c1d2e3f5a';
const NEW_KEY = 'new-store-key-canary-8b7a6c5d4e';

const PROFILES: Record<string, StoredSecrets> = {
  docs: { app_key: 'docs-app-key', app_secret: 'docs-app-secret', refresh_token: 'docs-refresh-token', api_key: 'docs-api-key', access_token: '{"cached":"docs"}' },
  photos: { app_key: 'photos-app-key', refresh_token: 'photos-refresh-token' },
};

let configDir: string;
const file = () => path.join(configDir, 'secrets.enc');
const open = (key: string) => openFileSecretStore({ configDir, storeKey: () => key });

async function fill(key: string, profiles: Record<string, StoredSecrets> = PROFILES): Promise<void> {
  const store = open(key);
  for (const [name, secrets] of Object.entries(profiles)) await store.set(name, secrets);
}

async function contents(key: string): Promise<Record<string, StoredSecrets>> {
  const store = open(key);
  const out: Record<string, StoredSecrets> = {};
  for (const name of await store.listProfiles()) out[name] = await store.get(name);
  return out;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(() => {
    throw new Error('expected a failure');
  }, (error: unknown) => error);
}

function envelope(): { version: number; kdf: { salt: string } } {
  return JSON.parse(readFileSync(file(), 'utf8')) as ReturnType<typeof envelope>;
}

/**
 * A version 2 store as a syncauth before the 16-character rule wrote it, with any key: the same envelope and
 * associated data the store uses, built here because the store itself now refuses such a key for a new file.
 */
function writeStoreWithKey(dir: string, key: string, profiles: Record<string, StoredSecrets>): void {
  const kdf = { name: 'scrypt', N: 2 ** 14, r: 8, p: 1, salt: randomBytes(16).toString('base64') };
  const derived = scryptSync(key, Buffer.from(kdf.salt, 'base64'), 32, { N: kdf.N, r: kdf.r, p: kdf.p });
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', derived, iv);
  cipher.setAAD(Buffer.from(JSON.stringify({ format: 'syncauth-secrets', version: 2, kdf })));
  const data = Buffer.concat([cipher.update(JSON.stringify({ profiles })), cipher.final()]);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dir, 'secrets.enc'), JSON.stringify({
    format: 'syncauth-secrets', version: 2, kdf,
    cipher: { name: 'aes-256-gcm', iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64') },
    data: data.toString('base64'),
  }), { mode: 0o600 });
}

beforeEach(() => {
  configDir = tempDir('syncauth-rekey-');
  crash.armed = false;
  crash.tmpfiles = [];
});

describe('FileSecretStore.rekey', () => {
  test('carries every profile over under a new salt; afterwards the old key is refused and the new one opens it', async () => {
    await fill(OLD_KEY);
    const saltBefore = envelope().kdf.salt;
    const records = () => readdirSync(path.join(configDir, 'secrets')).sort().map((name) => readFileSync(path.join(configDir, 'secrets', name), 'utf8'));
    const recordsBefore = records();
    expect(await open(OLD_KEY).rekey(NEW_KEY)).toEqual(['docs', 'photos']);
    expect(await contents(NEW_KEY)).toEqual(PROFILES);
    expect(envelope()).toMatchObject({ version: 3 });
    expect(envelope().kdf.salt).not.toBe(saltBefore);
    // Only the keyring was rewritten: the records, sealed with the data key it wraps, are as they were.
    expect(records()).toEqual(recordsBefore);
    const refused = await failure(open(OLD_KEY).get('docs'));
    expect(isSecretStoreError(refused, 'STORE_LOCKED')).toBe(true);
    const raw = readFileSync(file(), 'utf8');
    for (const value of [NEW_KEY, OLD_KEY, 'docs-app-secret']) expect(raw).not.toContain(value);
  });

  test('re-keys a file a format-1 release wrote, which then reads as format 3 with the new key', async () => {
    copyFileSync(FORMAT_1_FIXTURE, file());
    expect(envelope().version).toBe(1);
    const before = await contents(FORMAT_1_KEY);
    expect(Object.keys(before)).toEqual(['docs', 'other']);
    await open(FORMAT_1_KEY).rekey(NEW_KEY);
    expect(envelope().version).toBe(3);
    expect(await contents(NEW_KEY)).toEqual(before);
  });

  test('refuses a new key shorter than 16 characters, the same key, and a wrong current key, leaving the file as it was', async () => {
    await fill(OLD_KEY);
    const before = readFileSync(file(), 'utf8');
    const short = await failure(open(OLD_KEY).rekey('fifteen-chars-x'));
    expect(short).toBeInstanceOf(ValidationError);
    expect((short as ValidationError).exitCode).toBe(ExitCode.usage);
    expect((short as Error).message).toBe(
      'new store key: the new key is shorter than 16 characters; use a long random value such as the output of `openssl rand -base64 32`',
    );
    // Sixteen is enough (counted after trimming, as the key is used).
    await expect(open(OLD_KEY).rekey('  sixteen-chars-xy  ')).resolves.toEqual(['docs', 'photos']);
    await open('sixteen-chars-xy').rekey(OLD_KEY);
    const kept = readFileSync(file(), 'utf8');

    const same = await failure(open(OLD_KEY).rekey(OLD_KEY));
    expect((same as Error).message).toBe('new store key: is the key the store already has');
    const wrong = await failure(open('not-the-current-key-at-all').rekey(NEW_KEY));
    expect(isSecretStoreError(wrong, 'STORE_LOCKED')).toBe(true);
    expect(readFileSync(file(), 'utf8')).toBe(kept);
    expect(before).not.toBe(kept);
    expect(await contents(OLD_KEY)).toEqual(PROFILES);

    const empty = tempDir('syncauth-rekey-none-');
    const none = await failure(openFileSecretStore({ configDir: empty, storeKey: () => OLD_KEY }).rekey(NEW_KEY));
    expect((none as SyncauthError).code).toBe('SYNCAUTH_NO_STORE');
    expect(existsSync(path.join(empty, 'secrets.enc'))).toBe(false);
  });

  test('a write that dies half-way leaves the old file, opened by the old key, and no temporary file', async () => {
    await fill(OLD_KEY);
    const before = readFileSync(file(), 'utf8');
    crash.armed = true;
    await expect(open(OLD_KEY).rekey(NEW_KEY)).rejects.toThrow('simulated crash during write');
    expect(crash.tmpfiles).toHaveLength(1);
    expect(readFileSync(file(), 'utf8')).toBe(before);
    expect(readdirSync(configDir).sort()).toEqual(['secrets', 'secrets.enc']);
    expect(readdirSync(path.join(configDir, 'secrets')).sort()).toEqual(['docs.enc', 'docs.token', 'photos.enc']);
    expect(await contents(OLD_KEY)).toEqual(PROFILES);
  });
});

describe('syncauth profile rekey', () => {
  const env = (key: string | undefined) => ({ SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: key });

  test('re-encrypts the store with the key from stdin: every profile intact, the old key shut out, no key printed', async () => {
    await fill(OLD_KEY);
    const result = await runCli(['profile', 'rekey'], { env: env(OLD_KEY), stdin: `${NEW_KEY}\n` });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`✓ ${file()} is re-encrypted with the new key (2 profiles); the old key no longer opens it`);
    expect(result.stdout).toContain('set SYNCAUTH_STORE_KEY to the new key wherever syncauth uses this store');
    for (const key of [OLD_KEY, NEW_KEY]) {
      for (const form of [key, Buffer.from(key).toString('base64')]) expect(result.stdout + result.stderr).not.toContain(form);
    }
    expect(await contents(NEW_KEY)).toEqual(PROFILES);
    expect(isSecretStoreError(await failure(open(OLD_KEY).listProfiles()), 'STORE_LOCKED')).toBe(true);
  });

  test('refuses a short new key (exit 2, naming the rule, not the key), a wrong current key, and a store that is not the file', async () => {
    await fill(OLD_KEY);
    const before = readFileSync(file(), 'utf8');
    const short = await runCli(['profile', 'rekey'], { env: env(OLD_KEY), stdin: 'short-key-1234\n' });
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('error: new store key: the new key is shorter than 16 characters');
    expect(short.stderr).not.toContain('short-key-1234');

    const wrong = await runCli(['profile', 'rekey'], { env: env('a-wrong-current-key-0000'), stdin: `${NEW_KEY}\n` });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`error: the store key does not open ${file()}`);

    const keychain = await runCli(['profile', 'rekey'], { env: { ...env(OLD_KEY), SYNCAUTH_STORE: 'keychain' }, stdin: `${NEW_KEY}\n` });
    expect(keychain.code).toBe(2);
    expect(keychain.stderr).toContain('error: SYNCAUTH_STORE: profile rekey re-keys the encrypted file store, but this store is "keychain"; set SYNCAUTH_STORE=file');

    const noInput = await runCli(['profile', 'rekey'], { env: env(OLD_KEY), stdin: '' });
    expect(noInput.code).toBe(2);
    expect(noInput.stderr).toContain('error: new store key: expected it as one line on stdin');
    expect(readFileSync(file(), 'utf8')).toBe(before);

    const missing = await runCli(['profile', 'rekey'], { env: { ...env(OLD_KEY), SYNCAUTH_CONFIG_DIR: tempDir() }, stdin: `${NEW_KEY}\n` });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/error: there is no encrypted store at \S+secrets\.enc: nothing to re-key/);
  });

  test('killed with SIGKILL while it writes, it leaves a store that one of the two keys opens whole', async () => {
    // Enough secrets that writing the file takes a moment; made in one write, as 400 set() calls would take long.
    const many: Record<string, StoredSecrets> = {};
    for (let i = 0; i < 400; i++) many[`p${String(i).padStart(3, '0')}`] = { refresh_token: randomBytes(600).toString('base64'), app_key: `k${i}` };
    writeStoreWithKey(configDir, OLD_KEY, many);
    const names = Object.keys(many).sort();
    const sample = ['p000', 'p199', 'p399'];
    /** What `key` opens: every name, and the secrets of a sample, or undefined when it does not open the file. */
    const opened = async (key: string) => {
      const store = open(key);
      try {
        return { names: await store.listProfiles(), sample: await Promise.all(sample.map((name) => store.get(name))) };
      } catch (error) {
        if (isSecretStoreError(error, 'STORE_LOCKED')) return undefined;
        throw error;
      }
    };
    let current = OLD_KEY;
    for (let round = 0; round < 6; round++) {
      const next = current === OLD_KEY ? NEW_KEY : OLD_KEY;
      const child = spawn(process.execPath, [CLI, 'profile', 'rekey'], {
        cwd: configDir,
        env: { PATH: process.env.PATH, HOME: configDir, ...env(current) },
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
      // Even rounds: killed at the first sign of the write (its temporary file appearing, or the store file itself
      // changing, as a write in place would); odd rounds: at some point in its run.
      const watcher = watch(configDir, (_event, name) => {
        if (round % 2 === 0 && name && /^secrets\.enc(\.\d+)?$/.test(String(name))) child.kill('SIGKILL');
      });
      const timer = round % 2 === 1 ? setTimeout(() => child.kill('SIGKILL'), 150 + round * 60) : undefined;
      child.stdin.end(`${next}\n`);
      await exited;
      watcher.close();
      clearTimeout(timer);
      // The killed process held the store's lock; the next one would take it over only once it is stale (10 s).
      rmSync(`${file()}.lock`, { recursive: true, force: true });
      const withCurrent = await opened(current);
      const withNext = await opened(next);
      // Exactly one of the keys opens it, and what it opens is everything.
      expect([withCurrent, withNext].filter(Boolean)).toHaveLength(1);
      expect(withCurrent ?? withNext).toEqual({ names, sample: sample.map((name) => many[name]) });
      if (withNext) current = next;
    }
  });
});

describe('syncauth profile rekey in a terminal', () => {
  test.skipIf(!hasTmux && !isCI())(`${tmuxNote}asks for the new key twice with hidden input (tmux), refuses two entries that differ, and never shows the key`, async () => {
    await fill(OLD_KEY);
    const socket = `syncauth-rekey-${process.pid}`;
    const tmux = (...args: string[]) => spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], {
      encoding: 'utf8',
      // The server, started by the first call, hands this environment to the commands; no key is in argv.
      env: { PATH: process.env.PATH, HOME: configDir, TERM: 'xterm-256color', SYNCAUTH_CONFIG_DIR: configDir, SYNCAUTH_STORE: 'file', SYNCAUTH_STORE_KEY: OLD_KEY },
    });
    const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'rekey').stdout;
    const type = (text: string) => {
      tmux('send-keys', '-t', 'rekey', '-l', text);
      tmux('send-keys', '-t', 'rekey', 'Enter');
    };
    const command = `${process.execPath} ${CLI} profile rekey`;
    try {
      const started = tmux('new-session', '-d', '-s', 'rekey', '-x', '160', '-y', '50', '-c', configDir,
        `${command}; echo "first=$?"; ${command}; echo "second=$?"; sleep 60`);
      expect(started.status, started.stderr).toBe(0);
      await waitFor('the first prompt', () => (/New store key/.test(screen()) ? true : undefined), 15_000);
      type(NEW_KEY);
      await waitFor('the confirmation', () => (/The new store key again/.test(screen()) ? true : undefined));
      type(`${NEW_KEY}-typo`);
      await waitFor('the first run to end', () => (/first=\d+/.test(screen()) ? true : undefined));
      expect(screen()).toContain('first=2');
      expect(screen()).toContain('error: new store key: the two entries differ');
      expect(await contents(OLD_KEY)).toEqual(PROFILES);

      // What the second run shows: the screen after the first run's exit line.
      const second = () => screen().split(/first=\d+/)[1] ?? '';
      await waitFor('the second prompt', () => (/New store key/.test(second()) ? true : undefined), 15_000);
      type(NEW_KEY);
      await waitFor('the second confirmation', () => (/The new store key again/.test(second()) ? true : undefined));
      type(NEW_KEY);
      const final = await waitFor('the second run to end', () => {
        const text = screen();
        return /second=\d+/.test(text) ? text : undefined;
      }, 20_000);
      expect(final).toContain('second=0');
      for (const form of [NEW_KEY, Buffer.from(NEW_KEY).toString('base64'), OLD_KEY]) expect(final).not.toContain(form);
      expect(await contents(NEW_KEY)).toEqual(PROFILES);
    } finally {
      tmux('kill-server');
    }
  });
});

describe('store keys shorter than 16 characters, through the CLI', () => {
  let ob: Onboarding;
  beforeAll(async () => {
    ob = await startOnboarding();
  });
  afterAll(async () => ob.emulator.close());

  test('an existing store opened with a short key keeps working with a warning naming profile rekey, until re-keyed', async () => {
    const p = await onboardWithGrant(ob, 'short', newHome());
    const shortKey = 'short-key-12345';
    // The store as a release before the rule may have written it: the same secrets under a 15-character key.
    writeStoreWithKey(p.home.configDir, shortKey, { short: await storedSecrets(p.home, 'short') });
    const shortEnv = { ...p.env, SYNCAUTH_STORE_KEY: shortKey };
    const token = await runOnboardingCli(['token', '--profile', 'short'], { env: shortEnv, cwd: p.home.dir });
    expect(token.code).toBe(0);
    expect(token.stdout).toMatch(/^sl\.\S+\n$/);
    const warnings = token.stderr.split('\n').filter((line) => line.startsWith('warning: SYNCAUTH_STORE_KEY is shorter than 16 characters'));
    expect(warnings).toHaveLength(1);
    expect(token.stderr).toContain(`Run \`${RUN_AS} profile rekey\``);
    expect(token.stderr).not.toContain(shortKey);

    const rekeyed = await runOnboardingCli(['profile', 'rekey'], { env: shortEnv, cwd: p.home.dir, stdin: `${NEW_KEY}\n` });
    expect(rekeyed.code).toBe(0);
    const after = await runOnboardingCli(['token', '--profile', 'short'], { env: { ...p.env, SYNCAUTH_STORE_KEY: NEW_KEY }, cwd: p.home.dir });
    expect(after.code).toBe(0);
    expect(after.stderr).toBe('');
  });

  test('in-process: a short key opening an existing store is reported once through onWarning, without the key', async () => {
    const shortKey = 'short-key-12345';
    writeStoreWithKey(configDir, shortKey, PROFILES);
    const warnings: string[] = [];
    const store = openSecretStore({ kind: 'file', configDir, storeKey: shortKey, env: {}, onWarning: (message) => warnings.push(message) });
    expect(await store.get('docs')).toEqual(PROFILES.docs);
    await store.set('photos', { api_key: 'photos-api-key' });
    expect(await store.listProfiles()).toEqual(['docs', 'photos']);
    expect(warnings).toEqual([
      `SYNCAUTH_STORE_KEY is shorter than 16 characters; ${file()} still opens with it, but a new store would refuse it. ` +
        'Run `syncauth profile rekey` to re-encrypt the store under a long random key (e.g. the output of `openssl rand -base64 32`).',
    ]);
    // A long key says nothing.
    await open(shortKey).rekey(NEW_KEY);
    const quiet: string[] = [];
    await openSecretStore({ kind: 'file', configDir, storeKey: NEW_KEY, env: {}, onWarning: (message) => quiet.push(message) }).get('docs');
    expect(quiet).toEqual([]);
  });

  test('setup refuses to make a new store with a short key: exit 2, naming SYNCAUTH_STORE_KEY, never echoing it', async () => {
    const home = newHome();
    const shortKey = 'tiny-key-999';
    const result = await runOnboardingCli(['setup', '--yes', '--profile', 'fresh'], {
      env: onboardingEnv(ob, home, { SYNCAUTH_STORE_KEY: shortKey, SYNCAUTH_REFRESH_TOKEN: await grantRefreshToken(ob) }),
      cwd: home.dir,
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/SYNCAUTH_STORE_KEY: the key for the new store \S+secrets\.enc is shorter than 16 characters/);
    expect(result.stdout + result.stderr).not.toContain(shortKey);
    expect(existsSync(path.join(home.configDir, 'secrets.enc'))).toBe(false);
  });
});
