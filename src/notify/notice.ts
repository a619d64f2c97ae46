// What the daemon tells the world when a person is needed: a profile parked for re-authorization, the loop
// closed, a connector failing too long, no live token too long. The daemon reports these transitions through a
// NoticeSink it is handed; delivering them is this directory's business (notifier.ts). Nothing here is secret: a
// notice carries names, ids, reasons and at most a re-authorization link, never a token, grant or key.

export type NoticeType =
  | 'profile.reauthorization_needed'
  | 'profile.reauthorized'
  | 'connector.failing'
  | 'token.unavailable';

export interface ProfileNotice {
  type: NoticeType;
  profile: string;
  /** The profile's connector on the service, when it has one. */
  connectorId?: string;
  /** The Dropbox folder the connector reads (the profile's remote URL). */
  folder?: string;
  /** Why, in words (the error's message); never a secret. */
  reason: string;
  /** The stable error code behind it, when there is one. */
  errorCode?: string;
  /** When the transition happened, epoch ms. */
  at: number;
  /**
   * Names the transition, the same on every replica that sees it (e.g. the secrets version the profile was
   * parked on and the error code), so that the notice id derived from profile, type and transition is too.
   */
  transition: string;
}

/** Receives the daemon's notices. Must not throw and must not block: delivery happens elsewhere. */
export interface NoticeSink {
  notice(notice: ProfileNotice): void;
}
