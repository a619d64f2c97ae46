// The re-authorization page, on a listener of its own (never the health server's): a link opens a page that
// names the profile, its folder and the account that granted access, and sends the person to Dropbox's
// authorize page (state + PKCE S256, offline access). On the way back the code is exchanged, the account must be
// the profile's own (or the link allows a change), the scopes are checked as setup checks them, and the grant is
// handed to the daemon, which stores it, renews, reconciles and runs the service's connection check; only then
// does the page say it worked, and the link is spent. Where no redirect can be registered, the page offers
// Dropbox's code display and a paste form instead.
//
// The listener serves nothing else: no token, no status, no metrics. Every response carries a strict CSP,
// no-store, no-referrer, nosniff and DENY framing; a Host other than the public URL's, a wrong, used or
// expired link, an unknown state all get the same 404 body, and refusals are rate-limited per client address
// (refused requests only, so a person's own clicks never count against them). Every step is logged with a
// stable `event`; no token, code, state or link is ever logged.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ReauthorizationResult, ReauthorizedGrant } from './grant.js';
import { UntrustedFileError } from '../config-dir.js';
import type { Logger } from '../log.js';
import { listenHttp } from '../net/listen.js';
import { registerSecrets } from '../redact.js';
import {
  checkGrantedScopes,
  createAuthorizationRequest,
  exchangeCode,
  getCurrentAccount,
  parseAuthorizationResponse,
  revokeToken,
  type DropboxAccount,
  type FolderAccess,
  type TokenSet,
} from '../oauth/index.js';
import { syncauthCommand } from '../profile/name.js';
import { hashToken, TOKEN_PATTERN, type LinkClaim, type LinkRecord, type LinkStore } from './links.js';
import type { PendingRound, RoundStore } from './redis-store.js';
import { FORBIDDEN_PAGE, NOT_FOUND_PAGE, RATE_LIMITED_PAGE, resultPage, startPage } from './page.js';

/** What the page needs to know of a profile; the app credentials never leave the process but in Dropbox calls. */
export interface ReauthProfile {
  name: string;
  appKey: string;
  appSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  /** Dropbox's v2 API base. */
  apiUrl: string;
  /** The folder the connector reads (the remote URL). */
  folder?: string;
  /** The Dropbox account recorded for the profile. */
  accountId?: string;
  access: FolderAccess;
  /**
   * Whether the daemon can keep a new grant: stored where the profile's secrets live, or, for the read-only env
   * store, held in memory and shared with the replicas (a grant record) or handed to --on-reauthorized.
   */
  writable: boolean;
}

export interface ReauthServerOptions {
  listen: { host: string; port: number };
  /** The public origin, e.g. https://syncauth.example.com: links, the redirect URI and the Host check use it. */
  publicUrl: string;
  links: LinkStore;
  /** Where authorize rounds wait for their callback: Redis with replicas (redis-store.ts); default this process's memory. */
  rounds?: RoundStore;
  /** The profile a link is bound to, as the daemon serves it; undefined when it is not served. */
  profile(name: string): Promise<ReauthProfile | undefined>;
  /** Hands the new grant to the daemon (RunningDaemon.reauthorized). */
  reauthorized(profile: string, grant: ReauthorizedGrant): Promise<ReauthorizationResult>;
  log: Logger;
  now?: () => number;
  /** Deadline of each Dropbox call. Default 15 s. */
  timeoutMs?: number;
  /** Refused requests allowed per client address: a burst, refilled evenly over a minute. Default 20 a minute. */
  refusalsPerMinute?: number;
}

export interface ReauthServer {
  /** `http://HOST:PORT` the listener is bound to (not the public URL). */
  url: string;
  close(): Promise<void>;
}

/** How long the authorize round trip may take once the page is shown. */
const PENDING_TTL_MS = 15 * 60_000;
/** Authorization attempts remembered per link (each page view makes two: redirect and paste). */
const PENDING_PER_LINK = 6;
const PENDING_MAX = 2_000;
/** Client addresses whose refusals are counted at once; the least recent go first. */
const BUCKETS_MAX = 10_000;
const FORM_LIMIT_BYTES = 4_096;
/**
 * The lease of a completion's claim on its profile (where the links are stored): longer than a completion takes
 * (three Dropbox calls of 15 s, then the daemon's renewal, reconcile and connection check), extended once more
 * when the grant is stored. A replica that dies mid-way holds the profile this long at most.
 */
