// `syncauth authorize`: only the OAuth flow, on a machine with a browser. It prints the refresh token so it
// can be handed to a headless host (as SYNCAUTH_REFRESH_TOKEN) or a secret store; nothing is stored here.
import { ValidationError, type FieldIssue } from '../../errors.js';
import { authorizeInteractively, dropboxCredentialIssues } from '../authorization.js';
import type { CommandContext } from '../context.js';
import { printJson } from '../output.js';

export async function authorize(context: CommandContext, options: { browser?: boolean; open?: boolean; timeout?: string }): Promise<void> {
  const v = context.settings.values;
  const prompter = context.factory.prompter;
  const interactive = prompter.interactive(context.stdin);
  const issues: FieldIssue[] = [];
  const timeoutSeconds = Number(options.timeout ?? '300');
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1) issues.push({ field: '--timeout', message: 'must be whole seconds, at least 1' });
  if (!v.appKey && !interactive) issues.push({ field: 'SYNCAUTH_APP_KEY', message: 'is required' });
  if (!v.appSecret && !interactive) issues.push({ field: 'SYNCAUTH_APP_SECRET', message: 'is required' });
  issues.push(...dropboxCredentialIssues({ appKey: v.appKey, appSecret: v.appSecret }));
  if (issues.length) throw new ValidationError(issues);
  const appKey = v.appKey ?? (await prompter.secret('Dropbox app key (hidden)'));
  const appSecret = v.appSecret ?? (await prompter.secret('Dropbox app secret (hidden)'));
  const tokens = await authorizeInteractively({
    settings: v, appKey, appSecret, paste: options.browser === false, openBrowser: options.open !== false,
    timeoutMs: timeoutSeconds * 1000, io: context.io, stdin: context.stdin, signal: context.factory.signals.interrupted, prompter,
  });
  context.io.stderr.write(
    '\nThe refresh token follows on stdout. It is a secret that does not expire: hand it to the other host as\n' +
      'SYNCAUTH_REFRESH_TOKEN (with the app key and secret) and keep it out of shell history and logs.\n\n',
  );
  if (context.json) {
    printJson(context.io, { refresh_token: tokens.refreshToken, scopes: tokens.scopes, account_id: tokens.accountId ?? null });
  } else {
    context.io.stdout.write(`${tokens.refreshToken}\n`);
  }
}
