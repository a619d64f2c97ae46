// The interactive half of OAuth that `setup` and `authorize` share: send the person to Dropbox's authorize
// page (loopback callback, or a code to paste), then exchange the code for tokens.
import { createInterface } from 'node:readline';
import { ExitCode, SyncauthError, type FieldIssue } from '../errors.js';
import { howToSet, type Settings } from '../config.js';
import {
  createAuthorizationRequest, exchangeCode, isOAuthError, looksLikeAccessToken, probeAuthorizePage, startLoopbackServer, type TokenSet,
} from '../oauth/index.js';
import { syncauthCommand } from '../profile/name.js';
import { registerAppCredentials } from '../redact.js';
import type { Io } from './output.js';
import type { Prompter } from './factory.js';
import { processPrompter } from './factory.js';

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
  /** Deadline for asking the authorize page about the app key and redirect URI first; 5 s by default. */
  probeTimeoutMs?: number;
  /** A person at a terminal who may be asked again (the app secret when Dropbox refuses it); false by default. */
  interactive?: boolean;
  /** Told the app secret that worked when it is not the one given (typed again after a refusal). */
  onAppSecret?: (appSecret: string) => void;
  /** Who asks the person at the terminal; the process's prompts by default. */
  prompter?: Prompter;
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

/**
 * Asks Dropbox's authorize page about the app key and (loopback mode) the redirect URI before anyone is sent
 * there: it answers an unknown key or an unregistered URI with an error page at once, and a person would
 * otherwise meet that page only after the browser opened. A host that does not answer is no reason to stop:
 * the check is skipped, saying so.
 */
async function checkWithAuthorizePage(options: AuthorizationOptions, redirectUri: string | undefined): Promise<void> {
  const { settings, io } = options;
  const probe = createAuthorizationRequest({ authorizeUrl: settings.authorizeUrl, appKey: options.appKey, ...(redirectUri ? { redirectUri } : {}) });
  const verdict = await probeAuthorizePage(probe.url, { signal: options.signal, timeoutMs: options.probeTimeoutMs ?? 5_000 });
  switch (verdict.kind) {
    case 'unknown-app-key':
      // Not a ValidationError: Dropbox was asked (its page only; nothing was stored or sent to the token endpoint).
      throw new SyncauthError('SYNCAUTH_APP_KEY_UNKNOWN', 'SYNCAUTH_APP_KEY: Dropbox does not know this app key (its authorize page answers "Invalid client_id")', {
        exitCode: ExitCode.usage,
        hint: "copy the App key from the app's Settings tab in the Dropbox App Console (https://www.dropbox.com/developers/apps); the App secret is the other value there",
      });
    case 'unregistered-redirect-uri':
      throw new SyncauthError(
        'SYNCAUTH_REDIRECT_URI_UNREGISTERED',
        `${howToSet('redirectUri')}: is not registered for this app: Dropbox's authorize page answers "Invalid redirect_uri" for ${redirectUri ?? ''}`,
        {
          exitCode: ExitCode.usage,
          hint: `App Console, the app's Settings tab, OAuth 2, Redirect URIs: add exactly ${redirectUri ?? ''} (localhost and 127.0.0.1 are different URIs), or set ${howToSet('redirectUri')} to a URI registered there`,
        },
      );
    case 'unreachable':
      io.stderr.write(`note: could not check the app key with Dropbox beforehand (${verdict.reason} from ${new URL(settings.authorizeUrl).host}); going on.\n`);
      return;
    case 'accepted':
      return;
  }
}

/** Tries of a pasted code in all: a slip of the mouse should not cost the whole setup. */
const CODE_TRIES = 3;
/** Tries of the app secret in all, at a terminal, when Dropbox refuses it at the exchange. */
const SECRET_TRIES = 3;

function noCode(): SyncauthError {
  return new SyncauthError('SYNCAUTH_NO_CODE', 'no access code was given', {
    exitCode: ExitCode.usage,
    hint: 'paste the code Dropbox shows after you click Allow (pipe it on stdin when there is no terminal)',
  });
}

function tokenNotCode(): SyncauthError {
  return new SyncauthError('SYNCAUTH_TOKEN_NOT_CODE', 'that looks like an access token (it starts with "sl."), not the access code', {
    exitCode: ExitCode.usage,
    hint: 'paste the short code shown on the "Access code generated" page after Allow, not a token from the App Console',
  });
}

/**
 * The lines of a non-terminal stdin, one reader for the whole paste phase (a second reader would lose what the
 * first had buffered). Blank lines are skipped. close() lets the process exit although a script holds the
 * pipe open.
 */
function pastedLines(stdin: NodeJS.ReadableStream, signal: AbortSignal): { next(): Promise<string | undefined>; close(): void } {
  const lines = createInterface({ input: stdin, terminal: false });
  const queue: string[] = [];
  let ended = false;
  let wake: (() => void) | undefined;
  lines.on('line', (line) => {
    const trimmed = line.trim();
    if (trimmed) queue.push(trimmed);
    wake?.();
  });
  lines.on('close', () => {
    ended = true;
    wake?.();
  });
  return {
    async next() {
      while (queue.length === 0 && !ended) {
        signal.throwIfAborted();
        await new Promise<void>((resolve, reject) => {
          const onAbort = () => reject(signal.reason as Error);
          signal.addEventListener('abort', onAbort, { once: true });
          wake = () => {
            signal.removeEventListener('abort', onAbort);
            wake = undefined;
            resolve();
          };
        });
      }
      return queue.shift();
    },
    close() {
      lines.close();
      (stdin as { unref?: () => void }).unref?.();
    },
  };
}

