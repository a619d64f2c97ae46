// File-system primitives shared by the profile state and the encrypted secret file: private directories and
// atomic private files.
import { closeSync, fchmodSync, fchownSync, fstatSync, fsync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { chmod, mkdir, open, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { assertConfigDirStill, assertFileTrusted } from '../config-dir.js';

/**
 * Creates `dir` (and its parents) as 0700. An existing directory is tightened to 0700 only when `tighten` is
 * set: syncauth owns its `profiles` directory, but a config dir the user pointed us at keeps its mode.
 */
export async function ensurePrivateDir(dir: string, options: { tighten?: boolean } = {}): Promise<void> {
  // A config dir (config-dir.ts) must still be what was checked at start, and one this makes must be its own.
  assertConfigDirStill(dir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  assertConfigDirStill(dir);
  if (options.tighten) {
    const info = await stat(dir);
    if ((info.mode & 0o777) !== 0o700) await chmod(dir, 0o700);
  }
}

let temporaries = 0;

/**
 * A fresh temporary name beside `file`: `<file>.<digits>`, unique in this process (its id, then a counter) and
 * across processes (the id), which `removeTemporaryLeftovers` recognises.
 */
export function temporaryNameFor(file: string): string {
  temporaries = (temporaries + 1) % 1_000_000_000;
  return `${file}.${process.pid}${String(temporaries).padStart(9, '0')}`;
}

/**
 * Writes a 0600 file through a temporary file in the same directory and a rename, so a reader sees either the
 * old content or the new, never a torn write; on failure the temporary file is removed and the old file stays.
 * The temporary file is created exclusively (never through a link or over a file someone left at its name) and
 * 0600 from its first instant, checked with fstat to be the new regular file this process made, and its content
 * is flushed to disk before the rename. A symbolic link at `file` is never followed: the rename replaces the
 * link itself, so a link planted where a file is published cannot turn the write into an overwrite of whatever
 * it points at. With `durable: false` (a record that can be learnt again) the flush is skipped. The identity
 * returned lets a cache recognise the file later with one stat.
 *
 * The calls are synchronous but for the flush: each is a local operation of microseconds, and a round trip
 * through libuv's thread pool costs several times that in CPU (the renewal path writes one of these per
 * renewal); only the flush waits for the disk, so only it is awaited.
 *
 * `share` widens the file for consumers (the published token file): the group and mode are set on the
 * temporary file before the rename, so the content is never readable by anyone not named, not even for an
 * instant, and a refused chown fails the write rather than leave the file with the wrong group.
 */
export async function writePrivateFile(
  file: string,
  data: string | Buffer,
  share?: { mode: number; gid?: number },
  // Links are never followed (`followLinks` is accepted as false only, for callers that say so).
  options: { durable?: boolean; followLinks?: false } = {},
): Promise<FileIdentity> {
  const target = file;
  assertConfigDirStill(target);
  const temporary = temporaryNameFor(target);
  let renamed = false;
  // 'wx' (O_CREAT|O_EXCL): never reuse a file (or follow a link) someone left at the temporary name.
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    let identity: FileIdentity;
    try {
      const opened = fstatSync(fd);
      if (!opened.isFile() || opened.nlink !== 1 || (process.geteuid !== undefined && opened.uid !== process.geteuid())) {
        throw Object.assign(new Error(`${temporary} is not the new private file this process created`), { code: 'EEXIST' });
      }
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written);
      if (options.durable !== false) await flush(fd);
      if (share?.gid !== undefined) fchownSync(fd, -1, share.gid);
      // Exactly the mode asked, whatever the umask took away: a starting daemon adopts a token file only with it.
      if (share && (opened.mode & 0o7777) !== share.mode) fchmodSync(fd, share.mode);
      // The renamed file keeps inode, size and mtime (a rename changes only its ctime).
      const info = fstatSync(fd);
      identity = { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, target);
    renamed = true;
    return identity;
  } finally {
    if (!renamed) rmSync(temporary, { force: true });
  }
}

const flush = promisify(fsync);

/** What tells one version of a file from another, short of reading it. */
export interface FileIdentity {
  ino: number;
  size: number;
  mtimeMs: number;
}

/**
 * The file's text, or undefined when it does not exist yet; any other failure is thrown, and so is a file another
 * user owns or may write (config-dir.ts, assertFileTrusted), judged on the file as opened.
 */
export async function readTextIfExists(file: string): Promise<string | undefined> {
  assertConfigDirStill(file);
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    assertFileTrusted(file, await handle.stat());
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/** The names in a directory, or none when it does not exist yet; any other failure is thrown. */
export async function readdirIfExists(dir: string): Promise<string[]> {
  assertConfigDirStill(dir);
  try {
    return await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/**
 * Removes the temporary files that atomic writes of these files left behind when their process was killed
 * mid-write (`temporaryNameFor` names them `<file>.<number>`, as write-file-atomic did before). Only those older
 * than `olderThanMs`: another process may be writing one now, and a write takes milliseconds.
 */
export async function removeTemporaryLeftovers(files: readonly string[], olderThanMs: number): Promise<void> {
  const byDir = new Map<string, Set<string>>();
  for (const file of files) {
    const names = byDir.get(path.dirname(file)) ?? new Set<string>();
    names.add(path.basename(file));
    byDir.set(path.dirname(file), names);
  }
  const cutoff = Date.now() - olderThanMs;
  for (const [dir, bases] of byDir) {
    const entries = await readdir(dir).catch(() => [] as string[]);
    const leftovers = entries.filter((name) => {
      const dot = name.lastIndexOf('.');
      return dot > 0 && /^\d+$/.test(name.slice(dot + 1)) && bases.has(name.slice(0, dot));
    });
    await Promise.all(
      leftovers.map(async (name) => {
        const file = path.join(dir, name);
        const info = await stat(file).catch(() => undefined);
        if (info?.isFile() && info.mtimeMs <= cutoff) await rm(file, { force: true });
      }),
    );
  }
}
