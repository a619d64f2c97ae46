// A sink: one way the token is handed to consumers beside the daemon (the token file, a template, the socket).
// Each kind owns its rules: what its settings must be and where it may be written (checked before anything
// starts), where it is placed (see place.ts), which paths it locks (see sink-lock.ts), and how it publishes a
// profile's token and withdraws it. A run's sinks are one list, handled alike.
import { rm } from 'node:fs/promises';
import { identityIfThere, identityOf, PRIVATE_ACCESS, writeSharedFile, type FileAccess, type FileIdentity } from './file.js';
import { tokenFileFor, type SinkRequest } from './place.js';
import type { SinkLocks, SinkRequestForLock } from './sink-lock.js';
import { checkSocketPath, startTokenSocket, type TokenSocket, type TokenSocketOptions, type TokenSource } from './socket.js';
import { checkTemplate, TemplateRenderer, type TemplateSpec } from './template.js';
import { checkTokenFilePlaces, EXPIRY_SUFFIX, readTokenFile, removeLeftovers } from './token-file.js';
import type { Logger } from '../log.js';

/** A profile's token as a sink publishes it. */
export interface PublishedToken {
  profile: string;
  accessToken: string;
  /** Epoch milliseconds. */
  expiresAt: number;
  /** Epoch milliseconds: when it is published (a template's `expires_in` counts from it). */
  now: number;
  accountId?: string;
}

export type SinkKind = 'token file' | 'template' | 'socket';

export interface Sink {
  readonly kind: SinkKind;
  /** The path as configured, or as placed; `{profile}` stands for each profile's name. */
  readonly path: string;
  /** The setting that named it, for messages. */
  readonly field: string;
  /** Refuses (a ValidationError naming `field`) a sink that cannot serve `profiles` where it is; makes nothing. */
  check(profiles: readonly string[]): Promise<void>;
  /** Where it asks to be placed: a directory other users may write moves it into a private subdirectory. */
  placement(): SinkRequest;
  /** The same sink at the path placement gave it. */
  placedAt(path: string): Sink;
  /** Each path it writes for `profiles`, to be locked before anything is published. */
  lockRequests(profiles: readonly string[]): SinkRequestForLock[];
  /** Hands the profile's token on; a failure is thrown to the caller. */
  publish(token: PublishedToken): Promise<void>;
  /** Takes the profile's token back, where the kind does (a template stays: it carries the expiry). */
  withdraw(profile: string): Promise<void>;
  /** Stops what it serves or renders; nothing is published after. */
  close(): Promise<void>;
  /**
   * Whether what it published for the profile is still as it left it (false: removed or replaced under it, to be
   * published again); a kind that leaves nothing to look at has none.
   */
  intact?(profile: string): Promise<boolean>;
}

/**
 * The token file, `{profile}` in its path for several profiles, with its `.expires_at` beside it. It keeps what it
 * wrote (or adopted) at each path, as it was then: only that is ever withdrawn, and anything else found there
 * (removed, replaced) makes it not intact, to be published again.
 */
export class TokenFileSink implements Sink {
  readonly kind = 'token file';
  /** What this sink wrote or adopted at each token file and expiry path, as it was then. */
  readonly #own = new Map<string, FileIdentity>();

  constructor(
    readonly path: string,
    readonly field: string,
    private readonly access?: FileAccess,
    private readonly locks?: SinkLocks,
  ) {}

  check(profiles: readonly string[]): Promise<void> {
    return checkTokenFilePlaces(this.path, profiles, this.field);
  }

  placement(): SinkRequest {
    return { path: this.path, field: this.field, ...(this.access?.gid !== undefined ? { gid: this.access.gid } : {}) };
  }

  placedAt(path: string): TokenFileSink {
    return new TokenFileSink(path, this.field, this.access, this.locks);
  }

  lockRequests(profiles: readonly string[]): SinkRequestForLock[] {
    return [...new Set(profiles.map((profile) => tokenFileFor(this.path, profile)))].map((path) => ({ path, field: this.field }));
  }

  /** The profile's token file. */
  fileFor(profile: string): string {
    return tokenFileFor(this.path, profile);
  }

  /** The mode it writes (0600 unless given): a file left by an earlier run is adopted only with this mode. */
  get mode(): number {
    return (this.access ?? PRIVATE_ACCESS).mode;
  }

  /** Writes the token, then its expiry, each taken as this sink's own once written. */
  async publish(token: PublishedToken): Promise<void> {
    const file = this.fileFor(token.profile);
    await this.locks?.ensure(file, this.field);
    const access = this.access ?? PRIVATE_ACCESS;
    await writeSharedFile(file, token.accessToken, access);
    await this.#record(file);
    await writeSharedFile(`${file}${EXPIRY_SUFFIX}`, `${new Date(token.expiresAt).toISOString()}\n`, access);
    await this.#record(`${file}${EXPIRY_SUFFIX}`);
  }

