// A command's view of one profile (see sync/profile-session.ts, where it is opened): the command's context
// adapted to the session's plain options, and its notices written to the command's stderr.
import { openProfileSession, type ProfileSession, type SessionNotice } from '../sync/profile-session.js';
import { noteIgnoredDotenv, type CommandContext } from './context.js';
import { warn } from './output.js';

export { readSecrets, requireGrant } from '../sync/profile-session.js';
export type { Grant, ProfileSession, ResolvedSecrets } from '../sync/profile-session.js';

export function openSession(context: CommandContext, name = context.settings.values.profile): Promise<ProfileSession> {
  return openProfileSession({
    inputs: context.inputs,
    name,
    openSecretStore: (options) => context.factory.secretStore(options),
    ...(context.endpointOverride ? { endpointOverride: true } : {}),
    ...(context.recordsEndpoints ? { recordsEndpoints: true } : {}),
    onNotice: sessionNotices(context),
  });
}

/** Where a session's notices go in a command: stderr, never stdout (which `token` and `--json` keep clean). */
function sessionNotices(context: CommandContext): (notice: SessionNotice) => void {
  return (notice) => {
    switch (notice.kind) {
      case 'warning':
        warn(context.io, notice.message);
        break;
      case 'recovery':
        context.io.stderr.write(`syncauth: ${notice.message}\n`);
        break;
      case 'ignored-dotenv':
        noteIgnoredDotenv(context, notice.ignored);
        break;
      case 'note':
        context.io.stderr.write(`note: ${notice.message}\n`);
        break;
    }
  };
}
