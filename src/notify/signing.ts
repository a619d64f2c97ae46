// Standard Webhooks (https://www.standardwebhooks.com): each delivery carries `webhook-id`, `webhook-timestamp`
// (seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the bytes after
// `whsec_` of the shared secret, so a receiver checks it with any existing verifier. Each attempt is signed
// anew with its own timestamp; the id and the body stay the same, which is what receivers deduplicate on.
import { createHash, createHmac } from 'node:crypto';
import { ValidationError } from '../errors.js';

export const SECRET_VARIABLE = 'SYNCAUTH_NOTIFY_SECRET';
const PREFIX = 'whsec_';
/** Below this the HMAC key is guessable; the reference libraries generate 24 bytes or more. */
export const MIN_KEY_BYTES = 16;

/** The HMAC key of a `whsec_…` secret; a clear error naming `field`, never quoting the value, otherwise. */
export function parseNotifySecret(raw: string, field = SECRET_VARIABLE): Buffer {
  const value = raw.trim();
  if (!value.startsWith(PREFIX)) throw new ValidationError([{ field, message: 'must start with whsec_ followed by the base64 of the key (e.g. whsec_ and 32 random bytes in base64)' }]);
  const encoded = value.slice(PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new ValidationError([{ field, message: 'the part after whsec_ must be base64' }]);
  const key = Buffer.from(encoded, 'base64');
  if (key.length < MIN_KEY_BYTES) throw new ValidationError([{ field, message: `the key after whsec_ must decode to at least ${MIN_KEY_BYTES} bytes` }]);
  return key;
}

/** `v1,<base64>` over `id.timestamp.body`. */
export function signature(key: Buffer, id: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/** The three headers of one attempt; without a key (an unsigned Slack target), only id and timestamp. */
export function webhookHeaders(key: Buffer | undefined, id: string, nowMs: number, body: string): Record<string, string> {
  const timestamp = Math.floor(nowMs / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    ...(key ? { 'webhook-signature': signature(key, id, timestamp, body) } : {}),
  };
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

function base32(bytes: Buffer): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/**
 * The id of a notice: the same for every replica (and every restart) that sees the same transition of the same
 * profile, and different for anything else, a reminder included (its ask number is part of the transition).
 */
export function noticeId(profile: string, type: string, transition: string): string {
  const digest = createHash('sha256').update(JSON.stringify([profile, type, transition])).digest();
  return `msg_${base32(digest.subarray(0, 20))}`;
}

/** A short digest naming a target URL in the outbox, so the outbox never holds the URL (a Slack URL is a secret). */
export function targetKey(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 16);
}
