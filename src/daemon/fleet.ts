// A fleet of replicas renews each shared profile once. A profile is shared when this replica publishes its token
// nowhere (no token file, template or socket here): only the connector, and the grant checks, need its token,
// so one replica serves it for the whole fleet. Which one: each replica is a member with a lease in the backend
// (Redis), kept alive by a heartbeat and authenticated under SYNCAUTH_GRANT_KEY; a profile belongs to the live
// member that ranks highest for it (rendezvous hashing), so every replica computes the same owner from the same
// members with no per-profile record, profiles spread evenly, and a member that joins or leaves moves only its
// own share.
//
// Before each renewal of a shared profile the replica reads the members again and checks its own lease against
// the backend's clock: one resumed after SIGSTOP, whose lease ran out while it was stopped, renews nothing until
// it has joined again and computed its share anew. While the backend cannot be reached the replica keeps what it
// owned last, and once that has lasted `fallbackMs` it serves every profile (each renewed by every replica, as
// without a fleet), so that no profile goes without renewal; when the backend answers again it returns to its
// share.
//
// A member is dropped from a replica's view when it said it left; when its lease has ended and the backend has
// answered this replica for half a lease since it was last away (after an outage every lease has ended at once,
// and the first replica back must not take every profile before the others have had the time to heartbeat); or,
// when its record is gone altogether (Redis restarted and lost its keys, or someone deleted it), once this
// replica has watched the backend for a whole lease without seeing it live.
//
// What a writer of Redis without the key can do: delete member records (then more than one replica may serve a
// profile for a while: more token requests, never fewer), or replay an old one (its lease has run out). A forged
// member, to which profiles would be assigned and never renewed, is refused: its record does not verify.
import { createHash } from 'node:crypto';
import type { Logger } from '../log.js';
import { classifyFailure } from './classify.js';

/** Membership as the backend keeps it: leases on its own clock, records it has verified. */
export interface FleetBackend {
  /** Records `replica` live for `ttlMs` from now on the backend's clock; returns the backend's time (ms) read before the write. */
  heartbeat(replica: string, ttlMs: number): Promise<number>;
  /**
   * The backend's time (ms), and from the records that verify: the members whose lease runs past it, those that
   * said they left, and those whose lease has ended.
   */
  members(): Promise<FleetMembers>;
  /** Ends the replica's lease at once, so that the others take its profiles at their next look. */
  leave(replica: string): Promise<void>;
}

export interface FleetMembers {
  now: number;
  live: string[];
  left?: string[];
  ended?: string[];
}

export interface FleetOptions {
  backend: FleetBackend;
  replicaId: string;
  /** Lifetime of a member's lease; the heartbeat renews it every third of it. Default 30 s. */
  leaseMs?: number;
  /** How long the backend may be unreachable before this replica serves every profile. Default 5 min. */
  fallbackMs?: number;
  /** A monotonic clock for the outage's length. Default performance.now. */
  mono?: () => number;
  log?: Logger;
  /** Called when this replica's share may have changed (members joined or left, the backend went or came back). */
  onChange?: () => void;
  /** Run the heartbeat on a timer. Default true; a test or the soak calls `tick()` itself. */
  timers?: boolean;
}

/** How this replica decides what it serves now. */
export type FleetMode = 'shares' | 'last_owned' | 'all';

export const DEFAULT_FLEET_LEASE_MS = 30_000;
/**
 * The fleet's token requests a second when nothing says: the project's own choice, not Dropbox's (Dropbox
 * publishes no number; its limits are per linked user, which the account pauses answer). Ten a second renews
 * 10,000 profiles in under 17 minutes after a cold start or an outage, against an average of under one a second
 * for 10,000 four-hour tokens.
 */
export const DEFAULT_FLEET_TOKEN_REQUESTS_PER_SECOND = 10;
export const DEFAULT_FLEET_FALLBACK_MS = 5 * 60_000;

/** The member that ranks highest for `profile` (rendezvous hashing); undefined when there are none. */
export function ownerOf(profile: string, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1n;
  for (const member of members) {
    const score = rank(member, profile);
    if (score > bestScore || (score === bestScore && best !== undefined && member < best)) {
      best = member;
      bestScore = score;
    }
  }
  return best;
}

