// The environment `syncauth exec` hands its child: the parent's (or with --clean-env only PATH, HOME, LANG, TZ
// and the --pass-env names), less everything that is or may be a secret, plus the access token and its expiry.
// The child never sees the app key or secret, the refresh token, the service API key or the store key, under
// their own names or any other, in any of the encodings below, nor inside encodings of encodings.
import { ENDPOINT_OVERRIDE_ENV, SECRET_SETTINGS, SETTINGS, type SettingName } from '../config.js';
import { ValidationError } from '../errors.js';
import { redact } from '../redact.js';

export const DEFAULT_TOKEN_ENV = 'DROPBOX_ACCESS_TOKEN';
export const EXPIRY_ENV_SUFFIX = '_EXPIRES_AT';

const SYNCAUTH_PREFIX = 'SYNCAUTH_';
const MIN_CONTAINED_LENGTH = 8;

/** What --clean-env keeps of the parent's environment, besides the --pass-env names. */
export const CLEAN_ENV_NAMES: readonly string[] = ['PATH', 'HOME', 'LANG', 'TZ'];

/** How many encodings deep a value is opened: base64 of a JSON blob holding a URL-encoded secret is 2. */
const MAX_DEPTH = 4;
/** Decoded texts looked at per variable at most; what lies deeper is not looked at. */
const MAX_TEXTS = 256;
/** Runs shorter than this cannot hold an 8-character secret once decoded (base64: 12 characters, hex: 16). */
const BASE64_RUN = /[A-Za-z0-9+/_-]{12,}={0,2}/g;
const HEX_RUN = /[0-9A-Fa-f]{16,}/g;
const PERCENT_RUN = /(?:%[0-9A-Fa-f]{2})+/g;

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

/** Checks a --pass-env name: a variable name, and no SYNCAUTH_* variable that holds or may hold a secret. */
export function checkPassEnvName(raw: string, field: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(raw)) {
    throw new ValidationError([{ field, message: `${JSON.stringify(raw)} must be an environment variable name: letters, digits and _, not starting with a digit` }]);
  }
  if (raw.toUpperCase().startsWith(SYNCAUTH_PREFIX) && !KEPT_SYNCAUTH_NAMES.has(raw)) {
    throw new ValidationError([{ field, message: `${raw} is not passed: it is a syncauth setting that is or may be a secret` }]);
  }
  return raw;
}

/**
 * Text bytes of `bytes`: what a decoding that went wrong (another alignment, or not an encoding at all) gives
 * is mostly control characters and invalid UTF-8, and is not opened further.
 */
function asText(bytes: Buffer): string | undefined {
  if (bytes.length < MIN_CONTAINED_LENGTH) return undefined;
  const text = bytes.toString('utf8');
  let readable = 0;
  let all = 0;
  for (const char of text) {
    all += 1;
    if (/[\t\n\r\x20-\x7e]/.test(char) || (char >= '\u00a0' && char !== '\ufffd')) readable += 1;
  }
  return readable >= all * 0.9 ? text : undefined;
}

/** The texts `text` may be an encoding of, one layer down: percent-decoded, and each base64(url) or hex run decoded. */
function decodings(text: string): string[] {
  const found: string[] = [];
  const percent = text.replace(/\+/g, ' ').replace(PERCENT_RUN, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
  if (percent !== text) found.push(percent);
  for (const [run] of text.matchAll(BASE64_RUN)) {
    // Each of the four alignments, for a run that begins with characters that are no part of the encoding.
    for (let offset = 0; offset < 4; offset += 1) {
      const decoded = asText(Buffer.from(run.slice(offset), 'base64'));
      if (decoded !== undefined) found.push(decoded);
    }
  }
  for (const [run] of text.matchAll(HEX_RUN)) {
    for (let offset = 0; offset < 2; offset += 1) {
      const decoded = asText(Buffer.from(run.slice(offset), 'hex'));
      if (decoded !== undefined) found.push(decoded);
    }
  }
  return found;
}

/**
 * Whether `value`, or any text it decodes to through up to MAX_DEPTH layers of percent-encoding, base64,
 * base64url or hex (either case), holds a secret in a form redaction knows (src/redact.ts: raw, URL- or
 * form-encoded, JSON-escaped, base64, base64url, hex, the HTTP Basic pair): `Basic base64("api:KEY")`,
 * a base64 config blob with the refresh token inside, base64 of base64.
 */
export function holdsSecret(value: string, contained: readonly string[]): boolean {
  const seen = new Set<string>([value]);
  let layer = [value];
  for (let depth = 0; depth <= MAX_DEPTH && layer.length > 0; depth += 1) {
    const next: string[] = [];
    for (const text of layer) {
      if (redact(text, contained) !== text) return true;
      if (depth === MAX_DEPTH) continue;
      for (const decoded of decodings(text)) {
        if (seen.size >= MAX_TEXTS || seen.has(decoded)) continue;
        seen.add(decoded);
        next.push(decoded);
      }
    }
    layer = next;
  }
  return false;
}

export interface ChildToken {
  accessToken: string;
  expiresAt: number;
}

export interface ChildEnvOptions {
  /** --clean-env: only PATH, HOME, LANG, TZ and `pass` are taken from `base`. */
  clean?: boolean;
  /** --pass-env names (with `clean`). */
  pass?: readonly string[];
  /** Told the name of a `pass` variable left out because it holds a secret. */
  withheld?: (name: string) => void;
}

/**
 * `base` without any variable that could hand the child a secret, then the token variables (see
 * `withoutSecrets`).
 */
export function childEnvironment(
  base: NodeJS.ProcessEnv,
  secrets: Iterable<string | undefined>,
  envName: string,
  token: ChildToken,
  options: ChildEnvOptions = {},
): Record<string, string> {
  const env = withoutSecrets(base, secrets, options);
  env[envName] = token.accessToken;
  env[`${envName}${EXPIRY_ENV_SUFFIX}`] = rfc3339(token.expiresAt);
  return env;
}

/**
 * `base` without any variable that could hand a child a secret. A variable goes when its name is a SYNCAUTH_*
 * one not known to be harmless, when its value is one of `secrets` (whatever its name), or when its value holds
 * a secret this process has read (holdsSecret: every form redaction knows, also inside layers of encoding):
 * `AUTH=Basic …` or a config blob with the refresh token inside leaks it as surely as SYNCAUTH_REFRESH_TOKEN
 * does. With `clean`, only the names it keeps are looked at.
 */
export function withoutSecrets(base: NodeJS.ProcessEnv, secrets: Iterable<string | undefined>, options: ChildEnvOptions = {}): Record<string, string> {
  const exact = new Set<string>();
  for (const secret of secrets) {
    const value = secret?.trim();
    if (value) exact.add(value);
  }
  // Containment only for values long enough to be a real secret: a short one would match ordinary text (PATH).
  const contained = [...exact].filter((value) => value.length >= MIN_CONTAINED_LENGTH);
  const pass = new Set(options.pass ?? []);
  const kept = options.clean ? new Set([...CLEAN_ENV_NAMES, ...pass]) : undefined;
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(base)) {
    if (value === undefined || (kept && !kept.has(name))) continue;
    if (name.toUpperCase().startsWith(SYNCAUTH_PREFIX) && !KEPT_SYNCAUTH_NAMES.has(name)) continue;
    if (exact.has(value) || exact.has(value.trim()) || holdsSecret(value, contained)) {
      if (pass.has(name)) options.withheld?.(name);
      continue;
    }
    env[name] = value;
  }
  return env;
}
