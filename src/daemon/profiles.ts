// The daemon's profiles as the `daemon` command serves them: every stored one (or those requested), each with
// its settings, its grant and the GrantStore that keeps it (src/sync/grant-store.ts), or one made entirely of
// the environment in a container. Loaded a few at a time, at start, on SIGHUP and for --once alike. What a
// command supplies (its settings, how it opens a profile's session, which may ask for a key at a terminal)
// comes in as parameters: nothing here knows the command line.
import type { Settings } from '../config.js';
import { eachBounded } from '../limiter.js';
import type { ProfileStore } from '../profile/index.js';
import type { Schedule } from '../service/models.js';
import { environmentGrants, storedGrants, type GrantStore } from '../sync/grant-store.js';
import { requireGrant, type ProfileSession, type ResolvedSecrets } from '../sync/profile-session.js';
import { defaultConnectorName } from '../sync/reconcile.js';
import type { DaemonGrant, DaemonProfile, ProfileEntry, ReconcileTarget } from './types.js';

/** Profiles whose state and secrets are read at once while loading. */
export const PROFILES_LOADED_AT_ONCE = 16;

/** Opens a profile's session and reads its secrets; `existing` refuses a profile that exists nowhere. */
export type ProfileOpener = (name: string, options?: { existing?: boolean }) => Promise<{ session: ProfileSession; secrets: ResolvedSecrets }>;

export interface ProfileLoading {
  /** The command's settings: the environment's grant and profile, and what its profile serves. */
  values: Settings;
  /** The profiles' state (each store records the account there). */
  store: ProfileStore;
  open: ProfileOpener;
}

export function reconcileTarget(v: Settings, apiKey: string | undefined): ReconcileTarget | undefined {
  if (!v.baseUrl || !v.remoteUrl || !apiKey) return undefined;
  return {
    baseUrl: v.baseUrl,
    apiKey,
    apiKeyHeader: v.apiKeyHeader,
    connectorName: v.connectorName ?? defaultConnectorName(v.remoteUrl),
    remoteUrl: v.remoteUrl,
    recursive: v.recursive,
    ...(v.workflowId ? { workflow: { id: v.workflowId, ...(v.schedule ? { schedule: v.schedule as Schedule } : {}) } } : {}),
  };
}

export function environmentGrant(v: Settings): DaemonGrant | undefined {
  return v.appKey && v.appSecret && v.refreshToken ? { appKey: v.appKey, appSecret: v.appSecret, refreshToken: v.refreshToken } : undefined;
}

/**
 * A loaded profile, served with `grants`. The six functions of the public profile are there too, answered by the
 * store where it can do each, for callers that still read them: as getters of the class, so that ten thousand
 * profiles hold no functions of their own (a closure each, and the wider object they made, cost a third more heap
 * per profile).
 */
class LoadedProfile implements DaemonProfile {
  readonly name: string;
  readonly tokenUrl: string;
  readonly dropboxApiUrl: string | undefined;
  readonly grant: DaemonGrant;
  readonly grants: GrantStore;
  readonly reconcile: ReconcileTarget | undefined;

  constructor(name: string, tokenUrl: string, dropboxApiUrl: string | undefined, grant: DaemonGrant, grants: GrantStore, reconcile: ReconcileTarget | undefined) {
    this.name = name;
    this.tokenUrl = tokenUrl;
    this.dropboxApiUrl = dropboxApiUrl;
    this.grant = grant;
    this.grants = grants;
    this.reconcile = reconcile;
  }

  get readGrant(): DaemonProfile['readGrant'] {
    return this.grants.rereads ? () => this.grants.readGrant() : undefined;
  }

  get storeGrant(): DaemonProfile['storeGrant'] {
    return this.grants.writable ? (grant, accountId) => this.grants.storeGrant(grant, accountId) : undefined;
  }

  get storeRefreshToken(): DaemonProfile['storeRefreshToken'] {
    return this.grants.writable ? (refreshToken) => this.grants.keepRefreshToken(refreshToken) : undefined;
  }

  get storeAccessToken(): DaemonProfile['storeAccessToken'] {
    return this.grants.writable ? (tokens, grant) => this.grants.keepAccessToken(tokens, grant) : undefined;
  }

  get readAccessToken(): DaemonProfile['readAccessToken'] {
    return this.grants.writable ? (grant) => this.grants.readAccessToken(grant) : undefined;
  }

