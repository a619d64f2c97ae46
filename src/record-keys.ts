// Keys for records kept where others may write them (Redis, the outbox), derived from a secret the process holds
// and the store does not: SYNCAUTH_GRANT_KEY for Redis, SYNCAUTH_NOTIFY_SECRET's key for the file outbox. Each use
// has a subkey of its own (HKDF-SHA256 with a purpose label), so a MAC or a ciphertext made for one use never
// passes for another, and none is the grant record's key itself. A record is authenticated together with the
// name it is stored under (a Redis key, a hash field): a valid record copied to another key fails like a forged
// one.
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** What each subkey is for; a label never changes for a format, and a new use takes a new label. */
export type KeyPurpose = 'reauth-records' | 'outbox-redis' | 'outbox-file' | 'check-records' | 'fleet-records' | 'pause-records' | 'budget-records';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A 32-byte subkey of `secret` for `purpose`. */
export function subkey(secret: Buffer, purpose: KeyPurpose): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `syncauth ${purpose} v1`, 32));
}

/** The MAC of `fields` (a JSON object without `mac`) as stored under `name`. */
export function recordMac(key: Buffer, name: string, fields: Record<string, unknown>): string {
  return createHmac('sha256', key).update(`${name}\0${JSON.stringify(fields)}`, 'utf8').digest('base64url');
}

/** `fields` with their MAC, as JSON, for storing under `name`. */
export function signRecord(key: Buffer, name: string, fields: Record<string, unknown>): string {
  return JSON.stringify({ ...fields, mac: recordMac(key, name, fields) });
}

export type RecordRefusal = 'malformed' | 'version' | 'mac';

/**
 * The fields of a record stored under `name`, when it is JSON of version `version` and its MAC verifies; the
 * reason otherwise. The MAC is checked before anything in the record is believed.
 */
export function openRecord(key: Buffer, name: string, raw: string, version: number): { fields: Record<string, unknown> } | { refused: RecordRefusal } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return { refused: 'malformed' };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { refused: 'malformed' };
  const { mac, ...fields } = parsed as Record<string, unknown>;
  if (fields.v !== version) return { refused: 'version' };
  if (typeof mac !== 'string') return { refused: 'mac' };
  const given = Buffer.from(mac, 'base64url');
  const wanted = Buffer.from(recordMac(key, name, fields), 'base64url');
  if (given.length !== wanted.length || !timingSafeEqual(given, wanted)) return { refused: 'mac' };
  return { fields };
}

export interface Sealed {
  iv: string;
  tag: string;
  data: string;
}

/** `value` as JSON, sealed (AES-256-GCM) under `key`, bound to `aad`. */
export function sealJson(key: Buffer, aad: string, value: unknown): Sealed {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const plaintext = Buffer.from(JSON.stringify(value), 'utf8');
  try {
    const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
  } finally {
    plaintext.fill(0);
  }
}

/** The value sealed by sealJson under `key` and `aad`, or undefined when it does not open (another key, another name, changed). */
export function openJson(key: Buffer, aad: string, sealed: unknown): unknown {
  if (typeof sealed !== 'object' || sealed === null) return undefined;
  const { iv, tag, data } = sealed as Partial<Record<keyof Sealed, unknown>>;
  if (typeof iv !== 'string' || typeof tag !== 'string' || typeof data !== 'string') return undefined;
  const ivBytes = Buffer.from(iv, 'base64');
  const tagBytes = Buffer.from(tag, 'base64');
  if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) return undefined;
  let plaintext: Buffer | undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, ivBytes);
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(tagBytes);
    plaintext = Buffer.concat([decipher.update(Buffer.from(data, 'base64')), decipher.final()]);
    return JSON.parse(plaintext.toString('utf8')) as unknown;
  } catch {
    return undefined;
  } finally {
    plaintext?.fill(0);
  }
}

/**
 * The records a store has refused, remembered so that each is logged once, not at every read: by a digest of
 * its name and content, at most `limit` of them (past that the memory starts over, so a writer planting
 * records without end costs a log line each, never memory).
 */
export class RefusedOnce {
  readonly #seen = new Set<string>();

  constructor(private readonly limit = 1_000) {}

  /** True the first time the record `raw` stored under `name` is refused. */
  first(name: string, raw: string): boolean {
    const digest = createHash('sha256').update(`${name}\0${raw}`, 'utf8').digest('base64url');
    if (this.#seen.has(digest)) return false;
    if (this.#seen.size >= this.limit) this.#seen.clear();
    this.#seen.add(digest);
    return true;
  }
}
