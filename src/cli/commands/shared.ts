// Small pieces several profile commands share. The access token logic lives in sync/access-token.ts; a
// command's renewal lets Ctrl-C end it at once, but never in the middle of storing what Dropbox handed out.
import { sessionAccessToken as syncSessionAccessToken, type SessionToken, type TokenReuse } from '../../sync/access-token.js';
import type { Grant, ProfileSession } from '../../sync/profile-session.js';
import { writeSection } from '../interrupt.js';

export { RECENT_RENEWAL_MS } from '../../sync/access-token.js';
export type { SessionToken, TokenReuse } from '../../sync/access-token.js';

/** The profile's access token (see sync/access-token.ts), its writes inside the command's write sections. */
export function sessionAccessToken(session: ProfileSession, grant: Grant, reuse: TokenReuse, now: () => number = Date.now): Promise<SessionToken> {
  return syncSessionAccessToken(session, grant, reuse, { now, guardWrite: writeSection });
}