const CLAIM_LEASE_MS = 5 * 60_000;
/**
 * A body past the form limit is read on and dropped, so that the refusal reaches a client still sending; past
 * this much the connection is closed instead.
 */
const DRAIN_LIMIT_BYTES = 1_048_576;

type Pending = PendingRound;

/** Authorization rounds in this process's memory, by the digest of their state: one-time, bound to their link. */
export function memoryRoundStore(): RoundStore {
  const pending = new Map<string, Pending>();
  return {
    async remember(state, entry, at) {
      for (const [key, p] of pending) if (p.expiresAt <= at) pending.delete(key);
      const same = [...pending].filter(([, p]) => p.linkHash === entry.linkHash);
      for (const [key] of same.slice(0, Math.max(0, same.length - (PENDING_PER_LINK - 1)))) pending.delete(key);
      if (pending.size >= PENDING_MAX) pending.delete(pending.keys().next().value as string);
      pending.set(digest(state), entry);
    },
    async take(state, at) {
      const key = digest(state);
      const entry = pending.get(key);
      pending.delete(key);
      return entry && entry.expiresAt > at ? entry : undefined;
    },
  };
}

/** A token bucket per client address, charged only by refused requests. */
class RefusalLimiter {
  readonly #perMinute: number;
  readonly #now: () => number;
  readonly #buckets = new Map<string, { tokens: number; at: number }>();

  constructor(perMinute: number, now: () => number) {
    this.#perMinute = perMinute;
    this.#now = now;
  }

