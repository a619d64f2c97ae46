// The notifier: the daemon's NoticeSink. notice() only queues (renewals never wait on a receiver); a loop of
// its own delivers what is due, one attempt per delivery at a time, each within an overall deadline, signed
// anew with a fresh timestamp. A 2xx is delivered; 408, 429, 5xx, a timeout or a refused connection is tried
// again with exponential backoff until 24 h after the notice, then dropped with an error line; any other answer
// is a permanent failure, logged once. profile.reauthorization_needed is asked three times while it lasts: on
// the transition, then 24 h and 72 h later, each time with a fresh link when a link minter is configured.
import type { NoticeSink, NoticeType, ProfileNotice } from './notice.js';
import type { Logger } from '../log.js';
import { parseRetryAfter } from '../net/http.js';
import { post } from '../net/post.js';
import { backoffDelay, type BackoffPolicy } from '../backoff.js';
import type { Delivery, OutboxStore, Reminder } from './outbox.js';
import { renderBody, TEST_TYPE, type NoticeData, type NoticePayload, type NotifyFormat } from './payload.js';
import { noticeId, webhookHeaders } from './signing.js';
import type { NotifySettings, NotifyTarget } from './targets.js';

const HOUR = 3600 * 1000;
/** A delivery not made within this long after its notice is dropped. */
export const MAX_AGE_MS = 24 * HOUR;
/** When profile.reauthorization_needed is asked again after the transition, while it lasts (three asks in all). */
export const ASK_AFTER_MS = [0, 24 * HOUR, 72 * HOUR] as const;
/** Overall deadline of one attempt: connect, send, answer. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
const DEFAULT_BACKOFF: BackoffPolicy = { baseMs: 5_000, maxMs: HOUR / 2 };
const DEFAULT_POLL_MS = 1_000;
/** How long the link minter may take before an ask goes without a link. */
const LINK_TIMEOUT_MS = 10_000;

export interface ReauthorizationLink {
  url: string;
  /** Epoch ms, a Date, or ISO 8601. */
  expiresAt: number | string | Date;
}

export interface NotifierOptions extends NotifySettings {
  store: OutboxStore;
  log: Logger;
  /** Mints a fresh re-authorization link for a profile, when the re-authorization page is on. */
  linkFor?: (profile: string) => Promise<ReauthorizationLink | undefined>;
  /**
   * Whether the profile is known to be fine now (this daemon holds a live token for it). A reminder found for
   * such a profile (it was set up again while no daemon ran, so no profile.reauthorized was told) ends instead
   * of asking again. Absent, or false when not known: the reminder goes.
   */
  isResolved?: (profile: string) => boolean;
  now?: () => number;
  random?: () => number;
  /** How often the loop looks for due deliveries and reminders; `false`: only when tick() is called. Default 1 s. */
  pollMs?: number | false;
  attemptTimeoutMs?: number;
  backoff?: BackoffPolicy;
}

/** What one attempt came to. */
export interface AttemptResult {
  outcome: 'delivered' | 'retry' | 'permanent';
  status?: number;
  error?: string;
  retryAfterMs?: number;
}

