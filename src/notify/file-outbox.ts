// The outbox of a single daemon: one file in the config dir (`notices.json`, 0600), rewritten atomically after
// each change (write to a private temporary file, flush, rename), so a restart or a kill -9 finds every notice
// that was queued and not yet delivered. The file has a version: one this release does not know (written by a
// newer one) is left untouched, said so in the log, and this run keeps its notices in memory only. Each
// delivery's payload is sealed under a subkey of SYNCAUTH_NOTIFY_SECRET's key (outbox-seal.ts), which lives in the
// daemon's environment, never in the config dir: a copy of the file holds no usable link, and an entry written by
// anyone without the secret is refused, not signed and sent. The previous release's file (version 1, in the
// clear) is read once and written again sealed at once.
import path from 'node:path';
import type { Logger } from '../log.js';
import { ensurePrivateDir, readTextIfExists, writePrivateFile } from '../profile/files.js';
import { OUTBOX_VERSION, PREVIOUS_OUTBOX_VERSION, SEEN_MS, type Claim, type Delivery, type OutboxStore, type Reminder } from './outbox.js';
import { OutboxSeal, type StoredDelivery } from './outbox-seal.js';

export const OUTBOX_FILE = 'notices.json';

interface FileContent {
  version: number;
  deliveries: StoredDelivery[];
  /** Each reminder's fields with their MAC. */
  reminders: Record<string, unknown>[];
  /** Delivery key → when it may be forgotten, epoch ms. */
  seen: Record<string, number>;
}

const NO_CLAIM: Claim = { release: async () => undefined };

/** The names the file's records are authenticated under: a record copied to another entry does not open. */
const deliveryName = (key: string): string => `${OUTBOX_FILE}\0delivery\0${key}`;
const reminderName = (profile: string): string => `${OUTBOX_FILE}\0reminder\0${profile}`;

export class FileOutbox implements OutboxStore {
  readonly where: string;
  readonly #file: string;
  readonly #log: Logger | undefined;
  readonly #seal: OutboxSeal;
  readonly #deliveries = new Map<string, Delivery>();
  readonly #reminders = new Map<string, Reminder>();
  readonly #seen = new Map<string, number>();
  /** False when the file on disk is not ours to overwrite (an unknown version, or unreadable). */
  #persist = true;
  #writing: Promise<void> = Promise.resolve();
  #dirty = false;

  private constructor(file: string, log: Logger | undefined, key: Buffer | undefined) {
    this.#file = file;
    this.where = file;
    this.#log = log;
    this.#seal = new OutboxSeal(key, file, log);
  }

  /**
   * Opens (and reads) the outbox of `configDir`. `key` seals the payloads (a subkey of the notify secret's key,
   * see src/record-keys.ts); without one, no link is ever kept. Never throws for the file's content: that is logged.
   */
  static async open(configDir: string, log?: Logger, key?: Buffer): Promise<FileOutbox> {
    const outbox = new FileOutbox(path.join(configDir, OUTBOX_FILE), log, key);
    await outbox.#read();
    return outbox;
  }

  async #read(): Promise<void> {
    let text: string | undefined;
    try {
      text = await readTextIfExists(this.#file);
    } catch (error) {
      this.#refuse(`could not be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
      return;
    }
    if (text === undefined) return;
    let content: Partial<FileContent>;
    try {
      content = JSON.parse(text) as Partial<FileContent>;
    } catch {
      this.#refuse('is not valid JSON');
      return;
    }
    const previous = content.version === PREVIOUS_OUTBOX_VERSION;
    if (content.version !== OUTBOX_VERSION && !previous) {
      this.#refuse(`has version ${JSON.stringify(content.version ?? null)}, which this release does not know (it writes version ${OUTBOX_VERSION}); it was probably written by a newer release`);
      return;
    }
    for (const stored of Array.isArray(content.deliveries) ? content.deliveries : []) {
      const key = (stored as { key?: unknown } | null)?.key;
      const delivery = this.#seal.open(deliveryName(String(key)), stored, previous);
      if (delivery && delivery.key === key) this.#deliveries.set(delivery.key, delivery);
    }
    for (const stored of Array.isArray(content.reminders) ? content.reminders : []) {
      const profile = String((stored as { profile?: unknown } | null)?.profile);
      const reminder = this.#seal.openReminder(reminderName(profile), JSON.stringify(stored), previous);
      if (reminder && reminder.profile === profile) this.#reminders.set(reminder.profile, reminder);
    }
    for (const [key, until] of Object.entries(content.seen ?? {})) if (typeof until === 'number') this.#seen.set(key, until);
    // The previous release's file held its payloads in the clear: it is written sealed at once.
    if (previous) await this.#save();
  }

