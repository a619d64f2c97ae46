// A directory of this user's own inside a shared one (`<dir>/syncauth-<uid>/`): its name, and what makes one
// acceptable (a real directory this user owns that no group or other user may write). Sinks in a shared
// directory (publish/place.ts) and a shared config dir (config-dir.ts) are both kept in one, by this one rule.
import { lstatSync, type Stats } from 'node:fs';
import { lstat } from 'node:fs/promises';

/** The effective user id: the owner of every file syncauth creates. */
export function ownUid(): number {
  return process.geteuid?.() ?? process.getuid?.() ?? -1;
}

/** The name of the directory of this user's own inside a shared directory. */
export function privateSubdirName(uid = ownUid()): string {
  return `syncauth-${uid}`;
}

export function modeText(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;
}

/** What is wrong with `dir` as this user's own subdirectory; undefined when it is one (a real directory it owns, not writable by group or others). */
export async function ownSubdirProblem(dir: string): Promise<string | undefined> {
  return subdirProblemOf(dir, await lstat(dir).catch((error: NodeJS.ErrnoException) => error));
}

/** ownSubdirProblem in one synchronous lstat, for the config dir's checks (config-dir.ts); `missingOk`: none yet is no problem. */
export function ownSubdirProblemSync(dir: string, options: { missingOk?: boolean } = {}): string | undefined {
  let info: Stats | NodeJS.ErrnoException;
  try {
    info = lstatSync(dir);
  } catch (error) {
    info = error as NodeJS.ErrnoException;
    if (options.missingOk && info.code === 'ENOENT') return undefined;
  }
  return subdirProblemOf(dir, info);
}

function subdirProblemOf(dir: string, info: Stats | NodeJS.ErrnoException): string | undefined {
  if (info instanceof Error) return info.code === 'ENOENT' ? `${dir} does not exist` : `cannot inspect ${dir} (${info.code ?? info.message})`;
  if (info.isSymbolicLink()) return `${dir} is a symbolic link`;
  if (!info.isDirectory()) return `${dir} is not a directory`;
  if (info.uid !== ownUid()) return `${dir} belongs to uid ${info.uid}, not to this user (uid ${ownUid()})`;
  if (info.mode & 0o022) return `${dir} is writable by its group or by others (${modeText(info.mode)})`;
  return undefined;
}
