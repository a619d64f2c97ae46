// Who may write the config dir. Whoever may write it, or a directory above it, may replace what syncauth keeps
// there and trusts: a re-authorization link's digest (and with it whose Dropbox account a profile's grant comes
// from), a notice in the outbox that the daemon then signs, the account a profile's state records. So before
// anything in it is read or written, the config dir and every directory above it are judged, in one place
// (resolveSettings calls checkConfigDir: every command, the daemon, setup and the library go through it):
// - each must belong to this user or root, and no other user may write it, except a directory with the
//   sticky bit (as /tmp: others may add names there, not replace this user's) and a group-writable one whose
//   group has no member but this user and root (Debian's user-private groups: a 0775 ~/.config);
// - the config dir itself, owned by root (or carrying the sticky bit) and writable by others (a Kubernetes
//   emptyDir, 0777 or 02777; /tmp itself), is used through a directory of this user's own inside it,
//   `<dir>/syncauth-<uid>/`, made 0700 or accepted by the rule sinks' subdirectories keep (own-subdir.ts); since another
//   writer of the shared directory could rename it away and put their own in its place, it is checked again
//   before each file in it is read or written (assertConfigDirStill, called by profile/files.ts);
// - a config dir another user owns is refused, never used through a subdirectory.
// Anything else is refused at start (exit 2), naming the directory, its owner and mode, and the rule.
import { lstatSync, readFileSync, readlinkSync, realpathSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { SyncauthError } from './errors.js';
import { modeText, ownSubdirProblemSync, ownUid, privateSubdirName } from './own-subdir.js';

export const CONFIG_DIR_RULE =
  'the config directory and every directory above it must belong to this user or root, and no other user may write them ' +
  '(a directory with the sticky bit, like /tmp, and one whose group has no member but this user may be written by others)';

const FIX = 'set SYNCAUTH_CONFIG_DIR (--config-dir) to a directory only this user may write';

/** What a file system without id mapping (NFS with root squashing or no idmapd) shows as every file's owner. */
const NOBODY = 65534;

export interface ConfigDirVerdict {
  /** The config dir as the settings named it. */
  given: string;
  /** Where its state lives: `given`, or `<given>/syncauth-<uid>` when others may write `given`. */
  dir: string;
  /** Why `dir` is not `given`. */
  movedBecause?: string;
  /** Why it may not be used; set instead of thrown only when the caller reports it (doctor). */
  refused?: SyncauthError;
}

type Guard = 'direct' | 'own-subdir';

// The config dirs in use in this process, each as checked at start: judged again before a file in it is read
// or written.
const guarded = new Map<string, Guard>();

/**
 * Judges the config dir `given` (an absolute path) by the rule above. Throws (exit 2) when it may not be used,
 * unless `report` is set, when the refusal is returned in the verdict. Costs a stat of each directory of its
 * path (and of its real path, when links lead elsewhere); group and user names are read once per process.
 */
export function checkConfigDir(given: string, options: { report?: boolean } = {}): ConfigDirVerdict {
  const { guard, ...verdict } = judge(path.resolve(given));
  if (verdict.refused && !options.report) throw verdict.refused;
  if (guard) guarded.set(verdict.dir, guard);
  return verdict;
}

/**
 * Before a file at `file` (or the directory itself) is read or written: the config dir it lies in, when it is
 * one this process checked, must still pass. One stat; nothing for a path outside every config dir in use.
 */
export function assertConfigDirStill(file: string): void {
  if (guarded.size === 0) return;
  for (let dir = file; ; dir = path.dirname(dir)) {
    const guard = guarded.get(dir);
    if (guard) {
      const problem = guard === 'own-subdir' ? ownSubdirStill(dir) : directStill(dir);
      if (problem) {
        throw new SyncauthError('SYNCAUTH_CONFIG_DIR_UNSAFE', `refusing to use ${file}: ${problem}`, { kind: 'bad_input', hint: `${CONFIG_DIR_RULE}; ${FIX}` });
      }
      return;
    }
    if (path.dirname(dir) === dir) return;
  }
}

function ownSubdirStill(dir: string): string | undefined {
  // Not made yet: it is made 0700 by the first write, which then checks it.
  return ownSubdirProblemSync(dir, { missingOk: true });
}

/** Whether a file in a config dir belongs to this user or root and no other user may write it (see assertFileTrusted). */
export function fileTrusted(info: Stats): boolean {
  return trustedOwner(info) && othersWhoMayWrite(info) === undefined;
}

/**
 * Before a file in a config dir is believed: it must belong to this user or root, and no other user may write it.
 * A file another user left there while the directory was open to them (before a `chmod go-w`) stays theirs to
 * rewrite whenever they like, whatever the directory's mode is now; so does one reached through a link. Judged
 * on the opened file's own stat, so nothing can be swapped in between. Throws (exit 2) naming the file.
 */
export function assertFileTrusted(file: string, info: Stats): void {
  if (!trustedOwner(info)) {
    throw new UntrustedFileError(file, info, `it belongs to uid ${info.uid}${userName(info.uid)}, another user, who may rewrite it at any time`);
  }
  const writers = othersWhoMayWrite(info);
  if (writers) throw new UntrustedFileError(file, info, `it is ${writers}`);
}

/**
 * What assertFileTrusted throws (code SYNCAUTH_CONFIG_DIR_UNSAFE, exit 2), with the file, its owner and mode for
 * a caller that answers others without saying why (the re-authorization page) and logs it instead.
 */
export class UntrustedFileError extends SyncauthError {
  readonly file: string;
  readonly owner: number;
  /** Octal, as `0666`. */
  readonly mode: string;

  constructor(file: string, info: Stats, problem: string) {
    super('SYNCAUTH_CONFIG_DIR_UNSAFE', `refusing to read ${file} (owner uid ${info.uid}, mode ${modeText(info.mode)}): ${problem}`, {
      kind: 'bad_input',
      hint: `${CONFIG_DIR_RULE}, and so must every file in it; check what the file holds, then remove it or make it this user's (chown) and not writable by others`,
    });
    this.file = file;
    this.owner = info.uid;
    this.mode = modeText(info.mode);
  }
}

function directStill(dir: string): string | undefined {
  const info = statSync(dir, { throwIfNoEntry: false });
  if (!info?.isDirectory()) return undefined;
  if (!trustedOwner(info)) return `${describeDir(dir, info)} belongs to another user`;
  const writers = othersWhoMayWrite(info);
  return writers ? `${describeDir(dir, info)} is ${writers}` : undefined;
}

function judge(given: string): ConfigDirVerdict & { guard?: Guard } {
  const uid = ownUid();
  // The part of the path that exists: what is missing is made later, 0700, by this user.
  let existing = given;
  let found: Stats | undefined;
  try {
    for (;;) {
      found = statSync(existing, { throwIfNoEntry: false });
      if (found || path.dirname(existing) === existing) break;
      existing = path.dirname(existing);
    }
  } catch {
    // Unreadable on the way (a file where a directory should be, a directory this user may not search): the
    // command meets it when it uses the path and names it then (cli/errno.ts).
    return { given, dir: given };
  }
  if (!found?.isDirectory()) return { given, dir: given };
  let real: string;
  try {
    real = realpathSync.native(existing);
  } catch {
    return { given, dir: given };
  }
  // A symbolic link on the way that another user owns is theirs to point elsewhere (in /tmp, its owner may
  // replace it at any time): the path is as much theirs as a directory of theirs would be.
  const link = foreignLink(existing);
  if (link) {
    const name = readAccounts().names.get(link.info.uid);
    return refusal(given, `${link.path} is a symbolic link of uid ${link.info.uid}${name ? ` (${name})` : ''}, who may point it elsewhere at any time`, link.info);
  }
  const leafExists = existing === given;
  const leafKey = leafExists ? identity(found) : undefined;
  // This user's own directory inside a shared one, named as the config dir (or made missing there): its parent
  // is judged as the shared directory it lives in, and it must be a real directory of this user's own.
  const parent = statSync(path.dirname(given), { throwIfNoEntry: false });
  const namedOwnSubdir = path.basename(given) === privateSubdirName(uid) && parent !== undefined && usableThroughOwnSubdir(parent);
  if (namedOwnSubdir && leafExists) {
    const problem = ownSubdirProblemSync(given);
    if (problem) return refusal(given, `it must be this user's own directory inside ${path.dirname(given)}, which others may write, but ${problem}`, found);
  }
  const sharedParents = new Set<string>();
  if (namedOwnSubdir) sharedParents.add(path.dirname(given));

  const seen = new Set<string>();
  for (const dir of new Set([...prefixes(existing), ...prefixes(real)])) {
    const info = statSync(dir, { throwIfNoEntry: false });
    if (!info) continue;
    const key = identity(info);
    if (seen.has(key) || key === leafKey) continue;
    seen.add(key);
    if (sharedParents.has(dir) && usableThroughOwnSubdir(info)) continue;
    const problem = aboveProblem(dir, info);
    if (problem) return refusal(given, problem, info);
  }
  // Missing: made 0700 by this user's first write, which then checks that it made it (a directory planted
  // there first is not this user's own).
  if (!leafExists) return { given, dir: given, guard: 'own-subdir' };

  if (!trustedOwner(found)) return refusal(given, `${describeDir(given, found)} belongs to another user; a config directory of another user is never used, not even through a subdirectory`, found);
  const writers = othersWhoMayWrite(found);
  if (namedOwnSubdir) return { given, dir: given, guard: 'own-subdir' };
  if (!writers) return { given, dir: given, guard: 'direct' };
  if (!usableThroughOwnSubdir(found)) {
    return refusal(given, `${describeDir(given, found)} is ${writers}`, found, `run \`chmod go-w ${given}\`, or ${FIX}`);
  }
  const own = path.join(given, privateSubdirName(uid));
  const problem = ownSubdirStill(own);
  if (problem) {
    return refusal(given, `${describeDir(given, found)} is ${writers}, so its state lives in ${own}, but ${problem}`, found, `remove ${own}, or ${FIX}`);
  }
  return { given, dir: own, movedBecause: `${describeDir(given, found)} is ${writers}`, guard: 'own-subdir' };
}

/** The first symbolic link another user (not root) owns on the way to `target`, following each link it meets. */
function foreignLink(target: string, depth = 0): { path: string; info: Stats } | undefined {
  // A loop, or a chain longer than the kernel follows: realpath refuses it later anyway.
  if (depth > 40) return undefined;
  for (const at of prefixes(target)) {
    let info: Stats | undefined;
    try {
      info = lstatSync(at, { throwIfNoEntry: false });
    } catch {
      return undefined;
    }
    if (!info) return undefined;
    if (!info.isSymbolicLink()) continue;
    if (!trustedOwner(info)) return { path: at, info };
    let to: string;
    try {
      to = readlinkSync(at);
    } catch {
      return undefined;
    }
    return foreignLink(path.join(path.resolve(path.dirname(at), to), path.relative(at, target)), depth + 1);
  }
  return undefined;
}

/** A directory others may write that this user's state may live in through `<dir>/syncauth-<uid>/`: root's (an emptyDir), or one with the sticky bit. */
function usableThroughOwnSubdir(info: Stats): boolean {
  return trustedOwner(info) && othersWhoMayWrite(info) !== undefined && (info.uid === 0 || (info.mode & 0o1000) !== 0);
}

/** Why a directory above the config dir may not be above it, or undefined. */
function aboveProblem(dir: string, info: Stats): string | undefined {
  if (!info.isDirectory()) return undefined;
  if (!trustedOwner(info)) return `${describeDir(dir, info)}, above the config directory, belongs to another user`;
  if (info.mode & 0o1000) return undefined;
  const writers = othersWhoMayWrite(info);
  return writers ? `${describeDir(dir, info)}, above the config directory, is ${writers} (without the sticky bit)` : undefined;
}

function trustedOwner(info: Stats): boolean {
  return info.uid === ownUid() || info.uid === 0;
}

/** Who besides this user may write a directory of this mode, in words; undefined when nobody may. */
function othersWhoMayWrite(info: Stats): string | undefined {
  if (info.mode & 0o002) return 'writable by every user';
  if (info.mode & 0o020 && !groupIsPrivate(info.gid)) return `writable by its group (gid ${info.gid}${groupName(info.gid)}), which has members other than this user`;
  return undefined;
}

function describeDir(dir: string, info: Stats): string {
  return `${dir} (owner uid ${info.uid}${userName(info.uid)}, mode ${modeText(info.mode)})`;
}

function refusal(given: string, problem: string, info: Stats, fix = FIX): ConfigDirVerdict {
  const nfs = info.uid === NOBODY && ownUid() !== NOBODY
    ? `; an owner of uid ${NOBODY} is what a network file system without id mapping (NFS) shows for every file: set SYNCAUTH_CONFIG_DIR (--config-dir) to a directory on a local file system`
    : '';
  const refused = new SyncauthError('SYNCAUTH_CONFIG_DIR_UNSAFE', `refusing the config directory ${given}: ${problem}`, {
    kind: 'bad_input',
    hint: `${CONFIG_DIR_RULE}; ${fix}${nfs}`,
  });
  return { given, dir: given, refused };
}

function identity(info: Stats): string {
  return `${info.dev}:${info.ino}`;
}

/** `/a/b/c` as `/`, `/a`, `/a/b`, `/a/b/c`. */
function prefixes(dir: string): string[] {
  const all: string[] = [];
  for (let at = dir; ; at = path.dirname(at)) {
    all.unshift(at);
    if (path.dirname(at) === at) return all;
  }
}

// ---- users and groups, from /etc/passwd and /etc/group, read once per process ----

interface Accounts {
  /** uid by user name. */
  uids: Map<string, number>;
  names: Map<number, string>;
  /** The uids whose primary group each gid is. */
  primary: Map<number, number[]>;
  /** The member names each group lists, and its name. */
  groups: Map<number, { name: string; members: string[] }>;
}

let accounts: Accounts | undefined;

function readAccounts(): Accounts {
  if (accounts) return accounts;
  const lines = (file: string): string[][] => {
    try {
      return readFileSync(file, 'utf8').split('\n').filter((line) => line && !line.startsWith('#')).map((line) => line.split(':'));
    } catch {
      return [];
    }
  };
  const found: Accounts = { uids: new Map(), names: new Map(), primary: new Map(), groups: new Map() };
  for (const [name, , uidText, gidText] of lines('/etc/passwd')) {
    const uid = Number(uidText);
    const gid = Number(gidText);
    if (!name || !Number.isInteger(uid) || !Number.isInteger(gid)) continue;
    found.uids.set(name, uid);
    if (!found.names.has(uid)) found.names.set(uid, name);
    found.primary.set(gid, [...(found.primary.get(gid) ?? []), uid]);
  }
  for (const [name, , gidText, members] of lines('/etc/group')) {
    const gid = Number(gidText);
    if (!name || !Number.isInteger(gid) || found.groups.has(gid)) continue;
    found.groups.set(gid, { name, members: (members ?? '').split(',').map((member) => member.trim()).filter(Boolean) });
  }
  accounts = found;
  return found;
}

/**
 * Whether no user but this one (and root) is in group `gid`: the users /etc/group lists in it and those whose
 * primary group it is. A group /etc/group does not name (one from a directory service) cannot be judged: no.
 */
export function groupIsPrivate(gid: number, uid = ownUid()): boolean {
  const { groups, primary, uids } = readAccounts();
  const group = groups.get(gid);
  if (!group) return false;
  const members = [...group.members.map((name) => uids.get(name) ?? -1), ...(primary.get(gid) ?? [])];
  return members.every((member) => member === uid || member === 0);
}

function userName(uid: number): string {
  const name = readAccounts().names.get(uid);
  return name ? `, ${name}` : '';
}

function groupName(gid: number): string {
  const name = readAccounts().groups.get(gid)?.name;
  return name ? `, ${name}` : '';
}
