/** The secrets a user provides; the `env` store reads exactly these from the environment. */
export const SECRET_NAMES = ['app_key', 'app_secret', 'refresh_token', 'api_key'] as const;
export type SecretName = (typeof SECRET_NAMES)[number];

/**
 * Everything a writable store (keychain, file) keeps per profile: the user's secrets and `access_token`, the
 * last access token with its expiry, which is a secret too and so never goes to the plaintext state file. Its
 * value is opaque to the stores (see sync/token-cache.ts); the read-only `env` store has none.
 */
export const STORED_NAMES = [...SECRET_NAMES, 'access_token'] as const;
export type StoredName = (typeof STORED_NAMES)[number];

/** A profile's secrets; a name absent from the object is not stored. */
export type ProfileSecrets = Partial<Record<SecretName, string>>;

/** What a store holds for a profile: its secrets and, in a writable store, the cached access token. */
export type StoredSecrets = Partial<Record<StoredName, string>>;

export type SecretStoreKind = 'keychain' | 'file' | 'env';

/** The environment variable each secret is read from by the `env` store (SPEC §4). */
export const SECRET_ENV: Readonly<Record<SecretName, string>> = {
  app_key: 'SYNCAUTH_APP_KEY',
  app_secret: 'SYNCAUTH_APP_SECRET',
  refresh_token: 'SYNCAUTH_REFRESH_TOKEN',
  api_key: 'SYNCAUTH_API_KEY',
};

export interface SecretStore {
  readonly kind: SecretStoreKind;
  readonly writable: boolean;
  /** The profile's stored values; `{}` for a profile with none. */
  get(profile: string): Promise<StoredSecrets>;
  /**
   * Merges into the stored secrets: a name whose value is undefined is left as it is, an empty string removes
   * that one secret, any other string replaces it.
   */
  set(profile: string, secrets: StoredSecrets): Promise<void>;
  /** Removes every stored value of the profile, the access token too; a profile with none is not an error. */
  delete(profile: string): Promise<void>;
  /** Profiles that have at least one stored secret, sorted. */
  listProfiles(): Promise<string[]>;
  /**
   * The cached access token alone, as get() would return it in `access_token` (the previous release's keychain
   * entry aside), for a store that keeps it apart from the secrets and can read it without them (file,
   * keychain): the renewal path reads it through this when present, get() otherwise.
   */
  readAccessToken?(profile: string): Promise<string | undefined>;
  /** Stores the cached access token alone, as set(profile, { access_token: value }) does; '' removes it. */
  writeAccessToken?(profile: string, value: string): Promise<void>;
}

/** Splits a set() request into the values to write and the names to remove. */
export function planMerge(secrets: StoredSecrets): { write: [StoredName, string][]; remove: StoredName[] } {
  const write: [StoredName, string][] = [];
  const remove: StoredName[] = [];
  for (const name of STORED_NAMES) {
    const value = secrets[name];
    if (value === undefined) continue;
    if (value === '') remove.push(name);
    else write.push([name, value]);
  }
  return { write, remove };
}