function rank(member: string, profile: string): bigint {
  return createHash('sha256').update(member).update('\0').update(profile).digest().readBigUInt64BE(0);
}

export class Fleet {
  readonly replicaId: string;
  readonly leaseMs: number;
  readonly fallbackMs: number;
  readonly #backend: FleetBackend;
  readonly #mono: () => number;
  readonly #log: Logger | undefined;
  readonly #onChange: (() => void) | undefined;
  /** The live members last read (this replica always among them), sorted. */
  #members: readonly string[];
  /** The backend's time of this replica's last heartbeat: its lease runs to this plus leaseMs. */
  #heartbeatAt: number | undefined;
  /** Since when (mono) the backend has not answered; undefined while it does. */
  #downSince: number | undefined;
  /** The members of the last view computed while the backend answered: what this replica owned last. */
  #lastOwnedMembers: readonly string[];
  /** When (mono) each member of the view was last seen live. */
  readonly #lastLive = new Map<string, number>();
  /** Since when (mono) the backend has answered without a break. */
  #upSince: number;
  /** Counts the changes of the members seen. */
  #changes = 0;
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<void> | undefined;
  #closed = false;

  constructor(options: FleetOptions) {
    this.replicaId = options.replicaId;
    this.leaseMs = options.leaseMs ?? DEFAULT_FLEET_LEASE_MS;
    this.fallbackMs = options.fallbackMs ?? DEFAULT_FLEET_FALLBACK_MS;
    this.#backend = options.backend;
    this.#mono = options.mono ?? (() => performance.now());
    this.#log = options.log?.child({ component: 'fleet', replica: options.replicaId });
    this.#onChange = options.onChange;
    this.#members = [this.replicaId];
    this.#lastOwnedMembers = this.#members;
    this.#upSince = this.#mono();
    if (options.timers !== false) {
      this.#timer = setInterval(() => void this.tick(), this.heartbeatMs);
      this.#timer.unref();
    }
  }

