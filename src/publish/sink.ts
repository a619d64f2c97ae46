// A sink: one way the token is handed to consumers beside the daemon (the token file, a template, the socket).
// Each kind owns its rules: what its settings must be and where it may be written (checked before anything
// starts), where it is placed (see place.ts), which paths it locks (see sink-lock.ts), and how it publishes a
// profile's token and withdraws it. A run's sinks are one list, handled alike.
import type { FileAccess } from './file.js';
import { tokenFileFor, type SinkRequest } from './place.js';
import type { SinkLocks, SinkRequestForLock } from './sink-lock.js';
import { checkSocketPath, startTokenSocket, type TokenSocket, type TokenSocketOptions } from './socket.js';
import { checkTemplate, TemplateRenderer, type TemplateSpec } from './template.js';
import { checkTokenFilePlaces, removeTokenFile, writeTokenFile } from './token-file.js';
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
}

/** The token file, `{profile}` in its path for several profiles, with its `.expires_at` beside it. */
export class TokenFileSink implements Sink {
  readonly kind = 'token file';

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

  async publish(token: PublishedToken): Promise<void> {
    const file = tokenFileFor(this.path, token.profile);
    await this.locks?.ensure(file, this.field);
    await writeTokenFile(file, token.accessToken, token.expiresAt, this.access);
  }

  withdraw(profile: string): Promise<void> {
    return removeTokenFile(tokenFileFor(this.path, profile));
  }

  async close(): Promise<void> {}
}

/** A template rendered with the token into its destination (`{profile}` in it for several profiles). */
export class TemplateSink implements Sink {
  readonly kind = 'template';
  readonly #renderer: TemplateRenderer;

  constructor(
    readonly spec: TemplateSpec,
    readonly field: string,
    private readonly log: Logger,
    private readonly locks?: SinkLocks,
  ) {
    this.#renderer = new TemplateRenderer([spec], log, locks);
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
    return new TemplateSink({ ...this.spec, dest: path }, this.field, this.log, this.locks);
  }

  lockRequests(profiles: readonly string[]): SinkRequestForLock[] {
    return [...new Set(profiles.map((profile) => tokenFileFor(this.spec.dest, profile)))].map((path) => ({ path, field: this.field }));
  }

  publish(token: PublishedToken): Promise<void> {
    return this.#renderer.render({ accessToken: token.accessToken, expiresAt: token.expiresAt, profile: token.profile, now: token.now, ...(token.accountId ? { accountId: token.accountId } : {}) });
  }

  /** A rendered template stays: it carries the expiry, and a consumer's configuration should not vanish. */
  async withdraw(): Promise<void> {}

  async close(): Promise<void> {
    this.#renderer.stop();
  }
}

/**
 * The Unix socket consumers ask for a profile's token (GET /v1/token/<profile>): what was last published and has
 * not expired, until withdrawn. Serves once `open` has been called.
 */
export class SocketSink implements Sink {
  readonly kind = 'socket';
  readonly #tokens = new Map<string, { value: string; expiresAt: number }>();
  #socket: TokenSocket | undefined;

  constructor(
    readonly path: string,
    readonly field: string,
    private readonly access: { mode?: number; gid?: number } = {},
  ) {}

  /** One process listens at the path: another's live socket there refuses the start. */
  async check(): Promise<void> {
    await checkSocketPath(this.path);
  }

  placement(): SinkRequest {
    return { path: this.path, field: this.field, ...(this.access.gid !== undefined ? { gid: this.access.gid } : {}) };
  }

  placedAt(path: string): SocketSink {
    return new SocketSink(path, this.field, this.access);
  }

  lockRequests(): SinkRequestForLock[] {
    return [{ path: this.path, field: this.field }];
  }

  /** Starts answering at the path. */
  async open(options: Pick<TokenSocketOptions, 'log' | 'now'>): Promise<void> {
    this.#socket ??= await startTokenSocket(
      this.path,
      { profiles: () => [...this.#tokens.keys()], token: (profile) => this.#tokens.get(profile) },
      { ...options, ...(this.access.mode !== undefined ? { mode: this.access.mode } : {}), ...(this.access.gid !== undefined ? { gid: this.access.gid } : {}) },
    );
  }

  async publish(token: PublishedToken): Promise<void> {
    this.#tokens.set(token.profile, { value: token.accessToken, expiresAt: token.expiresAt });
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