  get recordAccount(): DaemonProfile['recordAccount'] {
    return this.grants.recordsAccount ? (accountId) => this.grants.recordAccount(accountId) : undefined;
  }
}

/**
 * The stores the loaded profiles' GrantStores write through, one per kind for a whole load. Sessions of one
 * command that use the same kind of secret store open the same store (config dir and key come from the
 * command's settings; the kind may differ per profile, as config.json records it): one kept per profile held
 * ten thousand of them.
 */
interface SharedStores {
  secrets: Map<ProfileSession['secrets']['kind'], ProfileSession['secrets']>;
  profiles?: ProfileSession['profiles'];
  /** Reads a profile's grant anew (one function for the load, not one per profile). */
  reread: (name: string) => Promise<DaemonGrant>;
}

async function storedProfile(open: ProfileOpener, name: string, shared: SharedStores): Promise<DaemonProfile> {
  const { session, secrets } = await open(name, { existing: true });
  const grant = requireGrant(session, secrets);
  const reconcile = reconcileTarget(session.values, secrets.apiKey);
  // What the profile keeps of the session: the load's shared stores, not its resolved settings and state, which
  // ten thousand profiles would otherwise hold on the heap for the daemon's life.
  const secretStore = shared.secrets.get(session.secrets.kind) ?? session.secrets;
  shared.secrets.set(secretStore.kind, secretStore);
  const profiles = (shared.profiles ??= session.profiles);
  const grants = storedGrants(name, secretStore, profiles, shared.reread);
  return new LoadedProfile(name, session.values.tokenUrl, session.values.dropboxApiUrl, grant, grants, reconcile);
}

/**
 * Reads a profile's grant anew, made outside the load's scope: a closure made inside it shares that scope's
 * context, the array of every loaded profile among it, and each profile kept by the daemon (through its
 * GrantStore) would hold all the others with it, a fleet replica's let-go profiles and their grants included.
 */
function rereader(open: ProfileOpener): SharedStores['reread'] {
  return async (name) => {
    const { session, secrets } = await open(name);
    return requireGrant(session, secrets);
  };
}

/**
 * Every requested profile (all stored ones when none is requested), in order; one that cannot be loaded is an
 * entry with its error. A profile stored nowhere while the environment holds a grant is the environment's: a
 * container's profile, everything from the environment (and .env), nothing from any store. Settings the
 * environment's profiles share are resolved once per load; a stored profile's are its session's own.
 */
export async function loadDaemonProfiles(loading: ProfileLoading, requested: string[] | undefined): Promise<ProfileEntry[]> {
  const { values: v, store, open } = loading;
  const stored = await store.names();
  const fromEnvironment = environmentGrant(v);
  const envReconcile = fromEnvironment ? reconcileTarget(v, v.apiKey) : undefined;
  const environmentProfile = (name: string, grant: DaemonGrant): DaemonProfile =>
    new LoadedProfile(name, v.tokenUrl, v.dropboxApiUrl, grant, environmentGrants(name, grant, store), envReconcile);
  const names = requested ?? stored;
  if (names.length === 0) return fromEnvironment ? [environmentProfile(v.profile, fromEnvironment)] : [];
  const isStored = new Set(stored);
  // A few at a time: each load reads the profile's state and secrets, and ten thousand of them at once held
  // every read on the heap together.
  const shared: SharedStores = { secrets: new Map(), reread: rereader(open) };
  const entries: ProfileEntry[] = new Array<ProfileEntry>(names.length);
  await eachBounded(names, PROFILES_LOADED_AT_ONCE, async (name, i) => {
    if (!isStored.has(name) && fromEnvironment) {
      entries[i] = environmentProfile(name, fromEnvironment);
      return;
    }
    try {
      entries[i] = await storedProfile(open, name, shared);
    } catch (error) {
      entries[i] = { name, error: error instanceof Error ? error : new Error(String(error)) };
    }
  });
  return entries;
}

/**
 * A loader that answers `first` once (and lets go of it), then calls `load`: the entries read for the start's
 * checks are the ones the daemon starts with, and every later call (a reload) reads the profiles anew.
 */
export function handOver(first: ProfileEntry[], load: () => Promise<ProfileEntry[]>): () => Promise<ProfileEntry[]> {
  let kept: ProfileEntry[] | undefined = first;
  return () => {
    const entries = kept;
    kept = undefined;
    return entries ? Promise.resolve(entries) : load();
  };
}
