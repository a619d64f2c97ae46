// A profile's renewal record, `profiles/<name>.renewed`: when its access token was last renewed and when that
// token expires. Only the holder of the profile's renewal lock writes it, so it needs no write lock of its own;
// the state file (`<name>.json`, read-modify-written under its write lock by everything else) is left alone by
// a renewal that has nothing else to change.
//
// The record is one fixed-size line (RECORD_SIZE bytes, padded with spaces) overwritten in place at offset 0,
// with a CRC-32 of its JSON: a write is one call that never changes the file's size, so a process killed at any
// moment leaves the old record or the new one, and a reader that meets a write half-copied (readers take no
// lock) sees a check that fails and reads again. It is written without a flush, as the README's durability rule
// allows for what the next renewal learns again: after a machine crash it may be old, zeroed or torn, all of
// which read as an older renewal or none, and a profile whose expiry is not known is renewed at the next sweep.
// An in-place write costs an open, a write and a close; an atomic replacement (a new file, and a rename that
// ext4 makes flush the new file's data while it holds the directory's lock) cost several times the HTTP
// renewal it records.
//
// The state file keeps the fields the record overlays (`accessTokenExpiresAt`, `lastRenewalAt`), as earlier
// releases wrote them and as `setup` and `profile rotate` still do: of the two, the later `lastRenewalAt` wins.
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { assertConfigDirStill, fileTrusted } from '../config-dir.js';
import type { FileIdentity } from './files.js';

/** The record's format; a record of another version is not read (the state file's fields are used instead). */
export const RENEWAL_RECORD_VERSION = 1;
/** Bytes of every record: one disk sector, so that a write reaches the disk whole or not at all. */
export const RENEWAL_RECORD_SIZE = 256;

export interface RenewalRecord {
  /** When the access token renewed expires, epoch ms. */
  accessTokenExpiresAt: number;
  /** When the renewal finished, epoch ms. */
  lastRenewalAt: number;
}

/** The record's bytes for `profile`. */
export function encodeRenewalRecord(profile: string, record: RenewalRecord): Buffer {
  const json = JSON.stringify({
    version: RENEWAL_RECORD_VERSION,
    profile,
    accessTokenExpiresAt: new Date(record.accessTokenExpiresAt).toISOString(),
    lastRenewalAt: new Date(record.lastRenewalAt).toISOString(),
  });
  const line = `${json} crc32=${checksum(json)}`;
  if (Buffer.byteLength(line) > RENEWAL_RECORD_SIZE - 1) throw new RangeError(`the renewal record of profile "${profile}" does not fit ${RENEWAL_RECORD_SIZE} bytes`);
  return Buffer.from(`${line.padEnd(RENEWAL_RECORD_SIZE - 1, ' ')}\n`, 'utf8');
}

/**
 * The record in `bytes`, or undefined when they hold none that is whole and this format's, for `profile`:
 * empty, zeroed, torn, of another version or another profile.
 */
export function decodeRenewalRecord(profile: string, bytes: Buffer): RenewalRecord | undefined {
  const match = /^(\{[^\n]*\}) crc32=([0-9a-f]{8}) *\n?$/.exec(bytes.toString('utf8'));
  if (!match || checksum(match[1] as string) !== match[2]) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(match[1] as string);
  } catch {
    return undefined;
  }
  if (typeof data !== 'object' || data === null) return undefined;
  const { version, profile: named, accessTokenExpiresAt, lastRenewalAt } = data as Record<string, unknown>;
  if (version !== RENEWAL_RECORD_VERSION || named !== profile) return undefined;
  const expires = isoTime(accessTokenExpiresAt);
  const renewed = isoTime(lastRenewalAt);
  return expires === undefined || renewed === undefined ? undefined : { accessTokenExpiresAt: expires, lastRenewalAt: renewed };
}

function isoTime(value: unknown): number | undefined {
  if (typeof value !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(value)) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

function checksum(text: string): string {
  return crc32(text).toString(16).padStart(8, '0');
}

/**
 * Overwrites the record in place (created 0600 if absent; a symbolic link at its name is refused, not
 * followed). Returns the file's identity after the write. The caller holds the profile's renewal lock.
 */
export function writeRenewalRecord(file: string, profile: string, record: RenewalRecord): FileIdentity {
  assertConfigDirStill(file);
  const bytes = encodeRenewalRecord(profile, record);
  // O_NONBLOCK: a FIFO left at the name fails the open instead of holding it until a reader comes.
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
  try {
    const opened = fstatSync(fd);
    if (!opened.isFile() || (process.geteuid !== undefined && opened.uid !== process.geteuid())) {
      throw Object.assign(new Error(`${file} is not a regular file of this user`), { code: 'EEXIST', path: file });
    }
    for (let written = 0; written < bytes.length; ) written += writeSync(fd, bytes, written, bytes.length - written, written);
    // A longer file (of another format) loses its tail.
    if (opened.size > bytes.length) ftruncateSync(fd, bytes.length);
    const info = fstatSync(fd);
    return { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
  } finally {
    closeSync(fd);
  }
}

/** Tries to read a record whose write was half-copied when first read. */
const READ_ATTEMPTS = 3;

/**
 * The record of `profile` in `file` with the identity it was read at, or undefined when there is no file; a
 * file that holds no whole record of this format reads as `record: undefined` (the renewal is learnt again).
 */
export function readRenewalRecord(file: string, profile: string): { record: RenewalRecord | undefined; identity: FileIdentity } | undefined {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // ELOOP: a symbolic link where the record belongs is not ours to follow.
    if (code === 'ENOENT' || code === 'ELOOP' || code === 'ENXIO') return undefined;
    throw error;
  }
  try {
    const buffer = Buffer.alloc(RENEWAL_RECORD_SIZE + 1);
    for (let attempt = 1; ; attempt += 1) {
      const info = fstatSync(fd);
      const identity = { ino: info.ino, size: info.size, mtimeMs: info.mtimeMs };
      // Anything but a regular file (a FIFO, a device) holds no record and is not read from; nor does a file
      // another user owns or may write (left there while the config dir was open to them): it reads as none, and
      // the profile is renewed at the next sweep.
      if (!info.isFile() || !fileTrusted(info)) return { record: undefined, identity };
      const length = readSync(fd, buffer, 0, buffer.length, 0);
      const record = length === RENEWAL_RECORD_SIZE ? decodeRenewalRecord(profile, buffer.subarray(0, length)) : undefined;
      if (record || attempt === READ_ATTEMPTS) return { record, identity };
    }
  } finally {
    closeSync(fd);
  }
}
