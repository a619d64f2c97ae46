// The sealed grant record replicas share after a re-authorization. A grant that replaces a revoked one is
// stored by the replica that completed the loop in its own store; its siblings, each with a store of its own
// (or the read-only environment), would go on failing with the revoked one. So that replica also writes the
// new grant to the coordinator, sealed with AES-256-GCM under a key every replica holds (SYNCAUTH_GRANT_KEY,
// from the same Secret as the other secrets) and Redis does not: Redis keeps a blob it cannot open. The format
// version, the profile name and the time the grant was issued are in the authenticated data, so a record cannot
// be moved to another profile, replayed as newer, or read by a release that does not know its format.
//
// Only a refresh token and the app's credentials are ever in it, never an access token: this is the one
// exception to "replicas share no secret", and it exists only for the grant that replaced a revoked one.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ValidationError } from '../errors.js';

export const GRANT_RECORD_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** The grant a record carries. */
export interface SealedGrant {
  appKey: string;
  appSecret: string;
  refreshToken: string;
  /** The Dropbox account the grant belongs to. */
  accountId?: string;
  /** When the re-authorization stored it, epoch ms: the newer grant wins. */
  issuedAt: number;
}

/**
 * SYNCAUTH_GRANT_KEY: 32 random bytes, base64 (`openssl rand -base64 32`). Anything else is refused with the
 * variable named, never echoed.
 */
export function parseGrantKey(value: string, field = 'SYNCAUTH_GRANT_KEY'): Buffer {
  const trimmed = value.trim();
  const decoded = /^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) ? Buffer.from(trimmed, 'base64') : Buffer.alloc(0);
  if (decoded.length !== KEY_BYTES) {
    decoded.fill(0);
    throw new ValidationError([
      { field, message: `must be ${KEY_BYTES} random bytes in base64 (e.g. the output of \`openssl rand -base64 32\`), the same on every replica` },
    ]);
  }
  return decoded;
}

function aad(profile: string, issuedAt: number): Buffer {
  return Buffer.from(`syncauth-grant\0v${GRANT_RECORD_VERSION}\0${profile}\0${issuedAt}`, 'utf8');
}

/** The record as stored: JSON, with `issuedAt` in the clear so the store can refuse an older one. */
export function sealGrant(key: Buffer, profile: string, grant: SealedGrant): string {
  if (!Number.isSafeInteger(grant.issuedAt) || grant.issuedAt <= 0) throw new RangeError('issuedAt must be a positive integer');
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad(profile, grant.issuedAt));
  const plaintext = Buffer.from(
    JSON.stringify({ appKey: grant.appKey, appSecret: grant.appSecret, refreshToken: grant.refreshToken, ...(grant.accountId ? { accountId: grant.accountId } : {}) }),
    'utf8',
  );
  const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  plaintext.fill(0);
  return JSON.stringify({
    v: GRANT_RECORD_VERSION,
    issuedAt: grant.issuedAt,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    data: data.toString('base64'),
  });
}

/** Why a record was not opened; none of them says anything about its content. */
export type GrantRecordRefusal = 'malformed' | 'version' | 'sealed_elsewhere';

/**
 * Opens a record of `profile`. A record of another version, a damaged one, one sealed under another key, for
 * another profile or with its time changed is refused, with the reason.
 */
export function openGrant(key: Buffer, profile: string, raw: string): SealedGrant | { refused: GrantRecordRefusal } {
  let record: { v?: unknown; issuedAt?: unknown; iv?: unknown; tag?: unknown; data?: unknown };
  try {
    record = JSON.parse(raw) as typeof record;
  } catch {
    return { refused: 'malformed' };
  }
  if (typeof record !== 'object' || record === null) return { refused: 'malformed' };
  if (record.v !== GRANT_RECORD_VERSION) return { refused: 'version' };
  const { issuedAt, iv, tag, data } = record;
  if (!Number.isSafeInteger(issuedAt) || typeof iv !== 'string' || typeof tag !== 'string' || typeof data !== 'string') return { refused: 'malformed' };
  const ivBytes = Buffer.from(iv, 'base64');
  const tagBytes = Buffer.from(tag, 'base64');
  if (ivBytes.length !== IV_BYTES || tagBytes.length !== TAG_BYTES) return { refused: 'malformed' };
  let plaintext: Buffer;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, ivBytes);
    decipher.setAAD(aad(profile, issuedAt as number));
    decipher.setAuthTag(tagBytes);
    plaintext = Buffer.concat([decipher.update(Buffer.from(data, 'base64')), decipher.final()]);
  } catch {
    // GCM cannot tell another key from another profile or a changed record: each fails the tag.
    return { refused: 'sealed_elsewhere' };
  }
  try {
    const grant = JSON.parse(plaintext.toString('utf8')) as Partial<SealedGrant>;
    if (typeof grant.appKey !== 'string' || typeof grant.appSecret !== 'string' || typeof grant.refreshToken !== 'string') return { refused: 'malformed' };
    if (!grant.appKey || !grant.appSecret || !grant.refreshToken) return { refused: 'malformed' };
    return {
      appKey: grant.appKey,
      appSecret: grant.appSecret,
      refreshToken: grant.refreshToken,
      ...(typeof grant.accountId === 'string' && grant.accountId ? { accountId: grant.accountId } : {}),
      issuedAt: issuedAt as number,
    };
  } catch {
    return { refused: 'malformed' };
  } finally {
    plaintext.fill(0);
  }
}

export function isRefusal(opened: SealedGrant | { refused: GrantRecordRefusal }): opened is { refused: GrantRecordRefusal } {
  return 'refused' in opened;
}

/** The `issuedAt` of a stored record, read without opening it (for the store's never-older rule). */
export function recordIssuedAt(raw: string): number | undefined {
  try {
    const { issuedAt } = JSON.parse(raw) as { issuedAt?: unknown };
    return Number.isSafeInteger(issuedAt) ? (issuedAt as number) : undefined;
  } catch {
    return undefined;
  }
}