  /**
   * Joins: the first heartbeat and look at the members, then (with timers) one heartbeat's wait and another look,
   * so that replicas started together see each other before any computes its share: otherwise the first to join
   * would renew every profile and the others their shares again. A backend that does not answer starts the
   * outage's clock.
   */
  async start(): Promise<void> {
    await this.tick();
    if (!this.#timer || this.#closed) return;
    await new Promise((resolve) => setTimeout(resolve, this.heartbeatMs));
    await this.tick();
  }

  /** How often the heartbeat runs: a third of the lease. */
  get heartbeatMs(): number {
    return Math.max(50, Math.floor(this.leaseMs / 3));
  }

  /** One heartbeat and one look at the members; at most one runs at a time. */
  tick(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#ticking ??= this.#tick().finally(() => (this.#ticking = undefined));
    return this.#ticking;
  }

  get mode(): FleetMode {
    if (this.#downSince === undefined) return 'shares';
    return this.#mono() - this.#downSince >= this.fallbackMs ? 'all' : 'last_owned';
  }

  /** Changes whenever what `owns` answers may have changed (the members, or the mode): shares are computed again only then. */
  get generation(): string {
    return `${this.#changes}:${this.mode}`;
  }

  /** The live members as last seen (this replica among them). */
  get members(): readonly string[] {
    return this.#members;
  }

  /** Whether this replica serves the shared profile now: its share, what it owned last while the backend is away, or everything after the bound. */
  owns(profile: string): boolean {
    switch (this.mode) {
      case 'all':
        return true;
      case 'last_owned':
        return ownerOf(profile, this.#lastOwnedMembers) === this.replicaId;
      default:
        return ownerOf(profile, this.#members) === this.replicaId;
    }
  }

  /**
   * Whether the profile is served here only because Redis has been away past the bound (mode `all`): by the
   * members last seen, another replica owns it.
   */
  servesForFallback(profile: string): boolean {
    return this.mode === 'all' && ownerOf(profile, this.#lastOwnedMembers) !== this.replicaId;
  }

  /**
   * Just before a renewal of a shared profile: whether this replica still owns it, read from the backend now.
   * Its own lease is judged on the backend's clock: a replica whose lease ran out (it was stopped, or its
   * heartbeats failed) joins again and renews nothing this time. When the backend cannot be reached, the
   * fallback rule answers.
   */
  async confirm(profile: string): Promise<boolean> {
    if (this.#closed) return false;
    let view: FleetMembers;
    try {
      view = await this.#backend.members();
    } catch (error) {
      this.#down(error);
      return this.owns(profile);
    }
    this.#up();
    if (this.#heartbeatAt === undefined || view.now >= this.#heartbeatAt + this.leaseMs) {
      this.#log?.warn(
        { event: 'fleet.lease_lapsed', op: 'renew', profile },
        `this replica's fleet lease ran out (the process was stopped, or could not reach Redis in time): not renewing profile "${profile}" until it has joined again`,
      );
      this.#heartbeatAt = undefined;
      void this.tick();
      return false;
    }
    this.#see(view);
    return ownerOf(profile, this.#members) === this.replicaId;
  }

  /** Leaves the fleet (its profiles go to the others at their next look) and stops the heartbeat. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    await this.#ticking?.catch(() => undefined);
    await this.#backend.leave(this.replicaId).catch(() => undefined);
  }

  async #tick(): Promise<void> {
    try {
      const at = await this.#backend.heartbeat(this.replicaId, this.leaseMs);
      const view = await this.#backend.members();
      this.#heartbeatAt = at;
      this.#up();
      this.#see(view);
    } catch (error) {
      this.#down(error);
    }
  }

  #see({ live, left = [], ended = [] }: FleetMembers): void {
    const now = this.#mono();
    for (const member of live) this.#lastLive.set(member, now);
    const gone = new Set(left);
    const settled = now - this.#upSince >= this.leaseMs / 2;
    if (settled) for (const member of ended) gone.add(member);
    const recorded = new Set([...live, ...left, ...ended]);
    const watched = (member: string): number => now - Math.max(this.#lastLive.get(member) ?? -Infinity, this.#upSince);
    const kept = this.#members.filter((member) => !gone.has(member) && (recorded.has(member) || watched(member) < this.leaseMs));
    const members = [...new Set([...live, ...kept, this.replicaId])].sort();
    for (const member of this.#lastLive.keys()) if (!members.includes(member)) this.#lastLive.delete(member);
    const changed = members.length !== this.#members.length || members.some((m, i) => m !== this.#members[i]);
    this.#members = members;
    this.#lastOwnedMembers = members;
    if (!changed) return;
    this.#changes += 1;
    this.#log?.info({ event: 'fleet.members', op: 'coordinate', members: members.length }, `the fleet has ${members.length} live replica${members.length === 1 ? '' : 's'}; this one serves its share of the shared profiles`);
    this.#onChange?.();
  }

  #down(error: unknown): void {
    if (this.#downSince !== undefined) {
      if (this.mode === 'all' && !this.#allLogged) {
        this.#allLogged = true;
        this.#log?.warn(
          { event: 'fleet.fallback_all', op: 'coordinate' },
          `Redis has been unreachable for ${Math.round(this.fallbackMs / 1000)} s: this replica now renews every shared profile (as every replica does), until it is back`,
        );
        this.#onChange?.();
      }
      return;
    }
    this.#downSince = this.#mono();
    this.#allLogged = false;
    this.#log?.warn(
      { event: 'fleet.down', op: 'coordinate', errorCode: 'COORDINATOR_UNAVAILABLE', error: classifyFailure(error).message },
      `Redis is unreachable: this replica keeps renewing the shared profiles it owned, and renews every one if it stays away for ${Math.round(this.fallbackMs / 1000)} s`,
    );
  }

  #allLogged = false;

  #up(): void {
    if (this.#downSince === undefined) return;
    const wasAll = this.mode === 'all';
    this.#downSince = undefined;
    this.#upSince = this.#mono();
    this.#log?.info({ event: 'fleet.up', op: 'coordinate' }, 'Redis is reachable again: this replica returns to its share of the shared profiles');
    if (wasAll) this.#onChange?.();
  }
}
