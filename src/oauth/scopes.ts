// Checks on what Dropbox handed out: the granted permissions against the access mode, and whether a string
// is shaped like a short-lived access token. Pure functions; none of them echoes a token.
import { remedyHint, renderHint, type CommandLine, type RemedyHint } from '../remedy.js';


/** How the ingestion service will use the app folder. */
export type FolderAccess = 'read' | 'write' | 'read-write';

/** The content permissions each access mode needs on the app's Permissions tab. */
export const SCOPES_FOR_ACCESS: Readonly<Record<FolderAccess, string[]>> = Object.freeze({
  // Frozen so that no caller can change what another one checks against.
  read: Object.freeze(['files.content.read']) as string[],
  write: Object.freeze(['files.content.write']) as string[],
  'read-write': Object.freeze(['files.content.read', 'files.content.write']) as string[],
});

const APP_CONSOLE_URL = 'https://www.dropbox.com/developers/apps';

/**
 * What to tell a user whose token lacks permissions: where to tick them, and that only a new authorization
 * picks the change up (a token keeps the permissions the app had when it was issued).
 */
export function permissionsHint(scopes: readonly string[]): RemedyHint {
  const list = scopes.join(', ');
  return remedyHint({ action: 'reauthorize' }, (command) =>
    `in the Dropbox App Console (${APP_CONSOLE_URL}) open the app's Permissions tab, tick ${list} and click ` +
    `Submit; then authorize again with \`${command}\`, because a token keeps the permissions the app had ` +
    'when it was authorized',
  );
}

/**
 * Compares the scopes a token was granted (the `scope` of the code exchange) with those the access mode
 * needs. A renewal response usually lists no scopes, so pass the exchange's list, not a renewal's. The message
 * names the command that authorizes again as `line` writes it (`syncauth setup` unless told).
 */
export function checkGrantedScopes(
  granted: readonly string[],
  access: FolderAccess,
  line?: CommandLine,
): { missing: string[]; message?: string } {
  const have = new Set(granted);
  const missing = SCOPES_FOR_ACCESS[access].filter((scope) => !have.has(scope));
  if (missing.length === 0) return { missing };
  const what = missing.length === 1 ? 'permission' : 'permissions';
  return {
    missing,
    message: `the Dropbox app was not granted the ${what} ${missing.join(', ')} needed for ${access} access: ${renderHint(permissionsHint(missing), line)}`,
  };
}

const SHORT_LIVED_PREFIX = 'sl.';

/** True when a pasted text is a short-lived access token (starts with `sl.`) rather than an authorization code. */
export function looksLikeAccessToken(text: string): boolean {
  return text.trim().startsWith(SHORT_LIVED_PREFIX);
}

/**
 * A warning when an access token is not shaped like Dropbox's short-lived tokens, undefined when it is. The
 * length is deliberately not checked: it has grown over the years (about 1.3–1.5 k characters now).
 */
export function checkAccessTokenShape(token: string): string | undefined {
  if (token.startsWith(SHORT_LIVED_PREFIX)) return undefined;
  return (
    `the access token does not start with "${SHORT_LIVED_PREFIX}" as Dropbox's short-lived tokens do; ` +
    'check that the token URL points at Dropbox (https://api.dropboxapi.com/oauth2/token)'
  );
}
