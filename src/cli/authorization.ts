// The interactive half of OAuth that `setup` and `authorize` share: send the person to Dropbox's authorize
// page (loopback callback, or a code to paste), then exchange the code for tokens.
import { ExitCode, SyncauthError, type FieldIssue } from '../errors.js';
import type { Settings } from '../config.js';
import {
  createAuthorizationRequest, exchangeCode, looksLikeAccessToken, startLoopbackServer, type TokenSet,
} from '../oauth/index.js';
import type { Io } from './output.js';
import { askText, isInteractive, readLine } from './prompt.js';

/**
 * Malformed Dropbox credentials, found before the browser step: the token endpoint would refuse them only
 * after the person clicked Allow, wasting the grant. Values are never echoed.
 */
export function dropboxCredentialIssues(values: { appKey?: string | undefined; appSecret?: string | undefined; refreshToken?: string | undefined }): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const credentials: [string, string | undefined, boolean][] = [
    ['SYNCAUTH_APP_KEY', values.appKey, true], ['SYNCAUTH_APP_SECRET', values.appSecret, false], ['SYNCAUTH_REFRESH_TOKEN', values.refreshToken, false],
  ];
  for (const [field, value, isAppKey] of credentials) {
    if (value && !/^[\x21-\x7e]+$/.test(value)) issues.push({ field, message: 'contains spaces or characters a Dropbox credential never has' });
    else if (value && isAppKey && value.includes(':')) issues.push({ field, message: 'contains ":", which a Dropbox app key never has' });
  }
  return issues;
}

export interface AuthorizationOptions {
  settings: Settings;
  appKey: string;
  appSecret: string;
  /** Paste mode: no redirect URI; Dropbox shows the code and the person pastes it here. */
  paste: boolean;
  /** Open the browser (loopback mode); the URL is printed either way. */
  openBrowser: boolean;
  timeoutMs: number;
  io: Io;
  stdin: NodeJS.ReadableStream;
  /** Stops every wait (the browser callback, the pasted code, the code exchange); pass `interruptSignal`. */
  signal: AbortSignal;
  /** How long to wait for the browser callback before saying what usually goes wrong (loopback mode); 30 s by default. */
  hintAfterMs?: number;
}

const DEFAULT_HINT_AFTER_MS = 30_000;

/** Why a browser usually never comes back: Allow was not reached, or Dropbox refused the redirect. */
function stillWaitingHint(redirectUri: string, waitedMs: number): string {
  return [
    `\nStill no answer from the browser after ${Math.round(waitedMs / 1000)} s. What usually goes wrong:`,
    '  - the browser is signed in to a different Dropbox account than the one to connect (the app folder is in that account): sign out at dropbox.com, then open the URL again;',
    '  - the app key is of a different app than the one you set up in the App Console: Dropbox then shows an error page instead of Allow;',
    `  - the redirect URI is not registered: App Console, Settings tab, OAuth 2, Redirect URIs: add exactly ${redirectUri} (localhost and 127.0.0.1 are different URIs).`,
    '',
  ].join('\n');
}

export async function authorizeInteractively(options: AuthorizationOptions): Promise<TokenSet> {
  const { settings, io, signal } = options;
  const app = { appKey: options.appKey, appSecret: options.appSecret };
  if (options.paste) {
    const request = createAuthorizationRequest({ authorizeUrl: settings.authorizeUrl, appKey: options.appKey });
    io.stderr.write(`\nOpen this URL in a browser, sign in to Dropbox and click Allow:\n\n  ${request.url}\n\n`);
    io.stderr.write('Dropbox then shows an access code. Paste it here.\n');
    const code = isInteractive(options.stdin)
      ? await askText('Access code', { validate: (v) => (v ? undefined : 'paste the code Dropbox shows after Allow') })
      : await readLine(options.stdin, signal);
    if (!code) {
      throw new SyncauthError('SYNCAUTH_NO_CODE', 'no access code was given', {
        exitCode: ExitCode.usage,
        hint: 'paste the code Dropbox shows after you click Allow (pipe it on stdin when there is no terminal)',
      });
    }
    if (looksLikeAccessToken(code)) {
      throw new SyncauthError('SYNCAUTH_TOKEN_NOT_CODE', 'that looks like an access token (it starts with "sl."), not the access code', {
        exitCode: ExitCode.usage,
        hint: 'paste the short code shown on the "Access code generated" page after Allow, not a token from the App Console',
      });
    }
    return exchangeCode({ tokenUrl: settings.tokenUrl, app, code, codeVerifier: request.codeVerifier, signal });
  }

  const request = createAuthorizationRequest({ authorizeUrl: settings.authorizeUrl, appKey: options.appKey, redirectUri: settings.redirectUri });
  const server = await startLoopbackServer({ redirectUri: settings.redirectUri, state: request.state, timeoutMs: options.timeoutMs, signal });
  let hint: NodeJS.Timeout | undefined;
  try {
    io.stderr.write(`\nOpen this URL in a browser, sign in to Dropbox and click Allow:\n\n  ${request.url}\n\n`);
    io.stderr.write(`Waiting for Dropbox to send the browser back to ${settings.redirectUri} (up to ${Math.round(options.timeoutMs / 1000)} s)…\n`);
    if (options.openBrowser) {
      try {
        const { default: open } = await import('open');
        // On a host without a browser this resolves all the same, hence the URL above.
        await open(request.url);
      } catch {
        io.stderr.write('Could not start a browser; open the URL above yourself.\n');
      }
    }
    const hintAfterMs = options.hintAfterMs ?? DEFAULT_HINT_AFTER_MS;
    hint = setTimeout(() => io.stderr.write(stillWaitingHint(settings.redirectUri, hintAfterMs)), hintAfterMs);
    const { code } = await server.result;
    // The browser came back: a slow code exchange is no reason for the hint.
    clearTimeout(hint);
    return await exchangeCode({ tokenUrl: settings.tokenUrl, app, code, redirectUri: settings.redirectUri, codeVerifier: request.codeVerifier, signal });
  } finally {
    clearTimeout(hint);
    await server.close();
  }
}
