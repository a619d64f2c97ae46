// The environment `syncauth exec` hands its child: the parent's, less everything that is or may be a secret,
// plus the access token and its expiry. The child never sees the app key or secret, the refresh token, the
// service API key or the store key, under their own names or any other.
import { ENDPOINT_OVERRIDE_ENV, SECRET_SETTINGS, SETTINGS, type SettingName } from '../config.js';
import { ValidationError } from '../errors.js';
import { redact } from '../redact.js';

export const DEFAULT_TOKEN_ENV = 'DROPBOX_ACCESS_TOKEN';
export const EXPIRY_ENV_SUFFIX = '_EXPIRES_AT';

const SYNCAUTH_PREFIX = 'SYNCAUTH_';
const MIN_CONTAINED_LENGTH = 8;

// The syncauth variables a child may keep: settings that never hold a secret (so a child can run
// `syncauth token` against the same profile). Any other SYNCAUTH_* variable is dropped, known or not.
const KEPT_SYNCAUTH_NAMES: ReadonlySet<string> = new Set([
  ...(Object.keys(SETTINGS) as SettingName[]).filter((name) => !SECRET_SETTINGS.includes(name)).map((name) => SETTINGS[name].env),
  ENDPOINT_OVERRIDE_ENV,
]);

/** Checks a variable name given on the command line: the token's, and with the suffix its expiry's. */
export function checkEnvName(raw: string, field: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(raw)) {
    throw new ValidationError([{ field, message: 'must be an environment variable name: letters, digits and _, not starting with a digit' }]);
  }
  if (raw.toUpperCase().startsWith(SYNCAUTH_PREFIX)) {
    throw new ValidationError([{ field, message: `must not start with ${SYNCAUTH_PREFIX}: those names belong to syncauth's own settings` }]);
  }
  return raw;
}

/** RFC 3339 in UTC, whole seconds, rounded down so that it never promises more life than the token has. */
export function rfc3339(epochMs: number): string {
  return new Date(Math.floor(epochMs / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export interface ChildToken {
  accessToken: string;
  expiresAt: number;
}

/**
 * `base` without any variable that could hand the child a secret, then the token variables. A variable goes
 * when its name is a SYNCAUTH_* one not known to be harmless, when its value is one of `secrets` (whatever its
 * name), or when its value holds a secret this process has read in any of the forms redaction knows (raw,
 * URL- or form-encoded, JSON-escaped, base64, the HTTP Basic pair): `AUTH=Basic …` or a config blob with the
 * refresh token inside leaks it as surely as SYNCAUTH_REFRESH_TOKEN does.
 */
export function childEnvironment(
  base: NodeJS.ProcessEnv,
  secrets: Iterable<string | undefined>,
  envName: string,
  token: ChildToken,
): Record<string, string> {
  const exact = new Set<string>();
  for (const secret of secrets) {
    const value = secret?.trim();
    if (value) exact.add(value);
  }
  // Containment only for values long enough to be a real secret: a short one would match ordinary text (PATH).
  const contained = [...exact].filter((value) => value.length >= MIN_CONTAINED_LENGTH);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined) continue;
    if (name.toUpperCase().startsWith(SYNCAUTH_PREFIX) && !KEPT_SYNCAUTH_NAMES.has(name)) continue;
    if (exact.has(value) || exact.has(value.trim()) || redact(value, contained) !== value) continue;
    env[name] = value;
  }
  env[envName] = token.accessToken;
  env[`${envName}${EXPIRY_ENV_SUFFIX}`] = rfc3339(token.expiresAt);
  return env;
}