/** A SyncauthError that also says how many tries were spent. */
function afterTries(error: SyncauthError, tries: number): SyncauthError {
  return new SyncauthError(error.code, `${error.message}, after ${tries} tries`, { exitCode: error.exitCode, ...(error.hint ? { hint: error.hintSource } : {}), cause: error });
}

/**
 * The code exchange. When Dropbox refuses the app credentials and a person is at the terminal, the app secret
 * is asked for again and the same code exchanged once more: the authorize page already accepted the app key,
 * and a request refused for the client is refused before the code is looked at, so the code is still good
 * (if Dropbox ever consumed it, the retry says the code is spent and to authorize again).
 */
async function exchangeWithSecretRetry(
  options: AuthorizationOptions,
  exchange: (appSecret: string) => Promise<TokenSet>,
  onRefused: (error: SyncauthError) => void,
): Promise<TokenSet> {
  let appSecret = options.appSecret;
  for (let round = 1; ; round++) {
    try {
      const tokens = await exchange(appSecret);
      if (appSecret !== options.appSecret) options.onAppSecret?.(appSecret);
      return tokens;
    } catch (error) {
      if (!isOAuthError(error, 'OAUTH_INVALID_CLIENT') || !options.interactive || round >= SECRET_TRIES) throw error;
      onRefused(error);
      options.io.stderr.write(
        `\n✗ ${error.message}.\n  The app key was accepted, so the app secret is the likely cause: copy it from the app's Settings tab in the ` +
          'App Console (App secret, Show). The code from the browser is kept; no new browser round is needed.\n',
      );
      appSecret = await (options.prompter ?? processPrompter).secret('Dropbox app secret, again (hidden)');
      registerAppCredentials(options.appKey, appSecret);
    }
  }
}

export async function authorizeInteractively(options: AuthorizationOptions): Promise<TokenSet> {
  const { settings, io, signal } = options;
  await checkWithAuthorizePage(options, options.paste ? undefined : settings.redirectUri);
  const appWith = (appSecret: string) => ({ appKey: options.appKey, appSecret });
  if (options.paste) {
    const request = createAuthorizationRequest({ authorizeUrl: settings.authorizeUrl, appKey: options.appKey });
    io.stderr.write(`\nOpen this URL in a browser, sign in to Dropbox and click Allow:\n\n  ${request.url}\n\n`);
    io.stderr.write('Dropbox then shows an access code. Paste it here.\n');
    const prompter = options.prompter ?? processPrompter;
    const atTerminal = prompter.interactive(options.stdin);
    const piped = atTerminal ? undefined : pastedLines(options.stdin, signal);
    try {
      let last: SyncauthError | undefined;
      for (let attempt = 1; attempt <= CODE_TRIES; attempt++) {
        const code = piped
          ? await piped.next()
          : await prompter.text('Access code', { validate: (v) => (v ? undefined : 'paste the code Dropbox shows after Allow') });
        if (!code) throw last ?? noCode();
        try {
          if (looksLikeAccessToken(code)) throw tokenNotCode();
          return await exchangeWithSecretRetry(
            options,
            (appSecret) => exchangeCode({ tokenUrl: settings.tokenUrl, app: appWith(appSecret), code, codeVerifier: request.codeVerifier, signal }),
            () => undefined,
          );
        } catch (error) {
          const badCode = isOAuthError(error, 'OAUTH_INVALID_GRANT') || (error instanceof SyncauthError && error.code === 'SYNCAUTH_TOKEN_NOT_CODE');
          if (!badCode) throw error;
          last = error;
          const left = CODE_TRIES - attempt;
          if (left === 0) throw afterTries(error, CODE_TRIES);
          io.stderr.write(`✗ ${error.message}. Copy the code from the "Access code generated" page again; try again (${left} ${left === 1 ? 'try' : 'tries'} left).\n`);
        }
      }
      throw last ?? noCode();
    } finally {
      piped?.close();
    }
  }

  const request = createAuthorizationRequest({ authorizeUrl: settings.authorizeUrl, appKey: options.appKey, redirectUri: settings.redirectUri });
  const server = await startLoopbackServer({ redirectUri: settings.redirectUri, state: request.state, timeoutMs: options.timeoutMs, signal, holdPage: true, commandLine: syncauthCommand });
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
    // The browser waits for the outcome: its success page appears only with the grant in hand.
    const failed = (error: unknown) => {
      const known = error instanceof SyncauthError ? error : undefined;
      server.finish({ ok: false, message: known?.message ?? 'the code exchange failed', hint: known?.hintFor(syncauthCommand) ?? 'see the terminal' });
    };
    try {
      const tokens = await exchangeWithSecretRetry(
        options,
        (appSecret) => exchangeCode({ tokenUrl: settings.tokenUrl, app: appWith(appSecret), code, redirectUri: settings.redirectUri, codeVerifier: request.codeVerifier, signal }),
        (error) => server.finish({ ok: false, message: error.message, hint: 'type the app secret again in the terminal, where syncauth asks for it; no new browser round is needed' }),
      );
      server.finish({ ok: true });
      return tokens;
    } catch (error) {
      failed(error);
      throw error;
    }
  } finally {
    clearTimeout(hint);
    await server.close();
  }
}