  /** Removes the token file and expiry, each only if it is still what this sink wrote or adopted there. */
  async withdraw(profile: string): Promise<void> {
    for (const file of this.#pair(profile)) await this.#removeOwn(file);
  }

  /**
   * Takes what is at the profile's token file and expiry now as this sink's own: a file an earlier run of this
   * sink left, found by the process that now holds its lock (adopted, or withdrawn as expired).
   */
  async claim(profile: string): Promise<void> {
    for (const file of this.#pair(profile)) await this.#record(file);
  }

  /**
   * What an earlier run left for the profile: its interrupted writes are removed, what is there is claimed, and
   * (`read`) the token is read if it is what syncauth writes (see `readTokenFile`; anything else is removed and
   * said so). Undefined when there is none to adopt.
   */
  async adopt(profile: string, options: { read: boolean; log: Logger }): Promise<{ value: string; expiresAt: number } | undefined> {
    const file = this.fileFor(profile);
    await removeLeftovers(file);
    await this.claim(profile);
    if (!options.read) return undefined;
    return readTokenFile(file, { mode: this.mode, log: options.log, profile }).catch(() => undefined);
  }

  /** Whether the token file and expiry are still as this sink left them. */
  async intact(profile: string): Promise<boolean> {
    for (const file of this.#pair(profile)) if ((await identityOf(file)) !== this.#own.get(file)) return false;
    return true;
  }

  async close(): Promise<void> {}

  #pair(profile: string): [string, string] {
    const file = this.fileFor(profile);
    return [file, `${file}${EXPIRY_SUFFIX}`];
  }

  async #record(file: string): Promise<void> {
    const identity = await identityOf(file);
    if (identity === undefined) this.#own.delete(file);
    else this.#own.set(file, identity);
  }

  async #removeOwn(file: string): Promise<void> {
    const own = this.#own.get(file);
    if (own === undefined) return;
    // Forgotten only once the removal is done or the file is gone or replaced: a file that cannot be looked at
    // now is still this sink's to remove at its next try (the failure is thrown, and retried).
    if ((await identityIfThere(file)) === own) await rm(file, { force: true });
    this.#own.delete(file);
  }
}

/** What a template sink may be given beyond its spec. */
export interface TemplateSinkOptions {
  /** Renders it: one renderer may serve several sinks (one queue per destination); by default its own. */
  renderer?: TemplateRenderer;
}

/**
 * A template rendered with the token into its destination (`{profile}` in it for several profiles). `publish`
 * resolves once the render has ended, rendered or failed (logged, the previous file kept): it never throws.
 */
export class TemplateSink implements Sink {
  readonly kind = 'template';
  readonly #renderer: TemplateRenderer;
  readonly #ownRenderer: boolean;
  readonly #rendering = new Set<Promise<void>>();

  constructor(
    readonly spec: TemplateSpec,
    readonly field: string,
    private readonly log: Logger,
    private readonly locks?: SinkLocks,
    private readonly options: TemplateSinkOptions = {},
  ) {
    this.#ownRenderer = options.renderer === undefined;
    this.#renderer = options.renderer ?? new TemplateRenderer([spec], log, locks);
  }

  get path(): string {
    return this.spec.dest;
  }

  check(profiles: readonly string[]): Promise<void> {
    return checkTemplate(this.spec, profiles, this.field);
  }

  placement(): SinkRequest {
    return { path: this.spec.dest, field: this.field };
  }

