// Secrets from the environment, for containers and CI: the same four variables serve every profile, and
// nothing can be written back, so a change has to be made where the environment is defined.
import { assertProfileName } from '../profile/name.js';
import { registerAppCredentials, registerSecrets } from '../redact.js';
import { SecretStoreError } from './errors.js';
import { SECRET_ENV, SECRET_NAMES } from './types.js';
import type { ProfileSecrets, SecretStore } from './types.js';

export function openEnvSecretStore(env: NodeJS.ProcessEnv): SecretStore {
  const readOnly = (action: string): SecretStoreError =>
    new SecretStoreError(
      'STORE_READ_ONLY',
      `cannot ${action}: with SYNCAUTH_STORE=env the secrets come from the environment ` +
        `(${SECRET_NAMES.map((name) => SECRET_ENV[name]).join(', ')}) and syncauth cannot change them. ` +
        'Change those variables where they are defined, or choose SYNCAUTH_STORE=keychain or ' +
        'SYNCAUTH_STORE=file (with SYNCAUTH_STORE_KEY) to let syncauth store secrets.',
    );

  return {
    kind: 'env',
    writable: false,

    async get(profile) {
      assertProfileName(profile);
      const secrets: ProfileSecrets = {};
      for (const name of SECRET_NAMES) {
        const value = env[SECRET_ENV[name]]?.trim();
        if (value) secrets[name] = value;
      }
      registerSecrets(secrets.refresh_token, secrets.api_key);
      registerAppCredentials(secrets.app_key, secrets.app_secret);
      return secrets;
    },

    async set(profile) {
      assertProfileName(profile);
      throw readOnly(`store secrets for profile "${profile}"`);
    },

    async delete(profile) {
      assertProfileName(profile);
      throw readOnly(`delete the secrets of profile "${profile}"`);
    },

    // The environment is not tied to any profile name, so there is nothing to enumerate; callers list
    // profiles from their state instead.
    async listProfiles() {
      return [];
    },
  };
}
