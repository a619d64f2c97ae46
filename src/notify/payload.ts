// What a notice says on the wire: the Standard Webhooks payload shape (`type`, `timestamp`, `data`), or for
// `--notify-format slack` a Slack incoming-webhook body (`text`, link previews off). Built only from names,
// ids, reasons and at most a re-authorization link: never a token, grant or key.
import type { NoticeType } from './notice.js';

export const NOTIFY_FORMATS = ['standard', 'slack'] as const;
export type NotifyFormat = (typeof NOTIFY_FORMATS)[number];

/** The event `syncauth notify test` sends. */
export const TEST_TYPE = 'syncauth.test';

export interface NoticeData {
  profile: string;
  connectorId?: string;
  folder?: string;
  reason: string;
  errorCode?: string;
  /** The re-authorization link (profile.reauthorization_needed only, when a link minter is configured). */
  link?: string;
  linkExpiresAt?: string;
  /** Which ask of profile.reauthorization_needed this is: 1 on the transition, 2 and 3 the reminders. */
  ask?: number;
}

export interface NoticePayload {
  type: NoticeType | typeof TEST_TYPE;
  /** When the transition happened, ISO 8601. */
  timestamp: string;
  data: NoticeData;
}

const HEADLINES: Record<NoticePayload['type'], (p: NoticeData) => string> = {
  'profile.reauthorization_needed': (d) => `profile "${d.profile}" needs re-authorization${d.ask && d.ask > 1 ? ` (reminder ${d.ask - 1} of 2)` : ''}`,
  'profile.reauthorized': (d) => `profile "${d.profile}" is authorized again`,
  'connector.failing': (d) => `the connector of profile "${d.profile}" has been failing to update`,
  'token.unavailable': (d) => `profile "${d.profile}" has had no live access token for longer than the renewal margin`,
  'syncauth.test': () => 'test notice from syncauth: this URL receives its notices',
};

/** Slack's three characters with meaning in `text`. */
function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** A link as Slack's `<url|label>` takes it: the characters that would end it percent-encoded. */
function slackLink(link: string): string {
  let href: string;
  try {
    href = new URL(link).href;
  } catch {
    href = link;
  }
  return href.replace(/</g, '%3C').replace(/>/g, '%3E').replace(/\|/g, '%7C');
}

export function slackText(payload: NoticePayload): string {
  const d = payload.data;
  const lines = [`syncauth: ${slackEscape(HEADLINES[payload.type](d))}`];
  const where = [d.folder ? `folder ${d.folder}` : undefined, d.connectorId ? `connector ${d.connectorId}` : undefined].filter(Boolean);
  if (where.length > 0) lines.push(slackEscape(where.join(', ')));
  if (payload.type !== TEST_TYPE) lines.push(`Why: ${slackEscape(d.reason)}${d.errorCode ? ` (${slackEscape(d.errorCode)})` : ''}`);
  if (d.link) lines.push(`Re-authorize: <${slackLink(d.link)}|open the re-authorization page>${d.linkExpiresAt ? ` (link valid until ${d.linkExpiresAt})` : ''}`);
  lines.push(`At ${payload.timestamp}`);
  return lines.join('\n');
}

/** The request body of `payload` in `format`: the same bytes at every attempt. */
export function renderBody(payload: NoticePayload, format: NotifyFormat): string {
  if (format === 'slack') return JSON.stringify({ text: slackText(payload), unfurl_links: false, unfurl_media: false });
  return JSON.stringify(payload);
}