/** One signed POST of `body` to `target`; never throws. */
export async function sendOnce(target: NotifyTarget, key: Buffer | undefined, id: string, body: string, now: number, timeoutMs = ATTEMPT_TIMEOUT_MS, signal?: AbortSignal): Promise<AttemptResult> {
  try {
    const answer = await post({
      url: target.url,
      headers: { 'content-type': 'application/json', 'user-agent': 'syncauth-notify', ...webhookHeaders(key, id, now, body) },
      body,
      peer: 'the notice receiver',
      timeoutMs,
      ...(signal ? { signal } : {}),
    });
    const status = answer.status;
    if (status >= 200 && status < 300) return { outcome: 'delivered', status };
    if (status === 408 || status === 429 || status >= 500) {
      const retryAfterMs = parseRetryAfter(answer.headers['retry-after'], now);
      return { outcome: 'retry', status, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    }
    return { outcome: 'permanent', status };
  } catch (error) {
    return { outcome: 'retry', error: (error as Error).message };
  }
}

/** The payload of a daemon notice, with its ask number and link when it has them. */
function payloadOf(notice: ProfileNotice, extra: Partial<NoticeData> = {}): NoticePayload {
  return {
    type: notice.type,
    timestamp: new Date(notice.at).toISOString(),
    data: {
      profile: notice.profile,
      ...(notice.connectorId ? { connectorId: notice.connectorId } : {}),
      ...(notice.folder ? { folder: notice.folder } : {}),
      reason: notice.reason,
      ...(notice.errorCode ? { errorCode: notice.errorCode } : {}),
      ...extra,
    },
  };
}

function isoOf(value: number | string | Date): string | undefined {
  const at = value instanceof Date ? value.getTime() : typeof value === 'number' ? value : Date.parse(value);
  return Number.isFinite(at) ? new Date(at).toISOString() : undefined;
}

export class Notifier implements NoticeSink {
  readonly #options: NotifierOptions;
  readonly #store: OutboxStore;
  readonly #log: Logger;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #targets: Map<string, NotifyTarget>;
  /** Notices the store could not take yet (Redis away): tried again at every tick. */
  readonly #unaccepted: ProfileNotice[] = [];
  #accepting: Promise<void> = Promise.resolve();
  #ticking: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Cancels an attempt under way at close: it counts as failed and stays in the outbox for the next run. */
  readonly #stop = new AbortController();
  /** Keys whose permanent failure or drop was logged, so a replica that finds it again says nothing more. */
  readonly #told = new Set<string>();

  constructor(options: NotifierOptions) {
    this.#options = options;
    this.#store = options.store;
    this.#log = options.log.child({ component: 'notify' });
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#targets = new Map(options.targets.map((target) => [target.key, target]));
  }

  get format(): NotifyFormat {
    return this.#options.format;
  }

  /** Starts the delivery loop (unless pollMs is false): what a previous run left in the outbox goes first. */
  start(): this {
    const poll = this.#options.pollMs ?? DEFAULT_POLL_MS;
    if (poll !== false) {
      this.#timer = setInterval(() => void this.tick(), poll);
      this.#timer.unref();
      void this.tick();
    }
    return this;
  }

  /** Queues a notice; never throws, never waits. */
  notice(notice: ProfileNotice): void {
    if (this.#closed) return;
    this.#accepting = this.#accepting.then(() => this.#accept(notice));
    if (this.#timer) void this.#accepting.then(() => this.tick());
  }

  /** Resolves once every notice given so far is in the outbox (or waiting for the store to come back). */
  accepted(): Promise<void> {
    return this.#accepting;
  }

  async #accept(notice: ProfileNotice): Promise<void> {
    try {
      await this.#acceptOne(notice);
    } catch (error) {
      this.#unaccepted.push(notice);
      this.#log.warn(
        { event: 'notify.queue_failed', op: 'notify', profile: notice.profile, type: notice.type, error: (error as Error).message },
        `could not put the ${notice.type} notice of profile "${notice.profile}" in the outbox (${this.#store.where}); kept in memory and tried again`,
      );
    }
  }

  async #acceptOne(notice: ProfileNotice): Promise<void> {
    if (notice.type === 'profile.reauthorization_needed') {
      // The asks are sent by the reminder, the first one at once: one path for all three, and a restart between
      // the transition and the first ask loses nothing.
      const started = await this.#store.startReminder({ profile: notice.profile, transition: notice.transition, notice, since: notice.at, asks: 0 });
      if (!started) this.#log.debug({ event: 'notify.duplicate', op: 'notify', profile: notice.profile, type: notice.type }, 'this transition was already noticed');
      return;
    }
    if (notice.type === 'profile.reauthorized') await this.#store.endReminder(notice.profile);
    await this.#queue(notice.type, notice.profile, notice.transition, payloadOf(notice));
  }

  async #queue(type: NoticeType | typeof TEST_TYPE, profile: string, transition: string, payload: NoticePayload): Promise<void> {
    const id = noticeId(profile, type, transition);
    const now = this.#now();
    const deliveries: Delivery[] = [...this.#targets.values()].map((target) => ({
      key: `${id}.${target.key}`,
      id,
      target: target.key,
      payload,
      firstAt: now,
      attempts: 0,
      nextAt: now,
    }));
    const added = await this.#store.enqueue(deliveries, now);
    if (added.length > 0) {
      this.#log.info({ event: 'notify.queued', op: 'notify', profile, type, id, targets: added.length }, `queued the ${type} notice of profile "${profile}"`);
    }
  }

  /** One pass: notices the store refused before, reminders due, deliveries due. Single flight. */
  tick(): Promise<void> {
    this.#ticking ??= this.#tickOnce().finally(() => {
      this.#ticking = undefined;
    });
    return this.#ticking;
  }

  async #tickOnce(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#accepting;
      for (const notice of this.#unaccepted.splice(0)) await this.#accept(notice);
      await this.#remind();
      await this.#deliverDue();
    } catch (error) {
      this.#log.warn({ event: 'notify.tick_failed', op: 'notify', error: (error as Error).message }, `could not read the notice outbox (${this.#store.where}); trying again shortly`);
    }
  }

  async #remind(): Promise<void> {
    const now = this.#now();
    for (const reminder of await this.#store.reminders()) {
      const ask = reminder.asks + 1;
      const dueAt = ASK_AFTER_MS[reminder.asks];
      if (dueAt === undefined || now < reminder.since + dueAt) continue;
      if (ask > 1 && this.#options.isResolved?.(reminder.profile) === true) {
        await this.#store.endReminder(reminder.profile);
        this.#log.info({ event: 'notify.reminder_ended', op: 'notify', profile: reminder.profile }, `profile "${reminder.profile}" renews again: no more re-authorization reminders`);
        continue;
      }
      const link = await this.#link(reminder.profile);
      const payload = payloadOf({ ...reminder.notice, at: ask === 1 ? reminder.notice.at : now }, { ask, ...link });
      await this.#queue(reminder.notice.type, reminder.profile, `${reminder.transition}#ask${ask}`, payload);
      const next: Reminder = { ...reminder, asks: ask };
      await this.#store.advanceReminder(next);
    }
  }

  async #link(profile: string): Promise<Partial<NoticeData>> {
    const mint = this.#options.linkFor;
    if (!mint) return {};
    let timer: NodeJS.Timeout | undefined;
    try {
      const link = await Promise.race([
        mint(profile),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), LINK_TIMEOUT_MS);
        }),
      ]);
      if (!link) return {};
      const expiresAt = isoOf(link.expiresAt);
      return { link: link.url, ...(expiresAt ? { linkExpiresAt: expiresAt } : {}) };
    } catch (error) {
      this.#log.warn({ event: 'notify.link_failed', op: 'notify', profile, error: (error as Error).message }, `could not mint a re-authorization link for profile "${profile}"; the notice goes without one`);
      return {};
    } finally {
      clearTimeout(timer);
    }
  }

  async #deliverDue(): Promise<void> {
    for (const due of await this.#store.due(this.#now())) {
      if (this.#closed) return;
      await this.#deliverOne(due.key);
    }
  }

  async #deliverOne(key: string): Promise<void> {
    const claimed = await this.#store.claim(key);
    if (!claimed) return;
    const { delivery, claim } = claimed;
    try {
      const now = this.#now();
      if (delivery.nextAt > now) return;
      const fields = { event: '', op: 'notify', profile: delivery.payload.data.profile, type: delivery.payload.type, id: delivery.id };
      const target = this.#targets.get(delivery.target);
      if (!target) {
        await this.#store.remove(key);
        this.#log.warn({ ...fields, event: 'notify.dropped' }, `dropped the ${delivery.payload.type} notice of profile "${fields.profile}": its URL is no longer configured`);
        return;
      }
      if (now - delivery.firstAt >= MAX_AGE_MS) {
        await this.#drop(delivery, target, 'it could not be delivered within 24 h');
        return;
      }
      const body = renderBody(delivery.payload, this.#options.format);
      const result = await sendOnce(target, this.#options.key, delivery.id, body, now, this.#options.attemptTimeoutMs, this.#stop.signal);
      const attempts = delivery.attempts + 1;
      const where = { ...fields, target: target.url.origin, attempt: attempts, ...(result.status !== undefined ? { status: result.status } : {}) };
      if (result.outcome === 'delivered') {
        await this.#store.remove(key);
        this.#log.info({ ...where, event: 'notify.delivered' }, `delivered the ${delivery.payload.type} notice of profile "${fields.profile}" to ${target.url.origin}`);
        return;
      }
      if (result.outcome === 'permanent') {
        await this.#store.remove(key);
        if (!this.#told.has(key)) {
          this.#told.add(key);
          this.#log.error(
            { ...where, event: 'notify.rejected' },
            `${target.url.origin} refused the ${delivery.payload.type} notice of profile "${fields.profile}" with HTTP ${result.status}; not sent again (check the receiver's URL and its signature check)`,
          );
        }
        return;
      }
      const after = this.#now();
      const wait = result.retryAfterMs !== undefined ? Math.max(result.retryAfterMs, 1_000) : backoffDelay(this.#options.backoff ?? DEFAULT_BACKOFF, attempts, this.#random);
      const deadline = delivery.firstAt + MAX_AGE_MS;
      if (after >= deadline) {
        await this.#drop({ ...delivery, attempts }, target, `the last attempt failed (${result.error ?? `HTTP ${result.status}`})`);
        return;
      }
      // The last attempt is made at the 24 h mark, not skipped because the backoff would pass it.
      await this.#store.reschedule({ ...delivery, attempts, nextAt: Math.min(after + wait, deadline) });
      this.#log.warn(
        { ...where, event: 'notify.retry', retryInMs: wait, ...(result.error ? { error: result.error } : {}) },
        `could not deliver the ${delivery.payload.type} notice of profile "${fields.profile}" to ${target.url.origin} (${result.error ?? `HTTP ${result.status}`}); trying again in ${Math.ceil(wait / 1000)} s`,
      );
    } finally {
      await claim.release().catch(() => undefined);
    }
  }

  async #drop(delivery: Delivery, target: NotifyTarget, why: string): Promise<void> {
    await this.#store.remove(delivery.key);
    if (this.#told.has(delivery.key)) return;
    this.#told.add(delivery.key);
    this.#log.error(
      { event: 'notify.dropped', op: 'notify', profile: delivery.payload.data.profile, type: delivery.payload.type, id: delivery.id, target: target.url.origin, attempts: delivery.attempts },
      `gave up on the ${delivery.payload.type} notice of profile "${delivery.payload.data.profile}" to ${target.url.origin} after ${delivery.attempts} attempts: ${why}`,
    );
  }

  /** Stops the loop; an attempt under way ends within its deadline. The outbox keeps what is left. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    this.#stop.abort();
    await this.#accepting.catch(() => undefined);
    await this.#ticking?.catch(() => undefined);
    await this.#store.close();
  }
}

/** `syncauth notify test`: one signed test event to each target, and what each answered. */
export async function sendTestNotices(settings: NotifySettings, options: { now?: () => number; timeoutMs?: number } = {}): Promise<{ target: NotifyTarget; result: AttemptResult }[]> {
  const now = options.now ?? Date.now;
  const at = now();
  const payload: NoticePayload = { type: TEST_TYPE, timestamp: new Date(at).toISOString(), data: { profile: '(test)', reason: 'a test notice sent by `syncauth notify test`' } };
  const id = noticeId('(test)', TEST_TYPE, String(at));
  const body = renderBody(payload, settings.format);
  return Promise.all(settings.targets.map(async (target) => ({ target, result: await sendOnce(target, settings.key, id, body, now(), options.timeoutMs) })));
}
