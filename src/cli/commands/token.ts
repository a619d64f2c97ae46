// `syncauth token`: a valid access token alone on stdout, for scripts (`curl -H "Authorization: Bearer $(syncauth token)"`).
// The last token is kept in the profile's secret store and printed again while it has more than the renew
// margin left, so many callers at once (beside a daemon, too) cost one renewal; `--force` renews regardless.
// With the read-only env store nothing is kept, and each run renews.
import type { CommandContext } from '../context.js';
import { openSession, readSecrets, requireGrant } from '../session.js';
import { sessionAccessToken } from './shared.js';

export async function token(context: CommandContext, options: { force?: boolean } = {}): Promise<void> {
  const session = await openSession(context, undefined, { existing: true });
  const grant = requireGrant(session, await readSecrets(session));
  const { accessToken } = await sessionAccessToken(session, grant, options.force === true ? 'never' : 'margin');
  context.io.stdout.write(`${accessToken}\n`);
}
