// The last access token of a profile, kept where the profile's secrets live (the keychain or the encrypted
// file, never the plaintext state) so that `syncauth token`, `refresh` and the daemon in other processes reuse
// one renewal instead of each making their own. The read-only `env` store keeps none.
//
// A renewal writes the entry alone and a reader reads it alone, through the store's writeAccessToken and
// readAccessToken where it has them: the file and keychain stores keep the token in a file of its own (the
// keychain's sealed under a key read once per process), so neither starts a keychain child nor reads the
// secrets per renewal. A store without them (a caller's own) is written with set() and read with get().
//
// The entry names the grant it came from by a digest of the app key and refresh token: after `setup` stores a
// new grant, or with a grant from the environment that differs from the stored one, the entry is ignored
// rather than handing out a token of another grant. The digest lives only inside the secret store.
import { createHash } from 'node:crypto';
import * as z from 'zod';
import type { SecretStore } from '../credentials/types.js';
import type { TokenSet } from '../oauth/index.js';

export interface CachedAccessToken {
  accessToken: string;
  /** Epoch milliseconds, as the renewal reported it (counted from when its request was sent). */
  expiresAt: number;
  /** Epoch milliseconds: when the renewal that produced it finished. */
  renewedAt: number;
}

export interface GrantIdentity {
  appKey: string;
  refreshToken: string;
}

/** The entry's format. The previous release wrote the same fields without it; a later format is not read. */
const TOKEN_CACHE_VERSION = 1;

const EntrySchema = z.strictObject({
  v: z.literal(TOKEN_CACHE_VERSION).optional(),
  accessToken: z.string().min(1),
  expiresAt: z.number().int().positive(),
  renewedAt: z.number().int().positive(),
  grant: z.string().min(1),
});

function grantDigest(grant: GrantIdentity): string {
  return createHash('sha256').update(JSON.stringify([grant.appKey, grant.refreshToken])).digest('base64url');
}

/** The store value for a fresh token; `grant` is the one the token belongs to (after any rotation). */
export function encodeAccessToken(token: CachedAccessToken, grant: GrantIdentity): string {
  return JSON.stringify({ v: TOKEN_CACHE_VERSION, ...token, grant: grantDigest(grant) });
}

/** The cached token, or undefined when there is none, it does not parse, or it belongs to another grant. */
export function decodeAccessToken(value: string | undefined, grant: GrantIdentity): CachedAccessToken | undefined {
  if (!value) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(value);
  } catch {
    return undefined;
  }
  const parsed = EntrySchema.safeParse(data);
  if (!parsed.success || parsed.data.grant !== grantDigest(grant)) return undefined;
  const { accessToken, expiresAt, renewedAt } = parsed.data;
  return { accessToken, expiresAt, renewedAt };
}

/**
 * Milliseconds the token has left, or 0 when the wall clock reads earlier than the renewal: a clock stepped
 * back would otherwise stretch the token's life past what Dropbox gave it.
 */
export function remainingMs(token: CachedAccessToken, now: number): number {
  if (now < token.renewedAt) return 0;
  return Math.max(0, token.expiresAt - now);
}

/**
 * The `onNewAccessToken` hook of renewHoldingLock for a writable store: keeps each fresh
 * token with its expiry under the profile's `access_token` entry. Undefined for the read-only env store.
 */
export function accessTokenKeeper(
  store: SecretStore,
  profile: string,
  appKey: string,
  now: () => number = Date.now,
): ((tokens: TokenSet) => Promise<void>) | undefined {
  if (!store.writable) return undefined;
  return (tokens) => {
    const value = encodeAccessToken(
      { accessToken: tokens.accessToken, expiresAt: tokens.expiresAt, renewedAt: now() },
      { appKey, refreshToken: tokens.refreshToken },
    );
    return store.writeAccessToken ? store.writeAccessToken(profile, value) : store.set(profile, { access_token: value });
  };
}

/** The profile's kept entry as the store holds it (see the head of this file), undefined when there is none. */
export async function readKeptAccessToken(store: SecretStore, profile: string): Promise<string | undefined> {
  return store.readAccessToken ? store.readAccessToken(profile) : (await store.get(profile)).access_token;
}

/**
 * Reads back what `accessTokenKeeper` kept: the profile's last access token, when it belongs to `grant`. A
 * daemon takes it instead of renewing when another process renewed the profile. Undefined for the read-only
 * env store, which keeps none (a daemon there renews its own).
 */
export function accessTokenReader(store: SecretStore, profile: string): ((grant: GrantIdentity) => Promise<CachedAccessToken | undefined>) | undefined {
  if (!store.writable) return undefined;
  return async (grant) => decodeAccessToken(await readKeptAccessToken(store, profile), grant);
}
