// Where notices go, checked before anything is sent: each URL https, or http only to this machine (a receiver
// on loopback, a test), without a user name or password. A URL is named in messages and logs only by its
// origin: the path of a Slack incoming webhook is its secret.
import { absorbed, ValidationError, type FieldIssue } from '../errors.js';
import { parseUrl } from '../net/http.js';
import { isLoopback } from '../net/proxy.js';
import { NOTIFY_FORMATS, type NotifyFormat } from './payload.js';
import { parseNotifySecret, SECRET_VARIABLE, targetKey } from './signing.js';

export interface NotifyTarget {
  url: URL;
  /** Digest naming the URL in the outbox. */
  key: string;
}

export interface NotifySettings {
  targets: NotifyTarget[];
  format: NotifyFormat;
  /** The HMAC key; absent only for an unsigned Slack target. */
  key: Buffer | undefined;
}

/** The URLs of a comma-separated list (SYNCAUTH_NOTIFY_URL) and of repeated flags, in order, each once. */
export function splitUrls(values: readonly string[]): string[] {
  return [...new Set(values.flatMap((value) => value.split(',')).map((value) => value.trim()).filter((value) => value !== ''))];
}

export function parseNotifyUrl(raw: string, field: string): NotifyTarget {
  const url = parseUrl(raw.trim(), ['https:', 'http:']);
  const issue = (message: string): ValidationError => new ValidationError([{ field, message }]);
  if (url === 'not_a_url') throw issue('must be an absolute URL, like https://hooks.example.com/syncauth');
  if (url === 'wrong_scheme') throw issue('must be an https URL (http only to this machine)');
  if (url === 'has_credentials') throw issue('must not carry a user name or password');
  if (url.protocol === 'http:' && !isLoopback(url)) throw issue('must be https: plain http is allowed only to this machine (127.0.0.1, ::1, localhost), since notices carry a re-authorization link');
  if (url.hash) throw issue('must not contain a fragment');
  return { url, key: targetKey(url.href) };
}

/**
 * Every notify setting checked together, every problem named at once; nothing is sent or written before.
 * A secret is required for the standard format; Slack's incoming webhooks check nothing, so there it is optional.
 */
export function resolveNotifySettings(input: { urls: readonly string[]; urlField: string; format?: string; formatField?: string; secret?: string; secretField?: string }): NotifySettings {
  const issues: FieldIssue[] = [];
  const targets: NotifyTarget[] = [];
  for (const raw of splitUrls(input.urls)) {
    const target = absorbed(issues, () => parseNotifyUrl(raw, input.urlField));
    if (target) targets.push(target);
  }
  const format = (input.format ?? 'standard').trim() as NotifyFormat;
  if (!NOTIFY_FORMATS.includes(format)) issues.push({ field: input.formatField ?? '--notify-format', message: `must be one of: ${NOTIFY_FORMATS.join(', ')}` });
  let key: Buffer | undefined;
  const secretField = input.secretField ?? SECRET_VARIABLE;
  if (input.secret !== undefined && input.secret.trim() !== '') {
    const secret = input.secret;
    key = absorbed(issues, () => parseNotifySecret(secret, secretField));
  } else if (targets.length > 0 && format === 'standard') {
    issues.push({ field: secretField, message: `is required with ${input.urlField}: notices are signed (set it to whsec_ and the base64 of at least 16 random bytes, e.g. \`echo whsec_$(openssl rand -base64 32)\`)` });
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return { targets, format: NOTIFY_FORMATS.includes(format) ? format : 'standard', key };
}
