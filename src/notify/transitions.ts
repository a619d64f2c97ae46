// One profile's notices (notice.ts): the transitions a person should hear about, each told once. The worker
// reports what happens (parked, resumed, a reconcile failed or succeeded); at each visit it asks whether a spell
// (no live token, a failing connector) has lasted past its threshold. The sink only queues: nothing here waits.
import { createHash } from 'node:crypto';
import type { NoticeSink, NoticeType, ProfileNotice } from './notice.js';
import type { Logger } from '../log.js';

/** What of a grant tells one grant from the next (a secret of its own is never kept here, only a digest). */
export interface GrantIdentity {
  appKey: string;
  refreshToken: string;
}

/** A failure as the notices tell it: a stable code and words, never a secret. */
export interface NoticeFailure {
  code: string;
  message: string;
}

interface Spell {
  since: number;
  noticed: boolean;
}

/**
 * A short digest of the grant a profile was parked on, so that a later revocation of another grant under the
 * same secrets version (the env store has none) is a new transition. It says nothing of the token.
 */
function grantFingerprint(grant: GrantIdentity | undefined): string {
  return grant ? createHash('sha256').update(`syncauth-notice\0${grant.appKey}\0${grant.refreshToken}`).digest('hex').slice(0, 12) : '-';
}

export class ProfileNotices {
  readonly #sink: NoticeSink;
  readonly #profile: string;
  readonly #log: Logger;
  /** The re-authorization transition told, until the profile resumes. */
  #parkedOn: string | undefined;
  #noToken: Spell | undefined;
  #failing: (Spell & NoticeFailure) | undefined;
  #renewalFailure: NoticeFailure | undefined;

  constructor(sink: NoticeSink, profile: string, log: Logger, startedAt: number) {
    this.#sink = sink;
    this.#profile = profile;
    this.#log = log;
    this.#noToken = { since: startedAt, noticed: false };
  }

  #emit(type: NoticeType, at: number, transition: string, failure: Partial<NoticeFailure> & { message: string }, where: { connectorId?: string | undefined; folder?: string | undefined }): void {
    const notice: ProfileNotice = {
      type,
      profile: this.#profile,
      ...(where.connectorId ? { connectorId: where.connectorId } : {}),
      ...(where.folder ? { folder: where.folder } : {}),
      reason: failure.message,
      ...(failure.code ? { errorCode: failure.code } : {}),
      at,
      transition,
    };
    try {
      this.#sink.notice(notice);
    } catch (error) {
      // A sink must not throw; should one, the renewal goes on regardless.
      this.#log.warn({ profile: this.#profile, event: 'notice.failed', op: 'notify', type, error: (error as Error).message }, 'the notice sink failed');
    }
  }

  /** Parked for re-authorization: told once per transition (secrets version, error code, grant). */
  parked(at: number, failure: NoticeFailure, secretsVersion: string | undefined, grant: GrantIdentity | undefined, where: { connectorId?: string | undefined; folder?: string | undefined }): void {
    const transition = `${secretsVersion ?? '-'}:${failure.code}:${grantFingerprint(grant)}`;
    if (this.#parkedOn === transition) return;
    this.#parkedOn = transition;
    this.#emit('profile.reauthorization_needed', at, transition, failure, where);
  }

  /** Renewing again: when it was parked for re-authorization, the loop closed. */
  resumed(at: number, why: string, where: { connectorId?: string | undefined; folder?: string | undefined }): void {
    const transition = this.#parkedOn;
    this.#parkedOn = undefined;
    if (transition !== undefined) this.#emit('profile.reauthorized', at, transition, { message: why }, where);
  }

  renewalFailed(failure: NoticeFailure): void {
    this.#renewalFailure = failure;
  }

  reconcileFailed(at: number, failure: NoticeFailure): void {
    this.#failing = this.#failing ? { ...this.#failing, ...failure } : { since: at, noticed: false, ...failure };
  }

  reconcileSucceeded(): void {
    this.#failing = undefined;
  }

  /**
   * At each visit: a spell without a live token past `marginMs` (not while parked for re-authorization, which
   * was told already), and a connector failing past `failingAfterMs`, each told once per spell. A spell's
   * transition is its start rounded to its threshold, so replicas whose spells began together agree on the id.
   */
  check(
    at: number,
    state: { live: boolean; parked: { reason: string; code: string; message: string } | undefined; connectorId?: string | undefined; folder?: string | undefined },
    thresholds: { marginMs: number; failingAfterMs: number },
  ): void {
    const where = { connectorId: state.connectorId, folder: state.folder };
    if (state.live) {
      this.#noToken = undefined;
      this.#renewalFailure = undefined;
    } else {
      this.#noToken ??= { since: at, noticed: false };
      const spell = this.#noToken;
      if (!spell.noticed && state.parked?.reason !== 'reauthorization_needed' && at - spell.since > thresholds.marginMs) {
        spell.noticed = true;
        const why = state.parked ?? this.#renewalFailure ?? { code: '', message: 'no renewal has succeeded' };
        this.#emit('token.unavailable', at, `since:${Math.floor(spell.since / thresholds.marginMs)}`, { ...(why.code ? { code: why.code } : {}), message: `no live access token for ${Math.round((at - spell.since) / 60_000)} min: ${why.message}` }, where);
      }
    }
    const failing = this.#failing;
    if (failing && !failing.noticed && at - failing.since > thresholds.failingAfterMs) {
      failing.noticed = true;
      this.#emit('connector.failing', at, `since:${Math.floor(failing.since / thresholds.failingAfterMs)}`, { code: failing.code, message: `the connector has not been updated for ${Math.round((at - failing.since) / 60_000)} min: ${failing.message}` }, where);
    }
  }
}
