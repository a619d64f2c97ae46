// Notices when a person is needed: the settings the daemon and `syncauth notify test` share (--notify-url,
// repeatable, or SYNCAUTH_NOTIFY_URL comma-separated; --notify-format; SYNCAUTH_NOTIFY_SECRET from the
// environment or a .env, never a flag), all checked before anything is sent, and `notify test` itself: one
// signed test event to each URL, and what each answered.
import { SETTINGS } from '../../config.js';
import { ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../../errors.js';
import { SECRET_VARIABLE } from '../../notify/signing.js';
import { subkey } from '../../record-keys.js';
import type { Logger } from '../../log.js';
import { FileOutbox, Notifier, RedisOutbox, resolveNotifySettings, sendTestNotices, type NotifierOptions, type NotifySettings, type OutboxStore } from '../../notify/index.js';
import type { CommandContext } from '../context.js';

export interface NotifyFlags {
  /** Repeated --notify-url. */
  notifyUrl?: string[];
}

/**
 * The notify settings of a command, or undefined when no URL is set. Flags win over SYNCAUTH_NOTIFY_URL. A bad
 * URL, format or secret is a ValidationError naming the flag or variable (exit 2), before anything is sent.
 */
export function notifySettingsOf(context: CommandContext, flags: NotifyFlags, formatField?: string, urlField?: string): NotifySettings | undefined {
  const v = context.settings.values;
  const fromFlags = (flags.notifyUrl ?? []).length > 0;
  const urls = fromFlags ? (flags.notifyUrl as string[]) : v.notifyUrl ? [v.notifyUrl] : [];
  if (urls.length === 0) return undefined;
  const settings = resolveNotifySettings({
    urls,
    urlField: urlField ?? (fromFlags ? '--notify-url' : 'SYNCAUTH_NOTIFY_URL'),
    format: v.notifyFormat,
    formatField: formatField ?? (context.settings.sources.notifyFormat === 'flag' ? '--notify-format' : 'SYNCAUTH_NOTIFY_FORMAT'),
    ...(v.notifySecret !== undefined ? { secret: v.notifySecret } : {}),
  });
  return settings.targets.length > 0 ? settings : undefined;
}

/**
 * A notice's link waits in `notices.json` sealed under a subkey of SYNCAUTH_NOTIFY_SECRET's key, which lives in the
 * environment, never in the config dir. Only an unsigned Slack target has no secret: with the page on and no
 * Redis, the secret is then required (exit 2 naming it), since the notices would carry links.
 */
export function outboxKeyIssue(settings: NotifySettings | undefined, context: CommandContext): FieldIssue[] {
  const v = context.settings.values;
  if (!settings || settings.key || v.redisUrl || !v.reauthListen) return [];
  return [{ field: SECRET_VARIABLE, message: 'is required with the re-authorization page and --notify-url without --redis-url, Slack\'s format included: the link a notice carries waits in notices.json sealed under a key derived from it (whsec_ and the base64 of at least 16 random bytes)' }];
}

/** The daemon's notifier: its outbox in Redis with replicas, else in the config dir; delivering from now on. */
export async function startNotifier(
  settings: NotifySettings,
  options: { configDir: string; redisUrl?: string | undefined; redisWhere?: string; grantKey?: Buffer; log: Logger } & Pick<NotifierOptions, 'isResolved' | 'linkFor'>,
): Promise<Notifier> {
  // What waits in the outbox is sealed under a key kept elsewhere: in Redis, a subkey of SYNCAUTH_GRANT_KEY (required
  // with --redis-url and --notify-url); in the config dir, a subkey of SYNCAUTH_NOTIFY_SECRET's key (see outboxKeyIssue).
  if (options.redisUrl && !options.grantKey) throw new ValidationError([{ field: SETTINGS.grantKey.env, message: 'is required with --redis-url and --notify-url' }]);
  const store: OutboxStore = options.redisUrl
    ? await RedisOutbox.open({ url: options.redisUrl, logger: options.log, grantKey: options.grantKey as Buffer }, options.redisWhere ?? 'Redis')
    : await FileOutbox.open(options.configDir, options.log, settings.key ? subkey(settings.key, 'outbox-file') : undefined);
  const notifier = new Notifier({
    ...settings,
    store,
    log: options.log,
    ...(options.isResolved ? { isResolved: options.isResolved } : {}),
    // The re-authorization page mints the link each ask carries, when it is on.
    ...(options.linkFor ? { linkFor: options.linkFor } : {}),
  });
  return notifier.start();
}

/** `syncauth notify test`. */
export async function notifyTest(context: CommandContext, flags: NotifyFlags = {}): Promise<void> {
  const settings = notifySettingsOf(context, flags);
  if (!settings) {
    throw new SyncauthError('SYNCAUTH_NO_NOTIFY_URL', 'there is no URL to send a test notice to', {
      kind: 'bad_input',
      hint: 'give --notify-url URL (repeatable) or set SYNCAUTH_NOTIFY_URL (comma-separated), with SYNCAUTH_NOTIFY_SECRET for the signature',
    });
  }
  const results = await sendTestNotices(settings);
  const lines = results.map(({ target, result }) => {
    const answer = result.status !== undefined ? `HTTP ${result.status}` : `no answer: ${result.error ?? 'unknown error'}`;
    return { origin: target.url.origin, ok: result.outcome === 'delivered', answer };
  });
  if (context.json) {
    context.io.stdout.write(`${JSON.stringify({ format: settings.format, signed: settings.key !== undefined, targets: lines })}\n`);
  } else {
    for (const line of lines) context.io.stdout.write(`${line.ok ? 'ok  ' : 'FAIL'} ${line.origin}: ${line.answer}\n`);
  }
  const failed = results.filter(({ result }) => result.outcome !== 'delivered');
  if (failed.length > 0) {
    const refused = failed.some(({ result }) => result.status === 401 || result.status === 403);
    throw new SyncauthError('SYNCAUTH_NOTIFY_FAILED', `${failed.length} of ${lines.length} notice URL${lines.length === 1 ? '' : 's'} did not accept the test notice`, {
      exitCode: ExitCode.error,
      hint: refused
        ? 'a 401 or 403 usually means the receiver checks the signature with another secret than SYNCAUTH_NOTIFY_SECRET'
        : 'check that each receiver runs and is reachable from here (a proxy is used when HTTPS_PROXY is set)',
    });
  }
}
