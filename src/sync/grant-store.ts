// Where one profile's grant is kept, as the daemon uses it: read the grant (again, when another process may
// have stored a new one), keep a refresh token Dropbox rotated, store a whole new grant with its account
// (re-authorization), keep and read back the access token other processes reuse, and record the account.
//
// Three kinds: the profile's secret store with its state file (what setup wrote; `storedGrants`), the
// environment's grant, which nothing here may write (`environmentGrants`), and a caller's own six functions on
// the daemon's public profile (`grantStoreFromFunctions`). A store that cannot keep something says so by a
// property (`writable`, `rereads`, `recordsAccount`); what it cannot write it refuses with a
// GrantStoreReadOnlyError, so no caller mistakes a grant held in memory for one kept.
import { SyncauthError } from '../errors.js';
import type { SecretStore } from '../credentials/types.js';
import type { TokenSet } from '../oauth/index.js';
import { newSecretsVersion, type ProfileStore } from '../profile/index.js';
import type { Grant } from './profile-session.js';
import { baseState, stateWithNewGrant } from './renew.js';
import { accessTokenKeeper, accessTokenReader, type CachedAccessToken } from './token-cache.js';

export interface GrantStore {
  /**
   * Whether a new grant is stored here (`storeGrant`). False for the environment and the read-only env store,
   * whose grant a re-authorization can only hold in memory (or hand to the operator's command).
   */
  readonly writable: boolean;
  /**
   * Whether the grant may change while the process runs (another process stores a new one), so that
   * `readGrant` reads it again. False for the environment's, read once at start.
   */
  readonly rereads: boolean;
  /** Whether `recordAccount` records anything: without it the daemon does not ask Dropbox for the account. */
  readonly recordsAccount: boolean;
  /** The grant as kept now. */
  readGrant(): Promise<Grant>;
  /** Keeps a refresh token Dropbox rotated, before it is used; refused (GrantStoreReadOnlyError) when read-only. */
  keepRefreshToken(refreshToken: string): Promise<void>;
  /**
   * Stores a whole new grant (re-authorization) with the account that gave it; the old grant's access token and
   * expiry are forgotten and other processes told. Refused (GrantStoreReadOnlyError) when not `writable`.
   */
  storeGrant(grant: Grant, accountId: string | undefined): Promise<void>;
  /** Keeps a fresh access token of `grant` for other processes; a store that keeps none does nothing. */
  keepAccessToken(tokens: TokenSet, grant: Grant): Promise<void>;
  /** The access token kept for `grant` (by this or another process); undefined when none is, or none is kept here. */
  readAccessToken(grant: Grant): Promise<CachedAccessToken | undefined>;
  /** Records the grant's Dropbox account in the profile's state, when none is recorded yet. */
  recordAccount(accountId: string): Promise<void>;
}

/** What a read-only store says when asked to write. */
export class GrantStoreReadOnlyError extends SyncauthError {
  constructor(profile: string, what: string) {
    super('GRANT_STORE_READ_ONLY', `the grant of profile "${profile}" is read-only here: ${what} cannot be kept`, { kind: 'configuration' });
  }
}

export function isGrantStoreReadOnly(error: unknown): error is GrantStoreReadOnlyError {
  return error instanceof GrantStoreReadOnlyError;
}

/** Records the Dropbox account in the profile's state when none is recorded. */
async function recordAccountIn(profiles: ProfileStore, name: string, accountId: string): Promise<void> {
  await profiles.update(name, (current) => (current && !current.accountId ? { ...baseState(current), accountId } : current));
}

/**
 * A profile kept where setup put it: its secrets in the secret store, its state in the profile store. Both
 * stores may be shared by every profile of a load; this keeps only them, the name, and how to read the grant
 * again.
 */
class StoredGrants implements GrantStore {
  readonly #name: string;
  readonly #secrets: SecretStore;
  readonly #profiles: ProfileStore;
  readonly #reread: (name: string) => Promise<Grant>;

  constructor(name: string, secrets: SecretStore, profiles: ProfileStore, reread: (name: string) => Promise<Grant>) {
    this.#name = name;
    this.#secrets = secrets;
    this.#profiles = profiles;
    this.#reread = reread;
  }

  get writable(): boolean {
    return this.#secrets.writable;
  }

  get rereads(): boolean {
    return true;
  }

  get recordsAccount(): boolean {
    return true;
  }

  readGrant(): Promise<Grant> {
    return this.#reread(this.#name);
  }

