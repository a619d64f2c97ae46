// `syncauth logout`: revoke the grant at Dropbox (so a copy of the refresh token elsewhere stops working too),
// then delete the profile's secrets and state.
import { syncauthCommand } from '../../profile/name.js';
import { ExitCode, SyncauthError } from '../../errors.js';
import { isOAuthError, revokeToken, renewAccessToken } from '../../oauth/index.js';
import type { CommandContext } from '../context.js';
import { openSession, readSecrets, type ProfileSession } from '../session.js';

export async function logout(context: CommandContext, options: { revoke?: boolean }): Promise<void> {
  const session = await openSession(context);
  await requireProfile(session);
  const secrets = await readSecrets(session);
  const { io } = context;
  if (options.revoke !== false && secrets.appKey && secrets.appSecret && secrets.refreshToken) {
    try {
      // Revocation needs an access token of the grant; revoking it disables the refresh token as well.
      const tokens = await renewAccessToken({
        tokenUrl: session.values.tokenUrl,
        app: { appKey: secrets.appKey, appSecret: secrets.appSecret },
        refreshToken: secrets.refreshToken,
      });
      await revokeToken({ apiUrl: session.values.dropboxApiUrl, accessToken: tokens.accessToken });
      io.stderr.write('✓ grant revoked at Dropbox\n');
    } catch (error) {
      if (isOAuthError(error) && error.kind === 'terminal') io.stderr.write('✓ the grant was already revoked or invalid\n');
      else throw error;
    }
  } else if (options.revoke !== false) {
    io.stderr.write('! no complete grant to revoke; deleting what is stored\n');
  }
  if (session.secrets.writable) {
    await session.secrets.delete(session.name);
    io.stderr.write(`✓ secrets of profile "${session.name}" deleted from the ${session.secrets.kind} store\n`);
  } else {
    io.stderr.write('! the secrets come from the environment; remove them there\n');
  }
  await session.profiles.delete(session.name);
  io.stderr.write(`✓ state of profile "${session.name}" deleted`);
  io.stderr.write(session.state?.connectorId ? `; the source connector ${session.state.connectorId} is left on the service (\`${syncauthCommand(`source delete ${session.state.connectorId}`)}\` removes it)\n` : '\n');
}

/**
 * A mistyped --profile must not pass for a logout: it would report deletions that did nothing, or revoke a grant
 * the environment holds for another profile.
 */
async function requireProfile(session: ProfileSession): Promise<void> {
  if (session.state || Object.keys(await session.secrets.get(session.name)).length > 0) return;
  const known = [...new Set([...(await session.profiles.names()), ...(await session.secrets.listProfiles())])].sort();
  throw new SyncauthError('SYNCAUTH_NO_PROFILE', `there is no profile "${session.name}": it has no state and no stored secrets; nothing was changed`, {
    exitCode: ExitCode.error,
    hint: known.length > 0 ? `the existing profiles are: ${known.join(', ')}; name one with --profile` : 'there are no profiles yet; nothing to log out of',
  });
}
