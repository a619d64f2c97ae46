// Publishing the access token for processes next to the daemon: written whole or not at all (a temporary
// file renamed over the old one), readable by the owner only unless a mode and group are given, and removed
// once the token it holds expires. Templates (template.ts) are rendered right after it; they are
// not removed at expiry (they carry the expiry, and a consumer's configuration should not vanish).
// Beside it, `<file>.expires_at` holds the token's expiry (RFC 3339), so a consumer can judge the token when no
// daemon runs. The token is written before its expiry and removed before it, so a consumer that reads both
// never sees a token with a later expiry than its own.
import { constants } from 'node:fs';
import { open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { absorbing, ValidationError, type FieldIssue } from '../errors.js';
import type { Logger } from '../log.js';
import { removeTemporaryLeftovers } from '../profile/files.js';
import { parseMode, PRIVATE_ACCESS, resolveGroup, writeSharedFile, type FileAccess } from './file.js';
import { ownUid, PROFILE_PLACEHOLDER, tokenFileFor } from './place.js';
import type { TemplateSpec } from './template.js';

export const EXPIRY_SUFFIX = '.expires_at';

/** Several profiles cannot share one file: the path must tell them apart. */
export function checkTokenFileTemplate(template: string, profileCount: number, field = 'tokenFile'): void {
  if (profileCount > 1 && !template.includes(PROFILE_PLACEHOLDER)) {
    throw new ValidationError([
      {
        field,
        message: `serves ${profileCount} profiles, so the path must contain ${PROFILE_PLACEHOLDER} (e.g. /run/syncauth/${PROFILE_PLACEHOLDER}.token)`,
      },
    ]);
  }
}

/**
 * Refuses, before anything is written, a token file that cannot be written: `{profile}` missing where several
 * profiles share the path, a directory that does not exist, a directory where the file should be.
 */
export async function checkTokenFilePlaces(template: string, names: readonly string[], field: string): Promise<void> {
  checkTokenFileTemplate(template, names.length, field);
  for (const name of names) {
    const file = tokenFileFor(template, name);
    const dir = path.dirname(file);
    const info = await stat(dir).catch(() => undefined);
    if (!info?.isDirectory()) throw new ValidationError([{ field, message: `the directory ${dir} does not exist` }]);
    if ((await stat(file).catch(() => undefined))?.isDirectory()) {
      throw new ValidationError([{ field, message: `${file} is a directory, but the token file must be a file (e.g. ${path.join(file, 'token')})` }]);
    }
  }
}

/** How the token file is given: its path, mode and group as set, and the settings that named each. */
export interface TokenFileSetting {
  path: string | undefined;
  mode: string | undefined;
  group: string | undefined;
  fields: { path: string; mode: string; group: string };
}

/**
 * The token file's access from its settings, checked before anything starts: a bad mode or group, or either
 * given without a token file, is refused (one ValidationError naming each). Undefined when neither is given.
 */
export async function tokenFileAccessOf(setting: TokenFileSetting): Promise<FileAccess | undefined> {
  const issues: FieldIssue[] = [];
  const mode = setting.mode === undefined ? undefined : await absorbing(issues, () => parseMode(setting.mode as string, setting.fields.mode));
  const gid = setting.group === undefined ? undefined : await absorbing(issues, () => resolveGroup(setting.group as string, setting.fields.group));
  if ((setting.mode !== undefined || setting.group !== undefined) && !setting.path) {
    issues.push({ field: setting.mode !== undefined ? setting.fields.mode : setting.fields.group, message: `needs a token file (${setting.fields.path})` });
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return mode !== undefined || gid !== undefined ? { mode: mode ?? PRIVATE_ACCESS.mode, ...(gid !== undefined ? { gid } : {}) } : undefined;
}

/** The token alone, no newline: `$(cat file)` and a program reading the whole file both get it exactly. */
export async function writeTokenFile(file: string, token: string, expiresAt: number, access: FileAccess = PRIVATE_ACCESS): Promise<void> {
  await writeSharedFile(file, token, access);
  await writeSharedFile(`${file}${EXPIRY_SUFFIX}`, `${new Date(expiresAt).toISOString()}\n`, access);
}

export async function removeTokenFile(file: string): Promise<void> {
  await rm(file, { force: true });
  await rm(`${file}${EXPIRY_SUFFIX}`, { force: true });
}

/** What an adopted token file must be: the mode syncauth gives it, and who is told when one is refused. */
export interface TokenFileExpectation {
  /** Default 0600, as `writeTokenFile` makes it. */
  mode?: number;
  log?: Logger;
  profile?: string;
}

/** A Dropbox access token is about 1.3 kB; anything much larger is not one syncauth wrote. */
const MAX_TOKEN_BYTES = 16 * 1024;
const MAX_EXPIRY_BYTES = 256;

type Opened = { text: string } | { refused: string } | undefined;

/**
 * Reads `file` only if it is what syncauth itself leaves: a regular file (never through a link: O_NOFOLLOW),
 * owned by this user, with exactly `mode`, one link, at most `max` bytes. Opened non-blocking, so a FIFO put
 * in its place cannot hang the daemon; what was opened is judged with fstat, not by its name.
 */
async function readOwnFile(file: string, mode: number, max: number): Promise<Opened> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP' || code === 'EMLINK') return { refused: 'it is a symbolic link' };
    return { refused: `it cannot be opened (${code ?? (error as Error).message})` };
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return { refused: 'it is not a regular file' };
    if (info.uid !== ownUid()) return { refused: `it belongs to uid ${info.uid}, not to this user (uid ${ownUid()})` };
    if ((info.mode & 0o7777) !== mode) return { refused: `its mode is 0${(info.mode & 0o7777).toString(8)}, not 0${mode.toString(8).padStart(3, '0')} as syncauth writes it` };
    if (info.nlink !== 1) return { refused: 'it has other hard links' };
    if (info.size > max) return { refused: `it is larger than ${max} bytes` };
    const buffer = Buffer.alloc(max + 1);
    const { bytesRead } = await handle.read(buffer, 0, max + 1, 0);
    if (bytesRead > max) return { refused: `it is larger than ${max} bytes` };
    return { text: buffer.subarray(0, bytesRead).toString('utf8') };
  } finally {
    await handle.close();
  }
}

