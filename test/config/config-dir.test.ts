// Who may write the config dir (src/config-dir.ts), judged as another local user (uid 65534, run for real
// through setpriv) would leave it: a config dir or a directory above it that another user owns or may write is
// refused naming its path, owner, mode and the rule; /tmp and a temporary dir under it still do; a root-owned
// directory every user may write (a Kubernetes emptyDir) is used through `<dir>/syncauth-<uid>/`, which is
// checked again before each write, so one another user put in its place is never written.
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkConfigDir, groupIsPrivate } from '../../src/config-dir.js';
import { resolveSettings } from '../../src/config.js';
import { SyncauthError } from '../../src/errors.js';
import { getAccessToken, openProfileStore } from '../../src/index.js';
import { tempDir } from '../helpers/cli.js';

const NOBODY = 65534;
const UID = process.geteuid?.() ?? 0;
const OWN = `syncauth-${UID}`;

function asNobody(script: string, ...args: string[]): void {
  const result = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'sh', '-ec', script, 'sh', ...args], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
}

const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A directory uid 65534 makes in /tmp itself, as `mkdir -m MODE /tmp/x` would. */
function nobodysDir(mode: string): string {
  const dir = path.join(tmpdir(), `syncauth-x-${process.pid}-${made.length}`);
  asNobody('mkdir -m "$1" "$2"', mode, dir);
  made.push(dir);
  return dir;
}

function refusalOf(dir: string): SyncauthError {
  try {
    checkConfigDir(dir);
  } catch (error) {
    expect(error).toBeInstanceOf(SyncauthError);
    return error as SyncauthError;
  }
  throw new Error(`${dir} was not refused`);
}

