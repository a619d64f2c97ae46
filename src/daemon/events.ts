// What the daemon tells the world when a person is needed, and the hooks it offers the re-authorization page.
// The daemon only reports transitions (a profile parked for re-authorization, the loop closed, a connector
// failing too long, no live token too long); delivering them (src/notify/) and minting the links they carry
// (src/reauth/) live elsewhere and are wired in by the caller. Nothing here is secret: a notice carries names,
// ids, reasons and at most a re-authorization link, never a token, grant or key.

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

/** A fresh grant for a profile, obtained by re-authorization (the page's callback). */
export interface ReauthorizedGrant {
  appKey: string;
  appSecret: string;
  refreshToken: string;
  /** Dropbox's account id of the grant. */
  accountId: string;
}

/** What became of a grant handed to the daemon after re-authorization. */
export interface ReauthorizationResult {
  /** The grant is stored and renews. */
  stored: boolean;
  /** The connector holds a token from it (absent when the profile has no service settings). */
  reconciled?: boolean;
  /** The service's connection check of the connector, when one was run. */
  check?: { ok: boolean; message?: string };
  /** What failed, in words, when something did. */
  error?: string;
  /**
   * What works now but would not survive a restart, in words: the grant is held in memory only, the
   * --on-reauthorized command failed, or the other replicas could not be given the grant.
   */
  warning?: string;
}
