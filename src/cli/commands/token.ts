// `syncauth token`: a valid access token alone on stdout, for scripts (`curl -H "Authorization: Bearer $(syncauth token)"`).
// Access tokens are not stored, so this renews: one token-endpoint call per run.
import type { CommandContext } from '../context.js';
import { openSession, readSecrets, requireGrant } from '../session.js';
import { renewProfileToken } from '../../sync/renew.js';
import { reauthorizeHint } from './shared.js';

export async function token(context: CommandContext): Promise<void> {
  const session = await openSession(context);
  const grant = requireGrant(session, await readSecrets(session));
  const tokens = await reauthorizeHint(session.name, () =>
    renewProfileToken({
      profiles: session.profiles,
      name: session.name,
      app: { appKey: grant.appKey, appSecret: grant.appSecret },
      refreshToken: grant.refreshToken,
      tokenUrl: session.values.tokenUrl,
      ...(session.secrets.writable ? { onNewRefreshToken: (rt: string) => session.secrets.set(session.name, { refresh_token: rt }) } : {}),
    }),
  );
  context.io.stdout.write(`${tokens.accessToken}\n`);
}