describe('the config dir and the directories above it', () => {
  it('a config dir in a temporary directory under /tmp is used as it is, made or not', () => {
    const dir = tempDir('syncauth-config-dir-');
    expect(checkConfigDir(dir)).toEqual({ given: dir, dir });
    expect(checkConfigDir(path.join(dir, 'config'))).toEqual({ given: path.join(dir, 'config'), dir: path.join(dir, 'config') });
  });

  it("uid 65534's /tmp/x (0777, no sticky bit) is refused, naming the path, owner, mode and rule, and the NFS fix", () => {
    const dir = nobodysDir('0777');
    const error = refusalOf(dir);
    expect(error.code).toBe('SYNCAUTH_CONFIG_DIR_UNSAFE');
    expect(error.exitCode).toBe(2);
    expect(error.message).toContain(`refusing the config directory ${dir}: ${dir} (owner uid 65534, nobody, mode 0777) belongs to another user`);
    expect(error.hint).toContain('the config directory and every directory above it must belong to this user or root, and no other user may write them');
    expect(error.hint).toContain('network file system without id mapping (NFS)');
    expect(error.hint).toContain('set SYNCAUTH_CONFIG_DIR (--config-dir) to a directory on a local file system');
    // Not even a directory below it: whoever owns a directory above may replace anything under it.
    expect(refusalOf(path.join(dir, 'config')).message).toContain(`${dir} (owner uid 65534, nobody, mode 0777), above the config directory, belongs to another user`);
  });

  it('a config dir another user owns is refused even when only its owner may write it', () => {
    const dir = nobodysDir('0700');
    expect(refusalOf(dir).message).toContain(`${dir} (owner uid 65534, nobody, mode 0700) belongs to another user`);
  });

  it('a directory of this user that every user may write, without the sticky bit, is refused with the chmod that fixes it', () => {
    const dir = tempDir('syncauth-config-dir-');
    const config = path.join(dir, 'config');
    mkdirSync(config);
    chmodSync(dir, 0o777);
    expect(refusalOf(config).message).toContain(`${dir} (owner uid ${UID}, root, mode 0777), above the config directory, is writable by every user (without the sticky bit)`);
    chmodSync(dir, 0o1777);
    expect(checkConfigDir(config).dir).toBe(config);
  });

  it('a group-writable directory above it is refused unless its group has no member but this user', () => {
    const dir = tempDir('syncauth-config-dir-');
    const config = path.join(dir, 'config');
    chmodSync(dir, 0o775);
    chownSync(dir, UID, 0);
    // root's own group: nobody else in it, as in a Debian user-private group (a 0775 ~/.config).
    expect(groupIsPrivate(0, 0)).toBe(true);
    if (UID === 0) expect(checkConfigDir(config).dir).toBe(config);
    // nogroup: nobody's primary group.
    chownSync(dir, UID, NOBODY);
    expect(groupIsPrivate(NOBODY)).toBe(false);
    expect(refusalOf(config).message).toContain(`${dir} (owner uid ${UID}, root, mode 0775), above the config directory, is writable by its group (gid ${NOBODY}, nogroup), which has members other than this user`);
  });

  it("a config dir reached through uid 65534's symbolic link in /tmp is refused, though it leads to this user's own directory", () => {
    const own = tempDir('syncauth-config-dir-');
    const link = path.join(tmpdir(), `syncauth-lnk-${process.pid}-${made.length}`);
    asNobody('ln -s "$1" "$2"', own, link);
    made.push(link);
    expect(refusalOf(link).message).toContain(`${link} is a symbolic link of uid 65534 (nobody), who may point it elsewhere at any time`);
    expect(refusalOf(path.join(link, 'config')).message).toContain(`${link} is a symbolic link of uid 65534`);
    // Through a link of this user's own to it, too.
    const mine = path.join(tempDir('syncauth-config-dir-'), 'via');
    symlinkSync(link, mine);
    expect(refusalOf(mine).message).toContain(`${link} is a symbolic link of uid 65534`);
    // A link of this user's (or root's) is followed as before.
    const fine = path.join(tempDir('syncauth-config-dir-'), 'cfg');
    symlinkSync(own, fine);
    expect(checkConfigDir(fine).dir).toBe(fine);
  });

  it('a profile state uid 65534 puts in place after the config dir was opened to every user is refused when the daemon reads it again (a reload)', async () => {
    const home = tempDir('syncauth-config-dir-');
    chmodSync(home, 0o755);
    const dir = path.join(home, 'config');
    const store = openProfileStore(dir);
    await store.update('docs', () => ({ remoteUrl: 'dropbox://data', accountId: 'dbid:AAowner' }));
    expect((await store.read('docs'))?.accountId).toBe('dbid:AAowner');
    chmodSync(dir, 0o777);
    chmodSync(path.join(dir, 'profiles'), 0o777);
    const planted = JSON.stringify({ ...JSON.parse(readFileSync(path.join(dir, 'profiles', 'docs.json'), 'utf8')), accountId: 'dbid:AAattacker' });
    asNobody('printf %s "$2" > "$1.new" && mv "$1.new" "$1"', path.join(dir, 'profiles', 'docs.json'), planted);
    // The daemon's store, opened at start, reads the state again (a reload, the next sweep).
    await expect(store.read('docs')).rejects.toThrow(/belongs to uid 65534/);
  });

  it("a config dir not made yet under uid 65534's directory or a shared one without the sticky bit, named relatively or not, is refused", () => {
    const theirs = nobodysDir('0777');
    const relative = path.relative(process.cwd(), path.join(theirs, 'config'));
    expect(path.isAbsolute(relative)).toBe(false);
    expect(() => resolveSettings({ env: { SYNCAUTH_CONFIG_DIR: relative } })).toThrow(`${theirs} (owner uid 65534, nobody, mode 0777), above the config directory, belongs to another user`);
    const shared = tempDir('syncauth-config-dir-');
    chmodSync(shared, 0o777);
    expect(refusalOf(path.join(shared, 'config', 'syncauth')).message).toContain(`${shared} (owner uid ${UID}, root, mode 0777), above the config directory, is writable by every user (without the sticky bit)`);
    expect(existsSync(path.join(shared, 'config'))).toBe(false);
  });

  it('resolveSettings, where every command and the library learn the config dir, refuses it (or, for doctor, reports it)', () => {
    const dir = nobodysDir('0777');
    expect(() => resolveSettings({ env: { SYNCAUTH_CONFIG_DIR: dir } })).toThrow(/refusing the config directory/);
    const reported = resolveSettings({ env: { SYNCAUTH_CONFIG_DIR: dir }, configDirCheck: 'report' });
    expect(reported.configDirVerdict?.refused?.code).toBe('SYNCAUTH_CONFIG_DIR_UNSAFE');
    expect(resolveSettings({ env: { SYNCAUTH_CONFIG_DIR: dir }, configDirCheck: 'skip' }).values.configDir).toBe(dir);
  });
});