  #bucket(address: string): { tokens: number; at: number } {
    const now = this.#now();
    let bucket = this.#buckets.get(address);
    if (bucket) {
      bucket.tokens = Math.min(this.#perMinute, bucket.tokens + ((now - bucket.at) * this.#perMinute) / 60_000);
      bucket.at = now;
      this.#buckets.delete(address);
    } else {
      bucket = { tokens: this.#perMinute, at: now };
      if (this.#buckets.size >= BUCKETS_MAX) this.#buckets.delete(this.#buckets.keys().next().value as string);
    }
    this.#buckets.set(address, bucket);
    return bucket;
  }

  /**
   * Takes a token before a request is looked at (so that a burst of concurrent requests cannot all pass before
   * the first is counted); false when there is none left. A request that is not refused gives it back.
   */
  take(address: string): boolean {
    const bucket = this.#bucket(address);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  refund(address: string): void {
    const bucket = this.#bucket(address);
    bucket.tokens = Math.min(this.#perMinute, bucket.tokens + 1);
  }
}

function digest(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('base64url');
}

/**
 * The paste form's token: an HMAC of the link's digest and the round's state under the round's PKCE verifier.
 * The verifier never leaves the page's process (Dropbox sees only its S256 challenge; Redis keeps it sealed
 * under the state), so the token is known only to the page that rendered it, and any replica that takes the
 * round can check it. Unlike the state, it is never part of a URL: Dropbox's address bar, history and logs
 * never see it, and a page on another site cannot read it from ours.
 */
export function pasteFormToken(round: { codeVerifier: string; linkHash: string }, state: string): string {
  return createHmac('sha256', round.codeVerifier).update(`syncauth-reauth-form\0${round.linkHash}\0${state}`, 'utf8').digest('base64url');
}

function sameToken(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/**
 * What the browser says of where a POST came from, judged only where it says something. Under the page's own
 * `Referrer-Policy: no-referrer` a browser sends `Origin: null` with the form, so a present Origin must be the
 * public URL's or "null"; `Sec-Fetch-Site`, which no referrer policy hides, must not name another site.
 */
function foreignForm(req: IncomingMessage, origin: string): boolean {
  const from = req.headers.origin;
  if (from !== undefined && from !== origin && from !== 'null') return true;
  const site = req.headers['sec-fetch-site'];
  return site === 'cross-site' || site === 'same-site';
}

export async function startReauthServer(options: ReauthServerOptions): Promise<ReauthServer> {
  return new ReauthPage(options).listen();
}

/** The page's listener and what it keeps between requests: the rounds, the refusals counted and the answers given. */
class ReauthPage {
  readonly #options: ReauthServerOptions;
  readonly #publicUrl: URL;
  readonly #origin: string;
  readonly #redirectUri: string;
  readonly #now: () => number;
  readonly #timeoutMs: number;
  readonly #log: Logger;
  readonly #limiter: RefusalLimiter;
  /** Authorization attempts by the digest of their state: one-time, bound to the link that started them. */
  readonly #rounds: RoundStore;
  #limitedLogged = 0;
  /** Answers that refused their request: the token their request took is not given back. */
  readonly #refused = new WeakSet<ServerResponse>();
  /** Answers already written straight to the socket (a malformed request, see #clientError below). */
  readonly #answered = new WeakSet<ServerResponse>();
  /**
   * The client's address, read once when the request arrives: once its socket is gone (an aborted body, a client
   * that left) the request no longer knows it, and its refusal must still be counted and logged.
   */
  readonly #clients = new WeakMap<IncomingMessage, string>();
  /** The cause last warned of, while the links file is not to be believed (its path, owner and mode). */
  #untrustedWarned: string | undefined;
  /** The response under way on each connection, for a parse error that comes while its body is read. */
  readonly #inFlight = new WeakMap<Socket, { req: IncomingMessage; res: ServerResponse }>();
  readonly #server: Server;

  constructor(options: ReauthServerOptions) {
    this.#options = options;
    this.#publicUrl = new URL(options.publicUrl);
    this.#origin = this.#publicUrl.origin;
    this.#redirectUri = `${this.#origin}/reauthorize/callback`;
    this.#now = options.now ?? Date.now;
    this.#timeoutMs = options.timeoutMs ?? 15_000;
    this.#log = options.log;
    this.#limiter = new RefusalLimiter(options.refusalsPerMinute ?? 20, this.#now);
    this.#rounds = options.rounds ?? memoryRoundStore();
    this.#server = createServer((req, res) => this.#serve(req, res));
    this.#server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => this.#clientError(error, socket));
    this.#server.keepAliveTimeout = 5_000;
    this.#server.headersTimeout = 10_000;
    this.#server.requestTimeout = 60_000;
  }

  async listen(): Promise<ReauthServer> {
    const listening = await listenHttp(this.#server, this.#options.listen, 'reauthListen');
    const where = listening.url.slice('http://'.length);
    this.#log.info({ event: 'reauth.listening', op: 'start', listen: where, publicUrl: this.#origin }, `re-authorization page on ${where}, public as ${this.#origin}`);
    return listening;
  }

  #csp(extraOrigin?: string): string {
    const targets = new Set([this.#origin, 'https://www.dropbox.com', ...(extraOrigin ? [extraOrigin] : [])]);
    return `default-src 'none'; style-src 'unsafe-inline'; form-action ${[...targets].join(' ')}; frame-ancestors 'none'; base-uri 'none'`;
  }

  #headersOf(extraOrigin?: string): Record<string, string> {
    return {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': this.#csp(extraOrigin),
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
    };
  }

  #send(res: ServerResponse, status: number, html: string, extraOrigin?: string): void {
    // A client gone, or answered already: writing again would only raise an error for nobody.
    if (res.headersSent || this.#answered.has(res) || res.destroyed) return;
    res.writeHead(status, this.#headersOf(extraOrigin));
    res.end(html);
  }

  #addressOf(req: IncomingMessage): string {
    return this.#clients.get(req) ?? 'unknown';
  }

  #refuse(req: IncomingMessage, res: ServerResponse, event: string, fields: Record<string, unknown> = {}): void {
    this.#refused.add(res);
    if (this.#answered.has(res)) return;
    this.#log.warn({ event, op: 'reauth', client: this.#addressOf(req), ...fields }, 'refused a re-authorization request');
    this.#send(res, 404, NOT_FOUND_PAGE);
  }

  #rateLimited(req: IncomingMessage, res: ServerResponse): boolean {
    if (this.#limiter.take(this.#addressOf(req))) return false;
    this.#refused.add(res);
    // Once a minute at most: a flood must not flood the log either.
    if (this.#now() - this.#limitedLogged > 60_000) {
      this.#limitedLogged = this.#now();
      this.#log.warn({ event: 'reauth.rate_limited', op: 'reauth', client: this.#addressOf(req) }, 'too many refused re-authorization requests; answering 429 for a while');
    }
    res.setHeader('retry-after', '60');
    this.#send(res, 429, RATE_LIMITED_PAGE);
    return true;
  }

  /**
   * The unexpired link a digest names. A links file another user owns or may write is never read (assertFileTrusted):
   * every link is then refused as a wrong one is, and the file named at warn, once for each cause, not to the client.
   */
  async #findLink(linkHash: string): Promise<LinkRecord | undefined> {
    try {
      const link = await this.#options.links.find(linkHash, this.#now());
      this.#untrustedWarned = undefined;
      return link;
    } catch (error) {
      if (!(error instanceof UntrustedFileError)) throw error;
      const cause = `${error.file}\0${error.owner}\0${error.mode}`;
      if (cause !== this.#untrustedWarned) {
        this.#untrustedWarned = cause;
        this.#log.warn(
          { event: 'reauth.links_untrusted', op: 'reauth', file: error.file, owner: error.owner, mode: error.mode, hint: error.hint },
          `${error.message}; every re-authorization link is refused until it is fixed`,
        );
      }
      return undefined;
    }
  }

  /** The attempt a state names, removed (one-time), when it is unexpired. */
  async #take(state: string | null): Promise<Pending | undefined> {
    if (!state || state.length > 200) return undefined;
    return this.#rounds.take(state, this.#now());
  }

  /**
   * GET: the page, with a fresh authorize round. HEAD (a link checker, a preview): the same status and headers
   * and no body, and no round is begun; a wrong link gets the same 404 as GET and counts as a refusal.
   */
  async #openPage(req: IncomingMessage, res: ServerResponse, token: string, head: boolean): Promise<void> {
    const linkHash = hashToken(token);
    const link = await this.#findLink(linkHash);
    if (!link) {
      this.#refuse(req, res, 'reauth.link_refused');
      return;
    }
    const profile = await this.#options.profile(link.profile);
    const problem = profileProblem(profile, link);
    if (problem || !profile) {
      this.#log.warn({ event: 'reauth.page_refused', op: 'reauth', profile: link.profile }, `re-authorization page of profile "${link.profile}": ${problem ?? 'not served'}`);
      this.#send(res, 200, resultPage({ ok: false, title: 'This profile cannot be re-authorized here', paragraphs: [problem ?? 'The daemon does not serve this profile.'] }));
      return;
    }
    if (head) {
      this.#send(res, 200, '', new URL(profile.authorizeUrl).origin);
      return;
    }
    const withRedirect = createAuthorizationRequest({ authorizeUrl: profile.authorizeUrl, appKey: profile.appKey, redirectUri: this.#redirectUri });
    const forPaste = createAuthorizationRequest({ authorizeUrl: profile.authorizeUrl, appKey: profile.appKey });
    const expiresAt = Math.min(this.#now() + PENDING_TTL_MS, link.expiresAt);
    await this.#rounds.remember(withRedirect.state, { profile: profile.name, linkHash, codeVerifier: withRedirect.codeVerifier, redirectUri: this.#redirectUri, expiresAt }, this.#now());
    await this.#rounds.remember(forPaste.state, { profile: profile.name, linkHash, codeVerifier: forPaste.codeVerifier, expiresAt }, this.#now());
    this.#log.info({ event: 'reauth.page_opened', op: 'reauth', profile: profile.name }, `the re-authorization page of profile "${profile.name}" was opened`);
    this.#send(
      res,
      200,
      startPage({
        profile: profile.name,
        ...(profile.folder ? { folder: profile.folder } : {}),
        ...(profile.accountId ? { accountId: profile.accountId } : {}),
        authorizeUrl: withRedirect.url,
        codeDisplayUrl: forPaste.url,
        pasteState: forPaste.state,
        formToken: pasteFormToken({ codeVerifier: forPaste.codeVerifier, linkHash }, forPaste.state),
        action: `/reauthorize/${token}`,
        allowAccountChange: link.allowAccountChange,
      }),
      new URL(profile.authorizeUrl).origin,
    );
  }

  async #callback(req: IncomingMessage, res: ServerResponse, params: URLSearchParams): Promise<void> {
    const state = params.get('state');
    const attempt = await this.#take(state);
    if (!attempt || attempt.redirectUri === undefined) {
      this.#refuse(req, res, 'reauth.state_refused');
      return;
    }
    let code: string;
    try {
      code = parseAuthorizationResponse(params, state as string).code;
    } catch (error) {
      this.#log.warn({ event: 'reauth.denied', op: 'reauth', profile: attempt.profile, errorCode: (error as { code?: string }).code }, `re-authorization of profile "${attempt.profile}" ended at Dropbox without a code`);
      this.#send(res, 200, resultPage({ ok: false, title: 'Dropbox did not authorize syncauth', paragraphs: [(error as Error).message, 'Nothing changed. Open the link again to try once more.'] }));
      return;
    }
    await this.#complete(req, res, attempt, code);
  }

  async #paste(req: IncomingMessage, res: ServerResponse, token: string): Promise<void> {
    // A form posted from any other page (a cross-site request carrying a stolen state) is refused: by what the
    // browser says of its origin where it says it, and always by the form's token, which only our page holds.
    const formRefused = (): void => {
      this.#refused.add(res);
      this.#log.warn({ event: 'reauth.form_refused', op: 'reauth', client: this.#addressOf(req) }, 'refused a pasted code: the form was not sent from the page');
      this.#send(res, 403, FORBIDDEN_PAGE);
    };
    if (foreignForm(req, this.#origin)) {
      formRefused();
      return;
    }
    const read = await readForm(req);
    if ('problem' in read) {
      this.#refuse(req, res, 'reauth.form_unreadable', { problem: read.problem });
      return;
    }
    const form = read.form;
    const state = form.get('state');
    const attempt = await this.#take(state);
    const code = form.get('code')?.trim() ?? '';
    if (!attempt || attempt.redirectUri !== undefined || attempt.linkHash !== hashToken(token) || code === '') {
      this.#refuse(req, res, 'reauth.state_refused');
      return;
    }
    if (!sameToken(form.get('form_token') ?? '', pasteFormToken(attempt, state as string))) {
      formRefused();
      return;
    }
    await this.#complete(req, res, attempt, code);
  }

  /**
   * A callback or pasted code: the profile is claimed where its links are stored (one completion at a time across
   * processes and replicas; a second gets "already under way"), then the link is looked up again under the
   * claim, and the grant is stored only while the claim still holds. A completion that stores nothing releases
   * the claim, and the link still works.
   */
  async #complete(req: IncomingMessage, res: ServerResponse, attempt: Pending, code: string): Promise<void> {
    const outcome = await this.#options.links.claim(attempt.profile, CLAIM_LEASE_MS, (claim) => this.#completeClaimed(req, res, attempt, code, claim));
    if (!outcome.claimed) {
      this.#log.info({ event: 'reauth.under_way', op: 'reauth', profile: attempt.profile }, `re-authorization of profile "${attempt.profile}" is being completed elsewhere`);
      this.#send(res, 409, resultPage({ ok: false, title: 'Already under way', paragraphs: ['Another re-authorization of this profile is being completed. Open the link again in a minute to see where it stands.'] }));
    }
  }

  async #completeClaimed(req: IncomingMessage, res: ServerResponse, attempt: Pending, code: string, claim: LinkClaim): Promise<void> {
    const link = await this.#findLink(attempt.linkHash);
    if (!link || link.profile !== attempt.profile) {
      this.#refuse(req, res, 'reauth.link_refused');
      return;
    }
    const profile = await this.#options.profile(link.profile);
    const problem = profileProblem(profile, link);
    if (problem || !profile) {
      this.#send(res, 200, resultPage({ ok: false, title: 'This profile cannot be re-authorized here', paragraphs: [problem ?? 'The daemon does not serve this profile.'] }));
      return;
    }
    const name = profile.name;
    const fail = (title: string, paragraphs: string[]): void => this.#send(res, 200, resultPage({ ok: false, title, paragraphs }));
    let tokens: TokenSet;
    try {
      tokens = await exchangeCode({
        tokenUrl: profile.tokenUrl,
        app: { appKey: profile.appKey, appSecret: profile.appSecret },
        code,
        ...(attempt.redirectUri !== undefined ? { redirectUri: attempt.redirectUri } : {}),
        codeVerifier: attempt.codeVerifier,
        timeoutMs: this.#timeoutMs,
      });
    } catch (error) {
      this.#log.warn({ event: 'reauth.exchange_failed', op: 'reauth', profile: name, errorCode: (error as { code?: string }).code }, `re-authorization of profile "${name}": the code exchange failed`);
      fail('Dropbox refused the code', [messageOf(error), 'Nothing changed. Open the link again to try once more.']);
      return;
    }
    // Learnt here first: no line logged from now on, by the page or the daemon it hands the grant to, carries it.
    registerSecrets(tokens.refreshToken);
    let account: DropboxAccount | undefined;
    try {
      account = await getCurrentAccount({ apiUrl: profile.apiUrl, accessToken: tokens.accessToken, timeoutMs: this.#timeoutMs });
    } catch (error) {
      this.#log.warn({ event: 'reauth.account_unknown', op: 'reauth', profile: name, errorCode: (error as { code?: string }).code }, `re-authorization of profile "${name}": could not ask Dropbox which account granted access; using the account the code exchange named`);
    }
    const accountId = account?.accountId ?? tokens.accountId;
    const revoke = async (why: string): Promise<string> => {
      try {
        await revokeToken({ apiUrl: profile.apiUrl, accessToken: tokens.accessToken, timeoutMs: this.#timeoutMs });
        this.#log.info({ event: 'reauth.grant_revoked', op: 'reauth', profile: name, why }, `re-authorization of profile "${name}": the new grant was revoked at Dropbox`);
        return 'The grant just given was revoked at Dropbox again.';
      } catch (error) {
        this.#log.error({ event: 'reauth.revoke_failed', op: 'reauth', profile: name, why, errorCode: (error as { code?: string }).code }, `re-authorization of profile "${name}": revoking the refused grant failed`);
        return 'Revoking the grant just given failed: remove the app from the Dropbox account\'s connected apps (Settings, Connected apps).';
      }
    };
    const sameAccount = accountId !== undefined && profile.accountId !== undefined && accountId === profile.accountId;
    if (!link.allowAccountChange && !sameAccount) {
      this.#log.warn({ event: 'reauth.account_mismatch', op: 'reauth', profile: name, expected: profile.accountId ?? null, got: accountId ?? null }, `re-authorization of profile "${name}" refused: the grant is of another Dropbox account`);
      const revoked = await revoke('account_mismatch');
      fail('Another Dropbox account', [
        `Dropbox authorized the account ${accountId ?? '(unknown)'}, but profile "${name}" belongs to ${profile.accountId ?? 'an account that was never recorded'}.`,
        'Storing this grant would point the connector at someone else\'s files, so nothing changed.',
        revoked,
        'Sign in to Dropbox as the profile\'s own account and open the link again; to move the profile to another account on purpose, ask for a link made with `syncauth reauth-link --allow-account-change`.',
      ]);
      return;
    }
    if (tokens.scopes.length > 0) {
      const scopes = checkGrantedScopes(tokens.scopes, profile.access, syncauthCommand);
      if (scopes.missing.length > 0) {
        this.#log.warn({ event: 'reauth.scopes_missing', op: 'reauth', profile: name, missing: scopes.missing }, `re-authorization of profile "${name}" refused: the grant lacks ${scopes.missing.join(', ')}`);
        const revoked = await revoke('scopes_missing');
        fail('The grant lacks permissions', [scopes.message ?? `missing ${scopes.missing.join(', ')}`, 'Nothing changed.', revoked]);
        return;
      }
    }
    if (!(await claim.renew())) {
      this.#log.warn({ event: 'reauth.claim_lost', op: 'reauth', profile: name }, `re-authorization of profile "${name}" took longer than its claim: nothing stored`);
      const revoked = await revoke('claim_lost');
      fail('This took too long', ['The re-authorization did not finish in time, so nothing changed; the link still works. Open it again.', revoked]);
      return;
    }
    const result = await this.#options.reauthorized(name, {
      appKey: profile.appKey,
      appSecret: profile.appSecret,
      refreshToken: tokens.refreshToken,
      accountId: accountId ?? '',
    });
    if (result.stored) {
      try {
        await this.#options.links.spend(name);
      } catch (error) {
        this.#log.error({ event: 'reauth.spend_failed', op: 'reauth', profile: name, error: messageOf(error) }, `re-authorization of profile "${name}": the grant is stored, but its links could not be marked spent`);
      }
    }
    const ok = result.stored && result.reconciled !== false && result.check?.ok !== false && !result.error;
    this.#log[ok ? 'info' : 'error'](
      {
        event: ok ? 'reauth.completed' : 'reauth.failed',
        op: 'reauth',
        profile: name,
        stored: result.stored,
        ...(result.reconciled !== undefined ? { reconciled: result.reconciled } : {}),
        ...(result.check ? { check: result.check.ok } : {}),
        ...(result.error ? { error: result.error } : {}),
        ...(result.warning ? { warning: result.warning } : {}),
        ...(accountId !== profile.accountId ? { accountChanged: true } : {}),
      },
      ok ? `profile "${name}" is authorized again` : `re-authorization of profile "${name}" did not complete: ${result.error ?? 'see the page'}`,
    );
    this.#send(res, 200, resultPage(resultText(name, profile.folder, result, ok)));
  }

  /** One request: counted against its client's refusals unless it is answered as asked. */
  #serve(req: IncomingMessage, res: ServerResponse): void {
    this.#clients.set(req, req.socket.remoteAddress ?? 'unknown');
    this.#inFlight.set(req.socket, { req, res });
    void (async () => {
      if (this.#rateLimited(req, res)) return;
      const host = req.headers.host ?? '';
      if (host.toLowerCase() !== this.#publicUrl.host.toLowerCase()) {
        this.#refuse(req, res, 'reauth.host_refused');
        return;
      }
      const url = new URL(req.url ?? '/', this.#origin);
      const method = req.method ?? 'GET';
      const match = /^\/reauthorize\/([^/]+)$/.exec(url.pathname);
      const isPage = match !== null && TOKEN_PATTERN.test(match[1] as string);
      if (url.pathname === '/reauthorize/callback' && method === 'GET') await this.#callback(req, res, url.searchParams);
      else if (isPage && (method === 'GET' || method === 'HEAD')) await this.#openPage(req, res, (match as RegExpExecArray)[1] as string, method === 'HEAD');
      else if (isPage && method === 'POST') await this.#paste(req, res, (match as RegExpExecArray)[1] as string);
      else this.#refuse(req, res, 'reauth.not_found');
    })().then(() => {
      if (!this.#refused.has(res)) this.#limiter.refund(this.#addressOf(req));
    }).catch((error: unknown) => {
      this.#log.error({ event: 'reauth.error', op: 'reauth', error: messageOf(error) }, 'the re-authorization page failed');
      this.#send(res, 500, resultPage({ ok: false, title: 'Something went wrong', paragraphs: ['Nothing was changed by this request. Try the link again in a minute.'] }));
    });
  }

  /**
   * A request Node cannot parse (a malformed header or chunk, a body cut short by a half-closed connection, headers
   * too large) gets the page's 404 like any other wrong request, not Node's bare 400, and counts as a refusal;
   * a connection already gone is closed without a word.
   */
  #clientError(error: NodeJS.ErrnoException, socket: Socket): void {
    const last = this.#inFlight.get(socket);
    // A finished answer belongs to an earlier request on this connection: the malformed one is a new request.
    const current = last && !last.res.writableEnded ? last : undefined;
    if (current?.req.complete === true && !current.res.headersSent && socket.writable) {
      // Bytes that do not parse after a whole request: that request is answered as it would be, then the
      // connection closes.
      current.res.setHeader('connection', 'close');
      return;
    }
    const res = current?.res;
    if (error.code === 'ECONNRESET' || !socket.writable || res?.headersSent === true) {
      socket.destroy();
      return;
    }
    const client = socket.remoteAddress ?? 'unknown';
    if (res) {
      // Its request took a token already; the handler, woken by the abort, answers nothing more.
      this.#answered.add(res);
      this.#refused.add(res);
    }
    const limited = !res && !this.#limiter.take(client);
    if (!limited) this.#log.warn({ event: 'reauth.malformed', op: 'reauth', client, errorCode: error.code }, 'refused a re-authorization request that could not be read');
    const [status, html] = limited ? [429, RATE_LIMITED_PAGE] : [404, NOT_FOUND_PAGE];
    const headers = { ...this.#headersOf(), ...(limited ? { 'retry-after': '60' } : {}), 'content-length': String(Buffer.byteLength(html)), connection: 'close' };
    socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${html}`);
    // Nothing more is read from it; a client that never closes its side is let go.
    setTimeout(() => socket.destroy(), 5_000).unref();
  }
}


function profileProblem(profile: ReauthProfile | undefined, link: LinkRecord): string | undefined {
  if (!profile) return 'The daemon does not serve this profile any more.';
  if (!profile.writable) {
    return 'This profile\'s secrets come from the environment, where a new grant cannot be stored: authorize it again with `syncauth setup` and update the environment.';
  }
  if (!profile.accountId && !link.allowAccountChange) {
    return 'No Dropbox account is recorded for this profile, so this link cannot tell its own account from another: ask for a link made with `syncauth reauth-link --allow-account-change`.';
  }
  return undefined;
}

function resultText(name: string, folder: string | undefined, result: ReauthorizationResult, ok: boolean): { ok: boolean; title: string; paragraphs: string[] } {
  const where = folder ? ` for ${folder}` : '';
  if (ok) {
    return {
      ok,
      title: 'syncauth is authorized again',
      paragraphs: [
        `Profile "${name}" has a new grant${where} and renews again.`,
        ...(result.reconciled ? ['The connector holds a fresh token.'] : []),
        ...(result.check?.ok ? ["The service's connection check passed."] : []),
        ...(result.warning ? [`Warning: ${result.warning}`] : []),
        'You can close this tab.',
      ],
    };
  }
  if (!result.stored) {
    return { ok, title: 'The new grant could not be stored', paragraphs: [result.error ?? 'The daemon refused it.', 'Nothing changed; the link still works. Try again in a minute.'] };
  }
  return {
    ok,
    title: 'Authorized, but something failed',
    paragraphs: [
      `Profile "${name}" has a new grant${where}, stored; this link is spent.`,
      ...(result.reconciled === false ? ['Updating the connector with it failed; the daemon keeps trying.'] : []),
      ...(result.check && !result.check.ok ? [`The service's connection check failed: ${result.check.message ?? 'no reason given'}.`] : []),
      ...(result.error ? [result.error] : []),
      ...(result.warning ? [`Warning: ${result.warning}`] : []),
    ],
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

type FormRead = { form: URLSearchParams } | { problem: 'content_type' | 'encoding' | 'too_large' | 'aborted' };

/**
 * The posted form, or why there is none. Never throws, and never leaves a body half read while the client still
 * sends it: past the limit the rest is read and dropped (closing the connection past DRAIN_LIMIT_BYTES), so the
 * refusal is answered as any other; a body cut short resolves as `aborted`.
 */
function readForm(req: IncomingMessage): Promise<FormRead> {
  if (!(req.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) return Promise.resolve({ problem: 'content_type' });
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== '') return Promise.resolve({ problem: 'encoding' });
  return new Promise((resolve) => {
    let size = 0;
    let settled = false;
    const chunks: Buffer[] = [];
    const settle = (result: FormRead): void => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= FORM_LIMIT_BYTES) {
        chunks.push(chunk);
        return;
      }
      chunks.length = 0;
      settle({ problem: 'too_large' });
      if (size > DRAIN_LIMIT_BYTES) req.socket?.destroy();
    });
    req.on('end', () => {
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
      } catch {
        settle({ problem: 'encoding' });
        return;
      }
      settle({ form: new URLSearchParams(text) });
    });
    req.on('error', () => settle({ problem: 'aborted' }));
    req.on('close', () => settle({ problem: 'aborted' }));
  });
}
