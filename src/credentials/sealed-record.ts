// One small file sealed with AES-256-GCM under a key its store holds: the file store's records and cached access
// tokens (under the data key) and the keychain store's cached access tokens (under the cache key kept in the
// keychain). What the ciphertext is bound to travels as associated data (the format, its version, the part and
// the profile's name), so a file changed, or copied to another profile's name, fails the tag like any other
// tampering. The plaintext is JSON, its buffer wiped once sealed or read.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as z from 'zod';

export const IV_BYTES = 12;
export const TAG_BYTES = 16;

export const base64Of = (bytes: number) =>
  z.base64().refine((value) => Buffer.from(value, 'base64').length === bytes, `must be ${bytes} bytes`);

export const CipherSchema = z.strictObject({ name: z.literal('aes-256-gcm'), iv: base64Of(IV_BYTES), tag: base64Of(TAG_BYTES) });
export type Cipher = z.infer<typeof CipherSchema>;

/** What a sealed file says it is: its format's name and version, both checked before anything is decrypted. */
export interface RecordFormat {
  format: string;
  version: number;
}

/** The associated data of one profile's part (`record`, `token`): its bytes must never change for a format. */
export function recordAad(format: RecordFormat, part: string, profile: string): Buffer {
  return Buffer.from(JSON.stringify({ format: format.format, version: format.version, part, profile }), 'utf8');
}

export function encrypt(key: Buffer, aad: Buffer, plaintext: Buffer): { cipher: Cipher; data: Buffer } {
  const iv = randomBytes(IV_BYTES);
  const gcm = createCipheriv('aes-256-gcm', key, iv);
  gcm.setAAD(aad);
  const data = Buffer.concat([gcm.update(plaintext), gcm.final()]);
  return { cipher: { name: 'aes-256-gcm', iv: iv.toString('base64'), tag: gcm.getAuthTag().toString('base64') }, data };
}

/** The plaintext, or undefined when the tag fails: GCM cannot tell a wrong key from a changed file. */
export function decrypt(key: Buffer, cipher: Cipher, data: Buffer, aad: Buffer): Buffer | undefined {
  try {
    const gcm = createDecipheriv('aes-256-gcm', key, Buffer.from(cipher.iv, 'base64'));
    gcm.setAAD(aad);
    gcm.setAuthTag(Buffer.from(cipher.tag, 'base64'));
    return Buffer.concat([gcm.update(data), gcm.final()]);
  } catch {
    return undefined;
  }
}

/** A stored file's JSON and version, or why it cannot be read: not JSON, or written by a newer syncauth. */
export function parseVersioned(
  text: string,
  newest: number,
): { ok: true; data: unknown; version: unknown } | { ok: false; failure: 'not-json' } | { ok: false; failure: 'newer'; version: number } {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return { ok: false, failure: 'not-json' };
  }
  const version = (data as { version?: unknown } | null)?.version;
  if (typeof version === 'number' && version > newest) return { ok: false, failure: 'newer', version };
  return { ok: true, data, version };
}

/** `value` as JSON, sealed under `key`: the text of the file, one line. */
export function sealRecord(format: RecordFormat, key: Buffer, aad: Buffer, value: unknown): string {
  const plaintext = Buffer.from(JSON.stringify(value), 'utf8');
  try {
    const { cipher, data } = encrypt(key, aad, plaintext);
    return `${JSON.stringify({ format: format.format, version: format.version, cipher, data: data.toString('base64') })}\n`;
  } finally {
    plaintext.fill(0);
  }
}

/** Why a sealed file did not open: its JSON, a newer version, its header, the tag (key or content changed), or its plaintext. */
export type UnsealFailure = { failure: 'not-json' | 'header' | 'key' | 'content' } | { failure: 'newer'; version: number };

const schemas = new Map<string, z.ZodType<{ cipher: Cipher; data: string }>>();

function recordSchema(format: RecordFormat): z.ZodType<{ cipher: Cipher; data: string }> {
  const id = `${format.format}\0${format.version}`;
  let schema = schemas.get(id);
  if (!schema) {
    schema = z.strictObject({ format: z.literal(format.format), version: z.literal(format.version), cipher: CipherSchema, data: z.base64() });
    schemas.set(id, schema);
  }
  return schema;
}

/** The JSON value `text` seals under `key` and `aad`, or why it does not open. Nothing of the plaintext is kept. */
export function unsealRecord(format: RecordFormat, text: string, key: Buffer, aad: Buffer): ({ ok: true; value: unknown }) | ({ ok: false } & UnsealFailure) {
  const versioned = parseVersioned(text, format.version);
  if (!versioned.ok) return versioned;
  const parsed = recordSchema(format).safeParse(versioned.data);
  if (!parsed.success) return { ok: false, failure: 'header' };
  const plaintext = decrypt(key, parsed.data.cipher, Buffer.from(parsed.data.data, 'base64'), aad);
  if (!plaintext) return { ok: false, failure: 'key' };
  try {
    return { ok: true, value: JSON.parse(plaintext.toString('utf8')) };
  } catch {
    return { ok: false, failure: 'content' };
  } finally {
    plaintext.fill(0);
  }
}

/**
 * A sealed file's text, or undefined when it does not exist. Synchronous, as the lock's calls are: a read of a
 * few hundred bytes takes microseconds, where four round trips through libuv's thread pool (open, stat, read,
 * close) wait behind every flush to disk queued there by concurrent renewals.
 */
export function readSealedFile(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