/**
 * What a token file left by an earlier run holds, when both it and its expiry can be read and are what
 * syncauth writes (see `readOwnFile`). A file that is anything else (a link, another user's, another mode) is
 * not adopted: both files are removed (unlinked, never followed) and one line says why; the caller renews.
 */
export async function readTokenFile(file: string, expect: TokenFileExpectation = {}): Promise<{ value: string; expiresAt: number } | undefined> {
  const mode = expect.mode ?? PRIVATE_ACCESS.mode;
  const expiryFile = `${file}${EXPIRY_SUFFIX}`;
  const [value, expiry] = await Promise.all([readOwnFile(file, mode, MAX_TOKEN_BYTES), readOwnFile(expiryFile, mode, MAX_EXPIRY_BYTES)]);
  const refused = value && 'refused' in value ? { path: file, why: value.refused } : expiry && 'refused' in expiry ? { path: expiryFile, why: expiry.refused } : undefined;
  if (refused) {
    const removed = await removeTokenFile(file).then(() => true, () => false);
    expect.log?.warn(
      { ...(expect.profile ? { profile: expect.profile } : {}), event: 'token_file.refused', op: 'publish', path: refused.path, reason: refused.why, removed },
      `not adopting ${refused.path}: ${refused.why}; ${removed ? 'removed it' : 'could not remove it'}, and a fresh token will be published`,
    );
    return undefined;
  }
  const text = value && 'text' in value ? value.text : undefined;
  const expiresAt = expiry && 'text' in expiry ? Date.parse(expiry.text.trim()) : NaN;
  if (!text || !Number.isFinite(expiresAt)) return undefined;
  return { value: text, expiresAt };
}

/** Removes what an interrupted write left beside the token file and its expiry: this process is their only writer. */
export function removeLeftovers(file: string): Promise<void> {
  return removeTemporaryLeftovers([file, `${file}${EXPIRY_SUFFIX}`], 0);
}

/**
 * A profile's own sinks (a profile entry of the daemon's configuration file): its token file is used instead of
 * the daemon-wide one, with its own access; its templates are rendered besides the daemon-wide ones. Paths are
 * the profile's own, `{profile}` already replaced, and placed (see place.ts).
 */
export interface ProfileSinks {
  tokenFile?: string;
  /** The own token file's mode and group; default 0600, whatever the daemon-wide file's. */
  tokenFileAccess?: FileAccess;
  templates?: readonly TemplateSpec[];
}

/** Whether two profiles' own sinks are the same, for a reload that must restart what changed. */
export function sameProfileSinks(a: ProfileSinks | undefined, b: ProfileSinks | undefined): boolean {
  const key = (sinks: ProfileSinks | undefined) =>
    JSON.stringify([sinks?.tokenFile, sinks?.tokenFileAccess?.mode, sinks?.tokenFileAccess?.gid, (sinks?.templates ?? []).map((t) => [t.source, t.dest, t.mode])]);
  return key(a) === key(b);
}
