export const SECRET_NAMES = ['app_key', 'app_secret', 'refresh_token', 'api_key'] as const;
export type SecretName = (typeof SECRET_NAMES)[number];

/** A profile's secrets; a name absent from the object is not stored. */
export type ProfileSecrets = Partial<Record<SecretName, string>>;

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
  /** The profile's stored secrets; `{}` for a profile with none. */
  get(profile: string): Promise<ProfileSecrets>;
  /**
   * Merges into the stored secrets: a name whose value is undefined is left as it is, an empty string removes
   * that one secret, any other string replaces it.
   */
  set(profile: string, secrets: ProfileSecrets): Promise<void>;
  /** Removes every secret of the profile; a profile with none is not an error. */
  delete(profile: string): Promise<void>;
  /** Profiles that have at least one stored secret, sorted. */
  listProfiles(): Promise<string[]>;
}

/** Splits a set() request into the values to write and the names to remove. */
export function planMerge(secrets: ProfileSecrets): { write: [SecretName, string][]; remove: SecretName[] } {
  const write: [SecretName, string][] = [];
  const remove: SecretName[] = [];
  for (const name of SECRET_NAMES) {
    const value = secrets[name];
    if (value === undefined) continue;
    if (value === '') remove.push(name);
    else write.push([name, value]);
  }
  return { write, remove };
}
