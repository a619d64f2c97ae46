// Where a sink (the token file, a template's DEST, the socket) may live. Whoever may write a sink's directory
// may plant a file or a link there before syncauth writes, or swap what it wrote: a fake token adopted as
// syncauth's own, or a link that turns a render into an overwrite of another file. So a sink whose directory
// another user may write (group- or world-writable: /tmp, a Kubernetes emptyDir, which is 0777) is never
// written there directly: syncauth publishes it in a directory of its own inside, `<dir>/syncauth-<uid>/`,
// 0750 with the sink's group, which it makes or, when it exists, accepts only as a real directory it owns
// that no group or other user may write. Anything else there is refused at start (exit 2).
import { chmod, chown, lstat, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { absorbing, SyncauthError, ValidationError } from '../errors.js';
import { modeText, ownSubdirProblem, privateSubdirName } from '../own-subdir.js';

// The config dir's checks (config-dir.ts) judge their own subdirectory by the same rule; it lives beside both.
export { ownSubdirProblem, ownUid, privateSubdirName } from '../own-subdir.js';

export const PRIVATE_SUBDIR_MODE = 0o750;

/** In a sink's path (the token file, a template's DEST), replaced by the profile's name. */
export const PROFILE_PLACEHOLDER = '{profile}';

/** The path `template` names for `profile`. */
export function tokenFileFor(template: string, profile: string): string {
  return template.split(PROFILE_PLACEHOLDER).join(profile);
}

export const PLACE_RULE = 'a sink in a directory other users may write is published in a private subdirectory syncauth-<uid> (0750, owned by the daemon\'s user) inside it';

/**
 * Why other users may write `dir` (undefined when they may not, or when it cannot be read: the caller's own
 * checks name a missing directory). The directory a path names is judged, links followed: the operator chose it.
 */
export async function sharedBecause(dir: string): Promise<string | undefined> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) return undefined;
  if (info.mode & 0o002) return `${dir} is world-writable (${modeText(info.mode)})`;
  if (info.mode & 0o020) return `${dir} is group-writable (${modeText(info.mode)})`;
  return undefined;
}

/** `file` moved into the private subdirectory of its directory; `{profile}` in the path is kept as it is. */
export function insidePrivateSubdir(file: string): string {
  return path.join(path.dirname(file), privateSubdirName(), path.basename(file));
}

/** Whether `file` lies directly in a private subdirectory of this user (a sink moved there at start). */
export function inPrivateSubdir(file: string): boolean {
  return path.basename(path.dirname(file)) === privateSubdirName();
}

/**
 * Before each write into a private subdirectory: it must still be this user's own. In a directory without the
 * sticky bit, another writer could rename it away and put their own in its place.
 */
export async function assertSinkDir(file: string): Promise<void> {
  if (!inPrivateSubdir(file)) return;
  const problem = await ownSubdirProblem(path.dirname(file));
  if (problem) throw new SyncauthError('SINK_UNSAFE', `refusing to write ${file}: ${problem}`, { hint: PLACE_RULE });
}

/** Makes, or accepts, `dir` as this user's own subdirectory: 0750, with `gid` as its group when given. */
async function ensurePrivateSubdir(dir: string, field: string, gid: number | undefined): Promise<void> {
  const refuse = (why: string): never => {
    throw new ValidationError([{ field, message: `${why}; ${PLACE_RULE}: remove it, or choose a directory only this user may write` }]);
  };
  const created = await mkdir(dir, { mode: 0o700 }).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') return false;
      return refuse(`cannot create ${dir} (${error.code ?? error.message})`);
    },
  );
  const problem = await ownSubdirProblem(dir);
  if (problem) refuse(problem);
  try {
    if (gid !== undefined && (await lstat(dir)).gid !== gid) await chown(dir, -1, gid);
    if (created || ((await lstat(dir)).mode & 0o7777) !== PRIVATE_SUBDIR_MODE) await chmod(dir, PRIVATE_SUBDIR_MODE);
  } catch (error) {
    refuse(`cannot give ${dir} its group and mode 0750 (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
}

export interface SinkRequest {
  /** The path as configured; may contain `{profile}`. */
  path: string;
  /** The setting's flag or variable, for messages. */
  field: string;
  /** The group the sink is given, which its private subdirectory gets too. */
  gid?: number;
}

export interface PlacedSink {
  /** Where the sink is written: the configured path, or the same name inside the private subdirectory. */
  path: string;
  /** Why it moved, when it did. */
  movedBecause?: string;
}

/**
 * Places every sink by the rule above, `expand` giving each profile's instance of a path. Sinks that move into
 * the same directory must agree on its group. Throws one ValidationError naming every refused path.
 */
export async function placeSinks(requests: readonly SinkRequest[], expand: (template: string) => readonly string[]): Promise<PlacedSink[]> {
  const placed: PlacedSink[] = [];
  const groups = new Map<string, { gid: number | undefined; field: string }>();
  const issues: { field: string; message: string }[] = [];
  for (const request of requests) {
    let movedBecause: string | undefined;
    for (const file of expand(request.path)) {
      movedBecause ??= await sharedBecause(path.dirname(file));
    }
    if (movedBecause === undefined) {
      placed.push({ path: request.path });
      continue;
    }
    const moved = insidePrivateSubdir(request.path);
    for (const file of expand(moved)) {
      const dir = path.dirname(file);
      const earlier = groups.get(dir);
      if (earlier && request.gid !== undefined && earlier.gid !== undefined && earlier.gid !== request.gid) {
        issues.push({ field: request.field, message: `${dir} would need group ${request.gid} for ${request.field} and group ${earlier.gid} for ${earlier.field}; give the sinks one group or separate directories` });
        continue;
      }
      if (!earlier || earlier.gid === undefined) groups.set(dir, { gid: request.gid, field: request.field });
    }
    placed.push({ path: moved, movedBecause });
  }
  for (const [dir, { gid, field }] of groups) {
    await absorbing(issues, () => ensurePrivateSubdir(dir, field, gid));
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return placed;
}
