// The grant record as the workers use it: read and opened (grant-record.ts) through the coordinator, written
// sealed after a re-authorization. A record that cannot be opened (damaged, another format, sealed under another
// key or for another profile) is refused and logged with the reason, once per record, never with its content;
// the grant in use stays. Reads happen only for profiles that need one (parked for re-authorization, about to be
// parked, starting), so a sweep's Redis work grows with the parked profiles, not with all of them.
import { createHash } from 'node:crypto';
import type { Logger } from '../log.js';
import type { Coordinator } from './coordinator.js';
import { isRefusal, openGrant, sealGrant, type SealedGrant } from './grant-record.js';

type RecordKeeper = Coordinator & Required<Pick<Coordinator, 'readGrantRecord' | 'writeGrantRecord'>>;

export class GrantSharing {
  readonly #coordinator: RecordKeeper;
  readonly #key: Buffer;
  readonly #log: Logger;
  /** The digest of the last record refused per profile: a record refused once is not logged at every sweep. */
  readonly #refused = new Map<string, string>();

  private constructor(coordinator: RecordKeeper, key: Buffer, log: Logger) {
    this.#coordinator = coordinator;
    this.#key = key;
    this.#log = log;
  }

  /** Sharing needs a coordinator that keeps grant records, and the key; otherwise there is none. */
  static of(coordinator: Coordinator | undefined, key: Buffer | undefined, log: Logger): GrantSharing | undefined {
    if (!coordinator || !key || !coordinator.readGrantRecord || !coordinator.writeGrantRecord) return undefined;
    return new GrantSharing(coordinator as RecordKeeper, key, log);
  }

  /** The profile's shared grant, opened; undefined when there is none or it is refused. Throws when the coordinator is unreachable. */
  async read(profile: string): Promise<SealedGrant | undefined> {
    const raw = await this.#coordinator.readGrantRecord(profile);
    if (raw === undefined) return undefined;
    const opened = openGrant(this.#key, profile, raw);
    if (!isRefusal(opened)) {
      this.#refused.delete(profile);
      return opened;
    }
    const digest = createHash('sha256').update(raw).digest('base64url');
    if (this.#refused.get(profile) !== digest) {
      this.#refused.set(profile, digest);
      this.#log.error(
        { profile, event: 'grant.record_refused', op: 'reauth', reason: opened.refused },
        `the grant shared for profile "${profile}" in Redis was refused (${REASONS[opened.refused]}); keeping the grant in use`,
      );
    }
    return undefined;
  }

  /** Seals and writes the grant; false when a record issued later is there already. Throws when the coordinator is unreachable. */
  write(profile: string, grant: SealedGrant): Promise<boolean> {
    return this.#coordinator.writeGrantRecord(profile, sealGrant(this.#key, profile, grant), grant.issuedAt);
  }
}

const REASONS = {
  malformed: 'it is damaged',
  version: 'it was written in a format this release does not read',
  sealed_elsewhere: 'it was sealed under another SYNCAUTH_GRANT_KEY, for another profile, or changed since',
} as const;
