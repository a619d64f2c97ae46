// The duplicate check of many profiles at once: one listing of a workspace's `dropbox` connectors, read item by
// item as it arrives and kept as a small index (id, name, folder and app key of each), answers for every
// profile of that workspace whether its family holds a connector besides the one it recorded. The daemon keeps
// one for all its profiles, so a sweep over ten thousand profiles of one workspace lists it once, not ten
// thousand times (each listing holding every connector of the workspace).
import { createHash } from 'node:crypto';
import type { ServiceClient, SourceSummary } from '../service/index.js';
import { isConnectorFamily, notOurs, replacedName, type DropboxConnectorSpec } from './reconcile.js';

/** How long one listing answers for its workspace: the duplicate check's schedule. */
export const FAMILY_LISTING_MAX_AGE_MS = 3_600_000;
/** How long a listing that failed is not tried again: the profiles meanwhile update their connector by id alone. */
export const FAMILY_LISTING_RETRY_MS = 60_000;

/** What the index keeps of one connector: what tells a profile's own from another's. */
interface Member {
  id: string;
  name: string;
  remoteUrl: unknown;
  appKey: unknown;
}

/** The connectors of one listing by name, and by base name for the time-stamped replacements. */
class FamilyIndex {
  readonly #byName = new Map<string, Member[]>();

  add(member: Member): void {
    this.#file(member.name, member);
    const base = replacedName(member.name);
    if (base !== undefined) this.#file(base, member);
  }

  #file(key: string, member: Member): void {
    const list = this.#byName.get(key);
    if (list) list.push(member);
    else this.#byName.set(key, [member]);
  }

  /** Whether the family of `connector` holds a connector of the profile's other than `recordedId`. */
  othersBesides(connector: Pick<DropboxConnectorSpec, 'name' | 'remoteUrl' | 'appKey'>, recordedId: string): boolean {
    const recorded = recordedId.toLowerCase();
    return (this.#byName.get(connector.name) ?? []).some(
      (m) =>
        m.id.toLowerCase() !== recorded &&
        isConnectorFamily(m.name, connector.name) &&
        notOurs({ type: 'dropbox', config: { remote_url: m.remoteUrl, app_key: m.appKey } }, connector) === undefined,
    );
  }
}

interface Listing {
  takenAt: number;
  /** Undefined when the listing failed. */
  index: Promise<FamilyIndex | undefined>;
}

export interface FamilyListingsOptions {
  /** A monotonic clock, in ms. */
  now?: () => number;
  maxAgeMs?: number;
  retryMs?: number;
}

/**
 * The listings of the workspaces a process's profiles reconcile into, each taken when a profile first asks and
 * shared by every profile of the workspace that asks while it is younger than `maxAgeMs` (a failed one, while
 * younger than `retryMs`). A duplicate made after a listing was taken is found by the first reconcile of its
 * profile after the next listing, as one made while no process ran is found by the first reconcile after.
 */
export class FamilyListings {
  readonly #listings = new Map<string, Listing>();
  readonly #now: () => number;
  readonly #maxAgeMs: number;
  readonly #retryMs: number;

  constructor(options: FamilyListingsOptions = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#maxAgeMs = options.maxAgeMs ?? FAMILY_LISTING_MAX_AGE_MS;
    this.#retryMs = options.retryMs ?? FAMILY_LISTING_RETRY_MS;
  }

  /**
   * Whether the workspace `client` reaches holds a connector of the family of `connector` besides `recordedId`,
   * by its shared listing (taken with `client` when there is none young enough); undefined when the listing
   * could not be taken. `workspace` names the service and API key (see `workspaceKey`).
   */
  async othersBesides(workspace: string, client: ServiceClient, connector: DropboxConnectorSpec, recordedId: string): Promise<boolean | undefined> {
    const index = await this.#listing(workspace, client);
    return index?.othersBesides(connector, recordedId);
  }

  #listing(workspace: string, client: ServiceClient): Promise<FamilyIndex | undefined> {
    const now = this.#now();
    for (const [key, listing] of this.#listings) {
      // Listings of workspaces no profile asks about any more do not stay.
      if (now - listing.takenAt > this.#maxAgeMs) this.#listings.delete(key);
    }
    const current = this.#listings.get(workspace);
    if (current) return current.index;
    const listing: Listing = { takenAt: now, index: listFamilies(client) };
    this.#listings.set(workspace, listing);
    void listing.index.then((index) => {
      // A failure is not kept for the whole age: the next profile to ask after a short while lists again.
      if (index === undefined && this.#listings.get(workspace) === listing) listing.takenAt = now - this.#maxAgeMs + this.#retryMs;
    });
    return listing.index;
  }
}

async function listFamilies(client: ServiceClient): Promise<FamilyIndex | undefined> {
  try {
    const members = await client.scanSources({ sourceType: 'dropbox' }, (source: SourceSummary): Member | undefined => {
      if (source.type !== 'dropbox') return undefined;
      const { remote_url: remoteUrl, app_key: appKey } = source.config;
      return { id: source.id, name: source.name, remoteUrl, appKey };
    });
    const index = new FamilyIndex();
    for (const member of members) index.add(member);
    return index;
  } catch {
    // The duplicate check waits for the next listing; the update by id does not wait for it.
    return undefined;
  }
}

/** The key of a workspace: the service's address, the API key's header, and a digest of the API key. */
export function workspaceKey(target: { baseUrl: string; apiKey: string; apiKeyHeader?: string | undefined }): string {
  const digest = createHash('sha256').update(target.apiKey).digest('hex');
  return JSON.stringify([target.baseUrl.replace(/\/+$/, ''), (target.apiKeyHeader ?? '').toLowerCase(), digest]);
}
