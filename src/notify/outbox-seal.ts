// The outbox's records as stored (version 2): a delivery's payload, which may carry a re-authorization link, is
// sealed (AES-256-GCM) under a key the outbox does not hold: a subkey of SYNCAUTH_GRANT_KEY in Redis, a subkey of
// SYNCAUTH_NOTIFY_SECRET's key in `notices.json`. A backup of the config dir or a dump of Redis therefore holds no
// usable link, and nobody who can only write there can make a replica send a notice: a payload that does not open
// is refused. The delivery key, its notice id, its target and when it was queued are the sealed payload's
// associated data, together with the name it is stored under, so a sealed payload moved to another delivery fails
// too. A reminder carries no link; its fields are authenticated (HMAC-SHA256 under the same subkey) for the same
// reason. The payload is sealed once per write and never changed: every retry of a notice sends the same link.
//
// Without a key (an unsigned Slack target, the file outbox, and so no re-authorization page: a link needs one) the
// records are kept as they are, a link never among them.
import type { Logger } from '../log.js';
import { openJson, openRecord, sealJson, signRecord, type Sealed } from '../record-keys.js';
import { OUTBOX_VERSION, type Delivery, type Reminder } from './outbox.js';
import type { NoticePayload } from './payload.js';

/** A delivery as stored: `sealed` with a key, `payload` without one (and in the previous release's records). */
export interface StoredDelivery {
  v?: number;
  key: string;
  id: string;
  target: string;
  firstAt: number;
  attempts: number;
  nextAt: number;
  sealed?: Sealed;
  payload?: NoticePayload;
}

export type OutboxRefusal = 'malformed' | 'version' | 'mac' | 'sealed' | 'unsealed';

const REASONS: Record<OutboxRefusal, string> = {
  malformed: 'it is damaged',
  version: 'it is of a version this release does not read',
  mac: 'it does not verify: it was written without the key, under another name, or changed since',
  sealed: 'it is sealed, and this run has no key to open it',
  unsealed: 'it is not sealed, and this outbox takes only sealed records',
};

function aad(name: string, delivery: Pick<Delivery, 'key' | 'id' | 'target' | 'firstAt'>): string {
  return JSON.stringify(['syncauth-outbox-delivery', OUTBOX_VERSION, name, delivery.key, delivery.id, delivery.target, delivery.firstAt]);
}

/** A payload without its link: what a run without a key may keep. */
function withoutLink(payload: NoticePayload): NoticePayload {
  if (payload.data.link === undefined && payload.data.linkExpiresAt === undefined) return payload;
  const { link: _link, linkExpiresAt: _expires, ...data } = payload.data;
  return { ...payload, data };
}

function isPayload(value: unknown): value is NoticePayload {
  const payload = value as Partial<NoticePayload> | null;
  return typeof payload === 'object' && payload !== null && typeof payload.type === 'string' && typeof payload.timestamp === 'string' && typeof payload.data === 'object' && payload.data !== null && typeof payload.data.profile === 'string';
}

function isDeliveryShape(value: unknown): value is StoredDelivery {
  const d = value as Partial<StoredDelivery> | null;
  return typeof d === 'object' && d !== null && typeof d.key === 'string' && typeof d.id === 'string' && typeof d.target === 'string' &&
    typeof d.firstAt === 'number' && typeof d.attempts === 'number' && typeof d.nextAt === 'number';
}

export class OutboxSeal {
  readonly #key: Buffer | undefined;
  readonly #log: Logger | undefined;
  readonly #where: string;
  /** Records refused, each logged once. */
  readonly #told = new Set<string>();

  /** `key`: the outbox's subkey; `where` names the outbox in log lines. */
  constructor(key: Buffer | undefined, where: string, log: Logger | undefined) {
    this.#key = key;
    this.#where = where;
    this.#log = log;
  }

  get sealing(): boolean {
    return this.#key !== undefined;
  }

  /** The delivery as it is stored under `name`. */
  seal(name: string, delivery: Delivery): StoredDelivery {
    const { payload, ...rest } = delivery;
    const head = { v: OUTBOX_VERSION, key: rest.key, id: rest.id, target: rest.target, firstAt: rest.firstAt, attempts: rest.attempts, nextAt: rest.nextAt };
    return this.#key ? { ...head, sealed: sealJson(this.#key, aad(name, delivery), payload) } : { ...head, payload: withoutLink(payload) };
  }

  /**
   * The delivery stored under `name`, or undefined (logged once) when it is refused. `previous`: a record of the
   * previous release (version 1, never sealed), read once so that it is written sealed or delivered.
   */
  open(name: string, stored: unknown, previous = false): Delivery | undefined {
    if (!isDeliveryShape(stored)) return this.#refuse(name, 'malformed');
    const head = { key: stored.key, id: stored.id, target: stored.target, firstAt: stored.firstAt, attempts: stored.attempts, nextAt: stored.nextAt };
    if (previous) return isPayload(stored.payload) ? { ...head, payload: this.#key ? stored.payload : withoutLink(stored.payload) } : this.#refuse(name, 'malformed');
    if (stored.v !== OUTBOX_VERSION) return this.#refuse(name, 'version');
    if (stored.sealed !== undefined) {
      if (!this.#key) return this.#refuse(name, 'sealed');
      const payload = openJson(this.#key, aad(name, stored), stored.sealed);
      return isPayload(payload) ? { ...head, payload } : this.#refuse(name, 'mac');
    }
    if (this.#key) return this.#refuse(name, 'unsealed');
    return isPayload(stored.payload) ? { ...head, payload: withoutLink(stored.payload) } : this.#refuse(name, 'malformed');
  }

  /** A reminder as it is stored under `name`: its fields and their MAC (none without a key). */
  signReminder(name: string, reminder: Reminder): string {
    const fields = { v: OUTBOX_VERSION, ...reminder };
    return this.#key ? signRecord(this.#key, name, fields) : JSON.stringify(fields);
  }

  /** The reminder stored under `name` as `raw` (JSON), or undefined (logged once) when it is refused. */
  openReminder(name: string, raw: string, previous = false): Reminder | undefined {
    let fields: Record<string, unknown>;
    if (this.#key && !previous) {
      const opened = openRecord(this.#key, name, raw, OUTBOX_VERSION);
      if ('refused' in opened) return this.#refuse(name, opened.refused);
      fields = opened.fields;
    } else {
      try {
        fields = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return this.#refuse(name, 'malformed');
      }
      if (!previous && fields.v !== OUTBOX_VERSION) return this.#refuse(name, 'version');
    }
    const { profile, transition, notice, since, asks } = fields as Partial<Reminder>;
    if (typeof profile !== 'string' || typeof transition !== 'string' || typeof notice !== 'object' || notice === null || typeof since !== 'number' || typeof asks !== 'number') {
      return this.#refuse(name, 'malformed');
    }
    return { profile, transition, notice, since, asks };
  }

  #refuse(name: string, reason: OutboxRefusal): undefined {
    const told = `${name}\0${reason}`;
    if (this.#told.has(told)) return undefined;
    if (this.#told.size >= 1_000) this.#told.clear();
    this.#told.add(told);
    this.#log?.warn(
      { event: 'notify.record_refused', op: 'notify', outbox: this.#where, reason },
      `a record in the notice outbox (${this.#where}) was refused (${REASONS[reason]}); it is not sent`,
    );
    return undefined;
  }
}