describe("the library's entry points", () => {
  it('getAccessToken and openProfileStore refuse the config dir as the commands do, before reading it', async () => {
    const dir = nobodysDir('0777');
    asNobody('mkdir "$1/profiles" && printf "%s" "{}" > "$1/profiles/docs.json"', dir);
    await expect(getAccessToken({ configDir: dir, profile: 'docs', store: 'env', env: {} })).rejects.toMatchObject({ code: 'SYNCAUTH_CONFIG_DIR_UNSAFE', exitCode: 2 });
    expect(() => openProfileStore(dir)).toThrow(/refusing the config directory/);
  });
});

describe('a root-owned config dir every user may write (an emptyDir)', () => {
  function emptyDir(): string {
    const dir = tempDir('syncauth-emptydir-');
    chmodSync(dir, 0o2777);
    return dir;
  }

  it('is used through syncauth-<uid>, made 0700 at the first write; nothing lands beside it', async () => {
    const dir = emptyDir();
    const verdict = checkConfigDir(dir);
    expect(verdict.dir).toBe(path.join(dir, OWN));
    expect(verdict.movedBecause).toBe(`${dir} (owner uid ${UID}, root, mode 02777) is writable by every user`);
    await openProfileStore(dir).update('docs', () => ({ remoteUrl: 'dropbox://data' }));
    expect(readdirSync(dir)).toEqual([OWN]);
    expect(statSync(path.join(dir, OWN)).mode & 0o777).toBe(0o700);
    expect(existsSync(path.join(dir, OWN, 'profiles', 'docs.json'))).toBe(true);
    // Named directly, the subdirectory is accepted as the same place.
    expect(checkConfigDir(path.join(dir, OWN)).dir).toBe(path.join(dir, OWN));
  });

  it('a syncauth-<uid> there that another user made, or a link, is refused', () => {
    const dir = emptyDir();
    asNobody('mkdir -m 0700 "$1"', path.join(dir, OWN));
    expect(refusalOf(dir).message).toContain(`so its state lives in ${path.join(dir, OWN)}, but ${path.join(dir, OWN)} belongs to uid 65534`);
    expect(refusalOf(path.join(dir, OWN)).message).toContain(`it must be this user's own directory inside ${dir}, which others may write, but ${path.join(dir, OWN)} belongs to uid 65534`);
    const linked = emptyDir();
    symlinkSync(tempDir('syncauth-elsewhere-'), path.join(linked, OWN));
    expect(refusalOf(linked).message).toContain(`${path.join(linked, OWN)} is a symbolic link`);
  });

  it('a syncauth-<uid> there that another user made as a plain file is refused too', () => {
    const dir = emptyDir();
    asNobody('touch "$1"', path.join(dir, OWN));
    expect(refusalOf(dir).message).toContain(`so its state lives in ${path.join(dir, OWN)}, but`);
  });

  it('one another user renames away and replaces after the start is refused before the next write', async () => {
    const dir = emptyDir();
    const store = openProfileStore(dir);
    await store.update('docs', () => ({ remoteUrl: 'dropbox://data' }));
    asNobody('mv "$1/$2" "$1/old" && mkdir -m 0777 "$1/$2" "$1/$2/profiles"', dir, OWN);
    await expect(store.update('docs', () => ({ remoteUrl: 'dropbox://other' }))).rejects.toThrow(new RegExp(`refusing to use .*${OWN}.*belongs to uid 65534`));
    expect(readdirSync(path.join(dir, OWN, 'profiles'))).toEqual([]);
  });

  it('a config dir another user owns is refused, never used through a subdirectory', () => {
    const dir = nobodysDir('2777');
    expect(refusalOf(dir).message).toContain('a config directory of another user is never used, not even through a subdirectory');
    expect(existsSync(path.join(dir, OWN))).toBe(false);
  });
});
