// File-system primitives shared by the profile state and the encrypted secret file: private directories and
// atomic private files.
import { chmod, mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import writeFileAtomic from 'write-file-atomic';

/**
 * Creates `dir` (and its parents) as 0700. An existing directory is tightened to 0700 only when `tighten` is
 * set: syncauth owns its `profiles` directory, but a config dir the user pointed us at keeps its mode.
 */
export async function ensurePrivateDir(dir: string, options: { tighten?: boolean } = {}): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (options.tighten) {
    const info = await stat(dir);
    if ((info.mode & 0o777) !== 0o700) await chmod(dir, 0o700);
  }
}

/**
 * Writes a 0600 file through a temporary file in the same directory and a rename, so a reader sees either the
 * old content or the new, never a torn write; on failure the temporary file is removed and the old file stays.
 */
export async function writePrivateFile(file: string, data: string | Buffer): Promise<void> {
  await writeFileAtomic(file, data, { mode: 0o600, fsync: true });
}

/** The file's text, or undefined when it does not exist yet; any other failure is thrown. */
export async function readTextIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Removes the temporary files that atomic writes of these files left behind when their process was killed
 * mid-write (write-file-atomic names them `<file>.<number>`). Only those older than `olderThanMs`: another
 * process may be writing one now, and a write takes milliseconds.
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
