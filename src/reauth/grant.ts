// What the re-authorization page hands over and what it is told back: the port (ReauthServerOptions.reauthorized)
// that whoever serves the profiles implements; the daemon does (RunningDaemon.reauthorized). The grant is
// secret and never logged; the result carries words only.

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
