// `syncauth token`: a valid access token alone on stdout, for scripts (`curl -H "Authorization: Bearer $(syncauth token)"`).
// Access tokens are not stored, so this renews: one token-endpoint call per run.
import type { CommandContext } from '../context.js';
import { openSession, readSecrets, requireGrant } from '../session.js';
import { renewSessionToken } from './shared.js';

export async function token(context: CommandContext): Promise<void> {
  const session = await openSession(context);
  const grant = requireGrant(session, await readSecrets(session));
  const tokens = await renewSessionToken(session, grant);
  context.io.stdout.write(`${tokens.accessToken}\n`);
}
