// Files handed to a consumer that may run as another user (the usual sidecar): a mode and a group chosen by
// the operator, and the same whole-or-nothing replacement as the private files.
import { lstat } from 'node:fs/promises';
import { ValidationError } from '../errors.js';
import { writePrivateFile } from '../profile/files.js';
import { assertSinkDir } from './place.js';
import { FileRefusedError, readRegularFile } from './safe-read.js';

export interface FileAccess {
  mode: number;
  gid?: number;
}

export const PRIVATE_ACCESS: FileAccess = Object.freeze({ mode: 0o600 });

const MAX_GID = 0xfffffffe; // (gid_t)-1 means "unchanged" to chown(2), so it is not a group.

function modeText(mode: number): string {
  return `0${mode.toString(8).padStart(3, '0')}`;
}

function parseOctal(raw: string, field: string): number {
  const match = /^(?:0o)?([0-7]+)$/i.exec(raw.trim());
  if (!match) throw new ValidationError([{ field, message: `"${raw}" is not an octal mode (e.g. 0600 or 0640)` }]);
  const mode = Number.parseInt(match[1] as string, 8);
  if (mode > 0o777) {
    throw new ValidationError([{ field, message: `${raw}: only permission bits may be given (at most 0777; no setuid, setgid or sticky bit)` }]);
  }
  return mode;
}

/**
 * A file mode as operators write it: '0640', '640' or '0o640'. Whoever may write the file may replace the token
 * a consumer reads, so group- and world-writable modes are refused, and so is a mode the owner (syncauth)
 * cannot read back.
 */
export function parseMode(raw: string, field: string): number {
  const mode = parseOctal(raw, field);
  const refuse = (why: string): never => {
    throw new ValidationError([{ field, message: `${modeText(mode)} ${why}` }]);
  };
  if (mode & 0o002) refuse('is world-writable: any user could replace the file');
  if (mode & 0o020) refuse('is group-writable: the group could replace the file; give it read access only (e.g. 0640)');
  if (!(mode & 0o400)) refuse('does not let the owner read the file (e.g. 0600 or 0640)');
  return mode;
}

/**
 * A Unix socket's mode: connecting takes write permission on the socket, so the owner needs read and write and
 * a group that should connect needs write (e.g. 0660). World-writable is refused: give a group instead.
 */
export function parseSocketMode(raw: string, field: string): number {
  const mode = parseOctal(raw, field);
  if (mode & 0o002) {
    throw new ValidationError([{ field, message: `${modeText(mode)} lets every local user fetch the token; give a group instead (e.g. 0660)` }]);
  }
  if ((mode & 0o600) !== 0o600) {
    throw new ValidationError([{ field, message: `${modeText(mode)} does not give the owner read and write (e.g. 0600 or 0660)` }]);
  }
  return mode;
}

/**
 * A group by number or by name. Names come from /etc/group, read directly (no `getent`: a slim image has none,
 * and NSS groups are rare where a sidecar runs). A number need not be listed: Kubernetes' fsGroup rarely is.
 */
export async function resolveGroup(raw: string, field: string, groupFile = '/etc/group'): Promise<number> {
  const name = raw.trim();
  if (/^\d+$/.test(name)) {
    const gid = Number(name);
    if (gid > MAX_GID) throw new ValidationError([{ field, message: `${name} is not a valid group id` }]);
    return gid;
  }
  if (!/^[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?$/.test(name)) {
    throw new ValidationError([{ field, message: `"${raw}" is not a group name or number` }]);
  }
  let text: string;
  try {
    // As the daemon reads every file on its way: a special file there cannot block its start.
    text = await readRegularFile(groupFile);
  } catch (error) {
    const why = error instanceof FileRefusedError ? `: it ${error.why}` : ` (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`;
    throw new ValidationError([{ field, message: `cannot read ${groupFile} to look up "${name}"${why}; give the group by number` }]);
  }
  for (const line of text.split('\n')) {
    const [entry, , gid] = line.split(':');
    if (entry === name && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  throw new ValidationError([{ field, message: `no group named "${name}" in ${groupFile}; give an existing group or a number` }]);
}

/**
 * Writes `file` whole or not at all, with the group and mode the operator named (see `writePrivateFile`): a
 * temporary file made exclusively beside it, renamed over it, so a link found at `file` is replaced, never
 * followed. A file in syncauth's private subdirectory of a shared directory is written only while that
 * directory is still its own (src/publish/place.ts). Not flushed to disk: what is published is a short-lived
 * token, expired by the time a crashed machine is back, and a flush would cost every renewal more than its
 * HTTP exchange.
 */
export async function writeSharedFile(file: string, content: string, access: FileAccess): Promise<void> {
  await assertSinkDir(file);
  await writePrivateFile(file, content, access, { durable: false, followLinks: false });
}

/** Which file is at a path: another file there (replaced, or rewritten) is another identity. */
export type FileIdentity = string;

/** The identity of what is at `file` now; undefined when nothing is. */
export async function identityOf(file: string): Promise<FileIdentity | undefined> {
  const info = await lstat(file).catch(() => undefined);
  return info ? `${info.dev}:${info.ino}:${info.mtimeMs}:${info.size}` : undefined;
}

/**
 * As identityOf, but only a file that is not there reads as undefined: one that cannot be looked at now (its
 * directory replaced by a file, unreadable for a while) throws, so that a removal is tried again rather than
 * the file taken for gone.
 */
export async function identityIfThere(file: string): Promise<FileIdentity | undefined> {
  const info = await lstat(file).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  });
  return info ? `${info.dev}:${info.ino}:${info.mtimeMs}:${info.size}` : undefined;
}
