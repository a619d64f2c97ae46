// HTTP helpers every client here needs, written once: reading a Retry-After, taking one header's value, and
// checking a URL a user gave (scheme, no credentials) before anything is sent to it.

/** Retry-After is either delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!raw) return undefined;
  if (/^\d+$/.test(raw)) return Number(raw) * 1000;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The first value of a response header. */
export function headerValue(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export const HTTP_SCHEMES = ['http:', 'https:'] as const;

/** What is wrong with a URL, named without quoting it: a URL may carry a secret. */
export type UrlProblem = 'not_a_url' | 'wrong_scheme' | 'has_credentials';

/**
 * `value` as a URL when it is absolute, of one of `schemes`, and (unless allowed) free of a user name and
 * password, which would travel into logs and messages; otherwise what is wrong with it, for the caller to say
 * in its own words and error.
 */
export function parseUrl(value: string, schemes: readonly string[], options: { credentials?: 'allow' | 'refuse' } = {}): URL | UrlProblem {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not_a_url';
  }
  if (!schemes.includes(url.protocol)) return 'wrong_scheme';
  if ((options.credentials ?? 'refuse') === 'refuse' && (url.username || url.password)) return 'has_credentials';
  return url;
}