  #refuse(why: string): void {
    this.#persist = false;
    this.#log?.error(
      { event: 'notify.outbox_refused', op: 'notify', file: this.#file },
      `the notice outbox ${this.#file} ${why}: it is left as it is, and this run keeps its pending notices in memory only (a restart loses them). Move the file away to let this release use a new one.`,
    );
  }

  /** Writes the whole outbox after a change; changes made while a write runs are written by the next one. */
  #save(): Promise<void> {
    if (!this.#persist) return Promise.resolve();
    this.#dirty = true;
    this.#writing = this.#writing.then(async () => {
      if (!this.#dirty) return;
      this.#dirty = false;
      const now = Date.now();
      for (const [key, until] of this.#seen) if (until <= now && !this.#deliveries.has(key)) this.#seen.delete(key);
      const content: FileContent = {
        version: OUTBOX_VERSION,
        deliveries: [...this.#deliveries.values()].map((delivery) => this.#seal.seal(deliveryName(delivery.key), delivery)),
        reminders: [...this.#reminders.values()].map((reminder) => JSON.parse(this.#seal.signReminder(reminderName(reminder.profile), reminder)) as Record<string, unknown>),
        seen: Object.fromEntries(this.#seen),
      };
      try {
        await ensurePrivateDir(path.dirname(this.#file));
        await writePrivateFile(this.#file, `${JSON.stringify(content)}\n`);
      } catch (error) {
        this.#dirty = true;
        this.#log?.warn(
          { event: 'notify.outbox_unwritten', op: 'notify', file: this.#file, error: (error as NodeJS.ErrnoException).code ?? (error as Error).message },
          `could not write the notice outbox ${this.#file}; pending notices are kept in memory and written again at the next change`,
        );
      }
    });
    return this.#writing;
  }

  async enqueue(deliveries: Delivery[], now: number): Promise<Delivery[]> {
    const added = deliveries.filter((delivery) => !this.#seen.has(delivery.key) && !this.#deliveries.has(delivery.key));
    for (const delivery of added) {
      this.#deliveries.set(delivery.key, delivery);
      this.#seen.set(delivery.key, now + SEEN_MS);
    }
    if (added.length > 0) await this.#save();
    return added;
  }

  async due(now: number): Promise<Delivery[]> {
    return [...this.#deliveries.values()].filter((delivery) => delivery.nextAt <= now).sort((a, b) => a.nextAt - b.nextAt);
  }

  async claim(key: string): Promise<{ delivery: Delivery; claim: Claim } | undefined> {
    const delivery = this.#deliveries.get(key);
    return delivery ? { delivery: { ...delivery }, claim: NO_CLAIM } : undefined;
  }

  async remove(key: string): Promise<void> {
    if (this.#deliveries.delete(key)) await this.#save();
  }

  async reschedule(delivery: Delivery): Promise<void> {
    if (!this.#deliveries.has(delivery.key)) return;
    this.#deliveries.set(delivery.key, delivery);
    await this.#save();
  }

  async reminders(): Promise<Reminder[]> {
    return [...this.#reminders.values()].map((reminder) => ({ ...reminder }));
  }

  async startReminder(reminder: Reminder): Promise<boolean> {
    if (this.#reminders.get(reminder.profile)?.transition === reminder.transition) return false;
    this.#reminders.set(reminder.profile, reminder);
    await this.#save();
    return true;
  }

  async advanceReminder(reminder: Reminder): Promise<void> {
    if (this.#reminders.get(reminder.profile)?.transition !== reminder.transition) return;
    this.#reminders.set(reminder.profile, reminder);
    await this.#save();
  }

  async endReminder(profile: string): Promise<void> {
    if (this.#reminders.delete(profile)) await this.#save();
  }

  async close(): Promise<void> {
    await this.#writing;
  }
}
