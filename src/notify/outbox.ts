// The outbox: what is still to be delivered, and the reminders still to be sent, kept where a restart finds
// them. In the config dir by default (one versioned file, 0600, written atomically); in Redis with replicas,
// since a pod's config dir dies with it. Every delivery is keyed by notice id and target, and a key once taken
// is remembered for a week: a replica, or a restart, that sees the same transition again adds nothing.
import type { ProfileNotice } from './notice.js';
import type { NoticePayload } from './payload.js';

/**
 * Version of the outbox's records (the file, and each Redis record). 2: a delivery's payload is sealed and a
 * reminder authenticated (outbox-seal.ts); the file outbox reads version 1 once and writes it sealed, the previous
 * release refuses version 2 and leaves it untouched.
 */
export const OUTBOX_VERSION = 2;
/** The previous release's version: payloads in the clear, nothing authenticated. */
export const PREVIOUS_OUTBOX_VERSION = 1;

/** How long a delivery key is remembered after it was first queued. */
export const SEEN_MS = 7 * 24 * 3600 * 1000;

export interface Delivery {
  /** `<notice id>.<target key>`. */
  key: string;
  /** The notice id (`webhook-id`). */
  id: string;
  /** Digest of the target URL (see targetKey); the URL itself is never stored. */
  target: string;
  payload: NoticePayload;
  /** When it was queued, epoch ms: it is dropped 24 h later if still undelivered. */
  firstAt: number;
  /** Attempts made so far. */
  attempts: number;
  /** No attempt before this time, epoch ms. */
  nextAt: number;
}

/** A profile waiting for re-authorization: the asks sent so far, and what the next ones say. */
export interface Reminder {
  profile: string;
  /** The transition the daemon named (secrets version and error); a different one starts over. */
  transition: string;
  notice: ProfileNotice;
  /** When the profile was parked, epoch ms: the reminders are due 24 h and 72 h after. */
  since: number;
  /** Asks queued so far (0 to 3). */
  asks: number;
}

/** A claim on a delivery while it is sent: with replicas, a lease that expires if its holder dies. */
export interface Claim {
  release(): Promise<void>;
}

export interface OutboxStore {
  /** Where it lives, for logs. */
  readonly where: string;
  /**
   * Adds the deliveries whose keys were never queued (nor delivered) before; returns those added. Throws when
   * the store cannot be reached (the notifier keeps the notice and tries again).
   */
  enqueue(deliveries: Delivery[], now: number): Promise<Delivery[]>;
  /** Deliveries whose time has come. */
  due(now: number): Promise<Delivery[]>;
  /** The delivery as stored now, claimed for sending, or undefined when it is gone or another sender holds it. */
  claim(key: string): Promise<{ delivery: Delivery; claim: Claim } | undefined>;
  /** Delivered, or given up on: it leaves the outbox (its key stays remembered). */
  remove(key: string): Promise<void>;
  /** Another attempt later. */
  reschedule(delivery: Delivery): Promise<void>;
  reminders(): Promise<Reminder[]>;
  /** Starts the reminders of a transition; false when that transition's reminders already exist. */
  startReminder(reminder: Reminder): Promise<boolean>;
  /** Records an ask made, only while the same transition's reminder still exists. */
  advanceReminder(reminder: Reminder): Promise<void>;
  /** The profile was re-authorized: no more reminders. */
  endReminder(profile: string): Promise<void>;
  close(): Promise<void>;
}