  async keepRefreshToken(refreshToken: string): Promise<void> {
    if (!this.#secrets.writable) throw new GrantStoreReadOnlyError(this.#name, 'a rotated refresh token');
    await this.#secrets.set(this.#name, { refresh_token: refreshToken });
    // Tells other processes serving this profile that the grant they hold is stale.
    await this.#profiles.update(this.#name, (current) => (current ? { ...baseState(current), secretsVersion: newSecretsVersion() } : current));
  }

  async storeGrant(grant: Grant, accountId: string | undefined): Promise<void> {
    if (!this.#secrets.writable) throw new GrantStoreReadOnlyError(this.#name, 'a new grant');
    // The whole grant at once, the old grant's kept access token cleared with it.
    await this.#secrets.set(this.#name, { app_key: grant.appKey, app_secret: grant.appSecret, refresh_token: grant.refreshToken, access_token: '' });
    await this.#profiles.update(this.#name, (current) => (current ? stateWithNewGrant(current, accountId) : current));
  }

  async keepAccessToken(tokens: TokenSet, grant: Grant): Promise<void> {
    await accessTokenKeeper(this.#secrets, this.#name, grant.appKey)?.(tokens);
  }

  async readAccessToken(grant: Grant): Promise<CachedAccessToken | undefined> {
    return accessTokenReader(this.#secrets, this.#name)?.(grant);
  }

  recordAccount(accountId: string): Promise<void> {
    return recordAccountIn(this.#profiles, this.#name, accountId);
  }
}

/** The grant of a stored profile: `secrets` and `profiles` may be shared by many; `reread` reads a profile's grant anew. */
export function storedGrants(name: string, secrets: SecretStore, profiles: ProfileStore, reread: (name: string) => Promise<Grant>): GrantStore {
  return new StoredGrants(name, secrets, profiles, reread);
}

/** The environment's grant: read once, never written; only the account is recorded, in the profile's state. */
class EnvironmentGrants implements GrantStore {
  readonly #name: string;
  readonly #grant: Grant;
  readonly #profiles: ProfileStore;

  constructor(name: string, grant: Grant, profiles: ProfileStore) {
    this.#name = name;
    this.#grant = grant;
    this.#profiles = profiles;
  }

  get writable(): boolean {
    return false;
  }

  get rereads(): boolean {
    return false;
  }

  get recordsAccount(): boolean {
    return true;
  }

  readGrant(): Promise<Grant> {
    return Promise.resolve(this.#grant);
  }

  keepRefreshToken(): Promise<void> {
    return Promise.reject(new GrantStoreReadOnlyError(this.#name, 'a rotated refresh token'));
  }

  storeGrant(): Promise<void> {
    return Promise.reject(new GrantStoreReadOnlyError(this.#name, 'a new grant'));
  }

  keepAccessToken(): Promise<void> {
    return Promise.resolve();
  }

  readAccessToken(): Promise<CachedAccessToken | undefined> {
    return Promise.resolve(undefined);
  }

  recordAccount(accountId: string): Promise<void> {
    return recordAccountIn(this.#profiles, this.#name, accountId);
  }
}

export function environmentGrants(name: string, grant: Grant, profiles: ProfileStore): GrantStore {
  return new EnvironmentGrants(name, grant, profiles);
}

/** The six optional functions a library caller may give on a profile instead of a GrantStore. */
export interface GrantFunctions {
  name: string;
  grant: Grant;
  readGrant?: () => Promise<Grant>;
  storeGrant?: (grant: Grant, accountId: string | undefined) => Promise<void>;
  recordAccount?: (accountId: string) => Promise<void>;
  storeRefreshToken?: (refreshToken: string) => Promise<void>;
  storeAccessToken?: (tokens: TokenSet, grant: Grant) => Promise<void>;
  readAccessToken?: (grant: Grant) => Promise<CachedAccessToken | undefined>;
}

/**
 * A GrantStore answered by a profile's own functions: an absent function is what the store cannot do (absent
 * storeGrant: not `writable`; absent readGrant: the grant never changes; absent recordAccount: no account is
 * recorded), each as the daemon treated it before the store existed.
 */
export function grantStoreFromFunctions(profile: GrantFunctions): GrantStore {
  const { name, grant } = profile;
  return {
    writable: profile.storeGrant !== undefined,
    rereads: profile.readGrant !== undefined,
    recordsAccount: profile.recordAccount !== undefined,
    readGrant: () => (profile.readGrant ? profile.readGrant() : Promise.resolve(grant)),
    keepRefreshToken: (refreshToken) => (profile.storeRefreshToken ? profile.storeRefreshToken(refreshToken) : Promise.reject(new GrantStoreReadOnlyError(name, 'a rotated refresh token'))),
    storeGrant: (fresh, accountId) => (profile.storeGrant ? profile.storeGrant(fresh, accountId) : Promise.reject(new GrantStoreReadOnlyError(name, 'a new grant'))),
    keepAccessToken: async (tokens, held) => {
      await profile.storeAccessToken?.(tokens, held);
    },
    readAccessToken: async (held) => profile.readAccessToken?.(held),
    recordAccount: async (accountId) => {
      await profile.recordAccount?.(accountId);
    },
  };
}
