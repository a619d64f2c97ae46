// The outbox of a single daemon: one file in the config dir (`notices.json`, 0600), rewritten atomically after
// each change (write to a private temporary file, flush, rename), so a restart or a kill -9 finds every notice
// that was queued and not yet delivered. The file has a version: one this release does not know (written by a
// newer one) is left untouched, said so in the log, and this run keeps its notices in memory only.
import path from 'node:path';
import type { Logger } from '../log.js';
import { ensurePrivateDir, readTextIfExists, writePrivateFile } from '../profile/files.js';
import { OUTBOX_VERSION, SEEN_MS, type Claim, type Delivery, type OutboxStore, type Reminder } from './outbox.js';

export const OUTBOX_FILE = 'notices.json';

interface FileContent {
  version: number;
  deliveries: Delivery[];
  reminders: Reminder[];
  /** Delivery key → when it may be forgotten, epoch ms. */
  seen: Record<string, number>;
}

const NO_CLAIM: Claim = { release: async () => undefined };

export class FileOutbox implements OutboxStore {
  readonly where: string;
  readonly #file: string;
  readonly #log: Logger | undefined;
  readonly #deliveries = new Map<string, Delivery>();
  readonly #reminders = new Map<string, Reminder>();
  readonly #seen = new Map<string, number>();
  /** False when the file on disk is not ours to overwrite (an unknown version, or unreadable). */
  #persist = true;
  #writing: Promise<void> = Promise.resolve();
  #dirty = false;

  private constructor(file: string, log: Logger | undefined) {
    this.#file = file;
    this.where = file;
    this.#log = log;
  }

  /** Opens (and reads) the outbox of `configDir`. Never throws for the file's content: that is logged. */
  static async open(configDir: string, log?: Logger): Promise<FileOutbox> {
    const outbox = new FileOutbox(path.join(configDir, OUTBOX_FILE), log);
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
    if (content.version !== OUTBOX_VERSION) {
      this.#refuse(`has version ${JSON.stringify(content.version ?? null)}, which this release does not know (it writes version ${OUTBOX_VERSION}); it was probably written by a newer release`);
      return;
    }
    for (const delivery of content.deliveries ?? []) this.#deliveries.set(delivery.key, delivery);
    for (const reminder of content.reminders ?? []) this.#reminders.set(reminder.profile, reminder);
    for (const [key, until] of Object.entries(content.seen ?? {})) this.#seen.set(key, until);
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
        deliveries: [...this.#deliveries.values()],
        reminders: [...this.#reminders.values()],
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