  placedAt(path: string): TemplateSink {
    return new TemplateSink({ ...this.spec, dest: path }, this.field, this.log, this.locks, this.#ownRenderer ? {} : this.options);
  }

  lockRequests(profiles: readonly string[]): SinkRequestForLock[] {
    return [...new Set(profiles.map((profile) => tokenFileFor(this.spec.dest, profile)))].map((path) => ({ path, field: this.field }));
  }

  publish(token: PublishedToken): Promise<void> {
    const rendering = this.#renderer.render({ accessToken: token.accessToken, expiresAt: token.expiresAt, profile: token.profile, now: token.now, ...(token.accountId ? { accountId: token.accountId } : {}) }, [this.spec]);
    this.#rendering.add(rendering);
    void rendering.finally(() => this.#rendering.delete(rendering));
    return rendering;
  }

  /** Resolves once the renders started so far have ended, rendered or failed (each read has a deadline). */
  async settled(): Promise<void> {
    while (this.#rendering.size > 0) await Promise.allSettled([...this.#rendering]);
  }

  /** Whether the profile's destination is still what was last rendered there (a render under way counts as intact). */
  intact(profile: string): Promise<boolean> {
    return this.#renderer.intact([this.spec], profile);
  }

  /** A rendered template stays: it carries the expiry, and a consumer's configuration should not vanish. */
  async withdraw(): Promise<void> {}

  /** No render starts after this; a shared renderer is stopped by whoever made it. */
  async close(): Promise<void> {
    if (this.#ownRenderer) this.#renderer.stop();
  }
}

/**
 * The Unix socket consumers ask for a profile's token (GET /v1/token/<profile>): what was last published and has
 * not expired, until withdrawn; or, given a `source`, the token its holder holds now, asked at each request (what
 * is published and withdrawn then changes nothing). Serves once `open` has been called.
 */
export class SocketSink implements Sink {
  readonly kind = 'socket';
  readonly #tokens = new Map<string, { value: string; expiresAt: number }>();
  #socket: TokenSocket | undefined;

  constructor(
    readonly path: string,
    readonly field: string,
    private readonly access: { mode?: number; gid?: number } = {},
    private readonly source?: TokenSource,
  ) {}

  /** One process listens at the path: another's live socket there refuses the start. */
  async check(): Promise<void> {
    await checkSocketPath(this.path);
  }

  placement(): SinkRequest {
    return { path: this.path, field: this.field, ...(this.access.gid !== undefined ? { gid: this.access.gid } : {}) };
  }

  placedAt(path: string): SocketSink {
    return new SocketSink(path, this.field, this.access, this.source);
  }

  lockRequests(): SinkRequestForLock[] {
    return [{ path: this.path, field: this.field }];
  }

  /** Starts answering at the path. */
  async open(options: Pick<TokenSocketOptions, 'log' | 'now'>): Promise<void> {
    this.#socket ??= await startTokenSocket(
      this.path,
      this.source ?? { profiles: () => [...this.#tokens.keys()], token: (profile) => this.#tokens.get(profile) },
      { ...options, ...(this.access.mode !== undefined ? { mode: this.access.mode } : {}), ...(this.access.gid !== undefined ? { gid: this.access.gid } : {}) },
    );
  }

  async publish(token: PublishedToken): Promise<void> {
    if (!this.source) this.#tokens.set(token.profile, { value: token.accessToken, expiresAt: token.expiresAt });
  }

  async withdraw(profile: string): Promise<void> {
    this.#tokens.delete(profile);
  }

  async close(): Promise<void> {
    const socket = this.#socket;
    this.#socket = undefined;
    this.#tokens.clear();
    await socket?.close();
  }
}

/**
 * A profile's sinks: the daemon-wide ones with its own. Its own token file takes the daemon-wide one's place (a
 * profile's token is in one file); its own templates are rendered besides the daemon-wide ones, after them.
 */
export function sinksForProfile(shared: readonly Sink[], own: readonly Sink[] = []): Sink[] {
  const ownFile = own.some((sink) => sink.kind === 'token file');
  return [...shared.filter((sink) => !(ownFile && sink.kind === 'token file')), ...own];
}

/** Each sink's check for `profiles`, in order; the first refusal is thrown. */
export async function checkSinks(sinks: readonly Sink[], profiles: readonly string[]): Promise<void> {
  for (const sink of sinks) await sink.check(profiles);
}

/** Every path the sinks write for `profiles`, each once, with the setting that named it. */
export function sinkLockRequests(sinks: readonly Sink[], profiles: readonly string[]): SinkRequestForLock[] {
  const seen = new Map<string, string>();
  for (const sink of sinks) for (const { path, field } of sink.lockRequests(profiles)) if (!seen.has(path)) seen.set(path, field);
  return [...seen].map(([path, field]) => ({ path, field }));
}

/** Publishes the token to every sink; each is tried, and the failures are thrown together after. */
export async function publishAll(sinks: readonly Sink[], token: PublishedToken): Promise<void> {
  const failed = (await Promise.allSettled(sinks.map((sink) => sink.publish(token)))).flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
  if (failed.length === 1) throw failed[0];
  if (failed.length > 1) throw new AggregateError(failed, `${failed.length} sinks could not publish the token of profile ${token.profile}`);
}

/** Withdraws the profile's token from every sink, each tried. */
export async function withdrawAll(sinks: readonly Sink[], profile: string): Promise<void> {
  const failed = (await Promise.allSettled(sinks.map((sink) => sink.withdraw(profile)))).flatMap((result) => (result.status === 'rejected' ? [result.reason as unknown] : []));
  if (failed.length === 1) throw failed[0];
  if (failed.length > 1) throw new AggregateError(failed, `${failed.length} sinks could not withdraw the token of profile ${profile}`);
}
