// What a starting daemon adopts of a token file an earlier run left: only a regular file of its own user with
// the mode syncauth gives it (and its expiry likewise). Anything else is removed, never followed, and one line
// with a stable event says why.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, linkSync, lstatSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readTokenFile, writeTokenFile } from '../../src/publish/token-file.js';
import { captureLog, tempDir } from './helpers.js';

const NOBODY = 65534;
const EXPIRES = Date.parse('2099-01-01T00:00:00.000Z');

function leftBehind(mode = 0o600): { dir: string; file: string } {
  const dir = tempDir('syncauth-adopt-');
  const file = path.join(dir, 'token');
  writeFileSync(file, 'sl.left-by-an-earlier-run', { mode });
  writeFileSync(`${file}.expires_at`, `${new Date(EXPIRES).toISOString()}\n`, { mode });
  chmodSync(file, mode);
  chmodSync(`${file}.expires_at`, mode);
  return { dir, file };
}

async function refused(file: string, expectation: { mode?: number } = {}): Promise<Record<string, unknown>[]> {
  const log = captureLog('info');
  expect(await readTokenFile(file, { ...expectation, log: log.logger, profile: 'docs' })).toBeUndefined();
  return log.records().filter((r) => r.event === 'token_file.refused');
}

describe('adopting a token file left by an earlier run', () => {
  it('one syncauth wrote is adopted, with the mode it was given', async () => {
    const dir = tempDir('syncauth-adopt-');
    const file = path.join(dir, 'token');
    await writeTokenFile(file, 'sl.mine', EXPIRES, { mode: 0o640 });
    expect(await readTokenFile(file, { mode: 0o640 })).toEqual({ value: 'sl.mine', expiresAt: EXPIRES });
    const { file: plain } = leftBehind();
    expect(await readTokenFile(plain)).toEqual({ value: 'sl.left-by-an-earlier-run', expiresAt: EXPIRES });
  });

  it('one written under a umask that takes the owner write bit still has its mode, and is adopted', async () => {
    const dir = tempDir('syncauth-adopt-');
    const file = path.join(dir, 'token');
    const previous = process.umask(0o277);
    try {
      await writeTokenFile(file, 'sl.mine', EXPIRES);
    } finally {
      process.umask(previous);
    }
    expect((lstatSync(file).mode & 0o777).toString(8)).toBe('600');
    expect(await readTokenFile(file)).toEqual({ value: 'sl.mine', expiresAt: EXPIRES });
  });

  it('a file of another user is refused and removed, with one line naming the path and why', async () => {
    const { file } = leftBehind();
    chownSync(file, NOBODY, NOBODY);
    const lines = await refused(file);
    expect(lines).toEqual([expect.objectContaining({ profile: 'docs', op: 'publish', path: file, reason: `it belongs to uid ${NOBODY}, not to this user (uid ${process.geteuid?.()})`, removed: true, level: 40 })]);
    expect(existsSync(file)).toBe(false);
    expect(existsSync(`${file}.expires_at`)).toBe(false);
  });

  it('so is an expiry file of another user beside a token of its own', async () => {
    const { file } = leftBehind();
    chownSync(`${file}.expires_at`, NOBODY, NOBODY);
    const lines = await refused(file);
    expect(lines).toEqual([expect.objectContaining({ path: `${file}.expires_at` })]);
    expect(existsSync(file)).toBe(false);
  });

  it('a link is removed, not followed: the file it points at stays and is not read', async () => {
    const { dir } = leftBehind();
    const secret = path.join(dir, 'secret');
    writeFileSync(secret, 'sl.root-only', { mode: 0o600 });
    const file = path.join(dir, 'linked');
    symlinkSync(secret, file);
    writeFileSync(`${file}.expires_at`, `${new Date(EXPIRES).toISOString()}\n`, { mode: 0o600 });
    const lines = await refused(file);
    expect(lines).toEqual([expect.objectContaining({ path: file, reason: 'it is a symbolic link' })]);
    expect(() => lstatSync(file)).toThrow();
    expect(readFileSync(secret, 'utf8')).toBe('sl.root-only');
  });

  it('a mode other than the one syncauth gives it is refused', async () => {
    const { file } = leftBehind(0o644);
    expect(await refused(file)).toEqual([expect.objectContaining({ reason: 'its mode is 0644, not 0600 as syncauth writes it' })]);
    const { file: shared } = leftBehind(0o600);
    expect(await refused(shared, { mode: 0o640 })).toEqual([expect.objectContaining({ reason: 'its mode is 0600, not 0640 as syncauth writes it' })]);
  });

  it('a hard link, a file too large to be a token, and a FIFO (read without blocking) are refused', async () => {
    const { dir, file } = leftBehind();
    linkSync(file, path.join(dir, 'second-name'));
    expect(await refused(file)).toEqual([expect.objectContaining({ reason: 'it has other hard links' })]);

    const { file: large } = leftBehind();
    writeFileSync(large, 'x'.repeat(64 * 1024), { mode: 0o600 });
    expect(await refused(large)).toEqual([expect.objectContaining({ reason: 'it is larger than 16384 bytes' })]);

    const { file: fifo } = leftBehind();
    execFileSync('rm', [`${fifo}.expires_at`]);
    execFileSync('mkfifo', ['-m', '0600', `${fifo}.expires_at`]);
    expect(await refused(fifo)).toEqual([expect.objectContaining({ reason: 'it is not a regular file' })]);
  });
});
