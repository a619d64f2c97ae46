// A command's view of one profile (see sync/profile-session.ts, where it is opened): the command's context
// adapted to the session's plain options, and its notices written to the command's stderr.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { SETTINGS } from '../config.js';
import { SECRET_FILE_NAME, type OpenSecretStoreOptions, type SecretStore } from '../credentials/index.js';
import { registerSecrets } from '../redact.js';
import { openProfileSession, type ProfileSession, type SessionNotice } from '../sync/profile-session.js';
import { noteIgnoredDotenv, type CommandContext } from './context.js';
import { warn } from './output.js';

export { readSecrets, requireGrant } from '../sync/profile-session.js';
export type { Grant, ProfileSession, ResolvedSecrets } from '../sync/profile-session.js';

/**
 * `askStoreKey: false` for a command that only reports (doctor): a missing key is a finding, not a question.
 * `existing: true` for a command that uses a profile already made: one that exists nowhere is refused by name.
 */
export function openSession(context: CommandContext, name = context.settings.values.profile, options: { askStoreKey?: boolean; existing?: boolean } = {}): Promise<ProfileSession> {
  return openProfileSession({
    inputs: context.inputs,
    name,
    ...(options.existing ? { existing: true } : {}),
    openSecretStore: (store) => (options.askStoreKey === false ? context.factory.secretStore(store) : openSecretStore(context, store)),
    ...(context.endpointOverride ? { endpointOverride: true } : {}),
    ...(context.recordsEndpoints ? { recordsEndpoints: true } : {}),
    onNotice: sessionNotices(context),
  });
}

// The key typed for a command, asked once however many profiles it opens (a daemon's, each reload).
const typedKeys = new WeakMap<CommandContext, Promise<string | undefined>>();

/**
 * The profile's secret store. An encrypted file store that exists but has no key (SYNCAUTH_STORE_KEY unset) is
 * opened with a key asked for at a terminal, hidden, so that it need not be typed into a shell's history;
 * without a terminal nothing is asked and the store's own error names SYNCAUTH_STORE_KEY.
 */
async function openSecretStore(context: CommandContext, options: OpenSecretStoreOptions): Promise<SecretStore> {
  const hasKey = Boolean(options.storeKey?.trim() || options.env?.[SETTINGS.storeKey.env]?.trim());
  const file = path.join(options.configDir, SECRET_FILE_NAME);
  const { prompter } = context.factory;
  if (options.kind === 'file' && !hasKey && existsSync(file) && prompter.interactive(context.stdin)) {
    let typed = typedKeys.get(context);
    if (!typed) {
      typed = prompter.secret(`The key of the encrypted file store ${file} (hidden; or set ${SETTINGS.storeKey.env})`).then((key) => {
        registerSecrets(key);
        return key;
      });
      typedKeys.set(context, typed);
    }
    const storeKey = await typed;
    if (storeKey) return context.factory.secretStore({ ...options, storeKey });
  }
  return context.factory.secretStore(options);
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
