// The daemon's publishing: each profile's sinks are one list (sink.ts), the daemon-wide ones with the profile's
// own, and its token is published, withdrawn and looked at through that list, in order per profile. Each kind
// keeps its own rules and state: the token file what it wrote and adopted, a template its renders, the socket
// what it answers. Failures are logged, never thrown.
import type { Logger } from '../log.js';
import type { FileAccess } from './file.js';
import { sinksForProfile, TemplateSink, TokenFileSink, type PublishedToken, type Sink } from './sink.js';
import type { SinkLocks } from './sink-lock.js';
import type { TemplateRenderer, TemplateSpec } from './template.js';
import { sameProfileSinks, type ProfileSinks } from './token-file.js';

/** The holder side of a profile, as far as publishing goes; `T` is the holder's own kind of token. */
interface Holder<T extends { value: string; expiresAt: number } = { value: string; expiresAt: number }> {
  readonly name: string;
  readonly token: T | undefined;
  readonly removed: boolean;
  /** Whether the token held is unexpired at `at`, by every clock the holder trusts. */
  holdsToken(at: number): boolean;
  /** Writes and removals of the profile's sinks, one after another. */
  fileChain: Promise<void>;
  /**
   * The token every sink holds once a write (and its renders) or removal has finished: the token held, or, while
   * the next one is being written, the one before it. Readiness looks at it.
   */
  published: T | undefined;
  /** The last write or removal failed: what the file holds is not known, and the sweep tries again. */
  fileFailed: boolean;
}

/** The setting a lock refused for the daemon's token file is named by. */
const TOKEN_FILE_FIELD = 'the token file';
const TEMPLATE_FIELD = '--template';

export interface PublisherOptions {
  /** The daemon-wide token file's path; `{profile}` is replaced by the profile's name. */
  template: string | undefined;
  access?: FileAccess;
  /** Renders the templates: the daemon-wide ones (its specs) and each profile's own. */
  templates?: TemplateRenderer;
  /** The socket consumers ask, daemon-wide; opened and closed by whoever made it. */
  socket?: Sink;
  /** Each profile's own sinks, by name; replaced whole by `setProfileSinks` on a reload. */
  profileSinks?: ReadonlyMap<string, ProfileSinks>;
  /** The profile's Dropbox account id, for templates that use it; undefined when it cannot be learnt. */
  accountId?: (profile: string, accessToken: string) => Promise<string | undefined>;
  /** The sinks' locks: a file is written only once this process holds its lock. */
  locks?: SinkLocks;
  now: () => number;
  log: Logger;
}

/** Whether the sink hands the token on in files, which readiness waits for (the socket is asked instead). */
const writesFiles = (sink: Sink): boolean => sink.kind !== 'socket';

/** Publishes and withdraws each profile's token through its list of sinks, in order per profile; failures are logged, never thrown. */
export class TokenPublisher {
  private readonly now: () => number;
  private readonly log: Logger;
  /** The daemon-wide sinks: the token file, the templates, the socket. */
  readonly #shared: readonly Sink[];
  #profileSinks: ReadonlyMap<string, ProfileSinks> = new Map();
  /** Each profile's own sinks, built from its settings and kept while they stay the same. */
  #own = new Map<string, readonly Sink[]>();
  /** Every sink this publisher made, to be closed with it. */
  readonly #made = new Set<Sink>();
  readonly #rendering = new Set<Promise<void>>();

  constructor(private readonly options: PublisherOptions) {
    this.now = options.now;
    this.log = options.log;
    this.#shared = [
      ...(options.template !== undefined ? [this.#make(new TokenFileSink(options.template, TOKEN_FILE_FIELD, options.access, options.locks))] : []),
      ...(options.templates?.specs ?? []).map((spec) => this.#template(spec)),
      ...(options.socket ? [options.socket] : []),
    ];
    this.setProfileSinks(options.profileSinks ?? new Map());
  }

  /** Whether anything is published to files (the token file or templates): readiness waits for it. */
  get publishes(): boolean {
    return this.#shared.some(writesFiles) || this.#profileSinks.size > 0;
  }

  /** Whether a daemon-wide sink (the token file, a template, the socket) serves every profile here. */
  get servesEveryProfile(): boolean {
    return this.#shared.length > 0;
  }

  /** The profile's own sinks, if it has any. */
  sinksOf(name: string): ProfileSinks | undefined {
    return this.#profileSinks.get(name);
  }

  /** Replaces every profile's own sinks: a profile whose sinks change must be stopped before and started after. */
  setProfileSinks(next: ReadonlyMap<string, ProfileSinks>): void {
    const own = new Map<string, readonly Sink[]>();
    for (const [name, sinks] of next) {
      const kept = this.#own.get(name);
      own.set(name, kept && sameProfileSinks(this.#profileSinks.get(name), sinks) ? kept : this.#ownSinks(sinks));
    }
    this.#profileSinks = next;
    this.#own = own;
  }

  /** The profile's sinks: the daemon-wide ones, its own token file in place of the daemon-wide one, its own templates after. */
  listOf(name: string): readonly Sink[] {
    return sinksForProfile(this.#shared, this.#own.get(name));
  }

  /** The templates rendered for the profile: the daemon-wide ones, then its own. */
  templatesOf(name: string): readonly TemplateSpec[] {
    return this.listOf(name).flatMap((sink) => (sink instanceof TemplateSink ? [sink.spec] : []));
  }

  /** Where the profile's token is published (its own token file, else the daemon-wide one); undefined when nothing is. */
  pathOf(name: string): string | undefined {
    return this.#tokenFileOf(name)?.fileFor(name);
  }

  publish<T extends { value: string; expiresAt: number }>(holder: Holder<T>): Promise<void> {
    const token = holder.token;
    return this.#queue(holder, async (sinks) => {
      // Checked again when the write's turn comes: a token that expired or was replaced meanwhile is not written.
      if (!token || holder.token !== token || holder.removed || !holder.holdsToken(this.now())) return false;
      const published: PublishedToken = { profile: holder.name, accessToken: token.value, expiresAt: token.expiresAt, now: this.now() };
      for (const sink of sinks) if (sink.kind !== 'template') await sink.publish(published);
      const templates = sinks.filter((sink) => sink.kind === 'template');
      if (templates.length === 0) {
        holder.published = token;
        return true;
      }
      // Rendered beside the chain, not in it: a slow or stuck template source (or account id lookup) never holds
      // up the next write, the removal at expiry, a renewal or shutdown. Ready once the renders have ended,
      // rendered or failed (each read has a deadline), unless the token changed meanwhile.
      const render = async (): Promise<void> => {
        const accountId = await this.options.accountId?.(holder.name, token.value).catch(() => undefined);
        const values: PublishedToken = { ...published, now: this.now(), ...(accountId ? { accountId } : {}) };
        await Promise.all(templates.map((sink) => sink.publish(values)));
      };
      const rendering = render().then(() => {
        if (holder.token === token && !holder.removed) holder.published = token;
      });
      this.#rendering.add(rendering);
      void rendering.finally(() => this.#rendering.delete(rendering));
      return true;
    });
  }

  /**
   * Resolves once the template renders started so far have ended, rendered or failed. Each read of a source has a
   * deadline, so this is bounded; a one-shot run waits for it before it judges what it published, and nothing on
   * the renewal path ever does.
   */
  async rendersSettled(): Promise<void> {
    while (this.#rendering.size > 0) await Promise.allSettled([...this.#rendering]);
  }

  /**
   * Withdraws the profile's token from each of its sinks: the token file and expiry go, each only if still what
   * this process wrote or adopted there; a template stays.
   */
  unpublish(holder: Holder): Promise<void> {
    return this.#queue(holder, async (sinks) => {
      holder.published = undefined;
      for (const sink of sinks) await sink.withdraw(holder.name);
      return true;
    });
  }

  /**
   * What an earlier run left at the profile's token file, taken as this process's own (it holds the sink's
   * lock): the token if it is to be read (`read`) and is what syncauth writes, else undefined. Nothing when the
   * profile has no token file (`found` false).
   */
  async adopt(name: string, read: boolean): Promise<{ found: boolean; token?: { value: string; expiresAt: number } }> {
    const file = this.#tokenFileOf(name);
    if (!file) return { found: false };
    const token = await file.adopt(name, { read, log: this.log });
    return token ? { found: true, token } : { found: true };
  }

  /**
   * Whether what the profile published is still there as this process left it, in each of its sinks that can
   * tell. False when one was removed or replaced under it; the caller publishes again.
   */
  intact(holder: Holder): Promise<boolean> {
    let whole = true;
    return this.#queue(holder, async (sinks) => {
      for (const sink of sinks) {
        if (!whole) break;
        if (sink.intact && !(await sink.intact(holder.name))) whole = false;
      }
      return false;
    }).then(() => whole);
  }

  /** Closes the sinks it made (the socket and a shared renderer are their maker's to close). */
  async close(): Promise<void> {
    for (const sink of this.#made) await sink.close();
  }

  #make<T extends Sink>(sink: T): T {
    this.#made.add(sink);
    return sink;
  }

  #template(spec: TemplateSpec): TemplateSink {
    const renderer = this.options.templates;
    return this.#make(new TemplateSink(spec, TEMPLATE_FIELD, this.log, this.options.locks, renderer ? { renderer } : {}));
  }

  #ownSinks(sinks: ProfileSinks): Sink[] {
    return [
      ...(sinks.tokenFile !== undefined ? [this.#make(new TokenFileSink(sinks.tokenFile, TOKEN_FILE_FIELD, sinks.tokenFileAccess, this.options.locks))] : []),
      ...(sinks.templates ?? []).map((spec) => this.#template(spec)),
    ];
  }

  #tokenFileOf(name: string): TokenFileSink | undefined {
    return this.listOf(name).find((sink): sink is TokenFileSink => sink instanceof TokenFileSink);
  }

  /** Runs `op` on the profile's sinks after its earlier operations; `op` tells whether it touched them (false: skipped). */
  #queue(holder: Holder, op: (sinks: readonly Sink[]) => Promise<boolean>): Promise<void> {
    const sinks = this.listOf(holder.name);
    const path = this.pathOf(holder.name);
    if (!this.publishes) return Promise.resolve();
    holder.fileChain = holder.fileChain.then(() =>
      op(sinks).then((touched) => {
        if (touched) holder.fileFailed = false;
      }, (error: unknown) => {
        holder.fileFailed = true;
        const code = (error as NodeJS.ErrnoException).code;
        this.log.error({ profile: holder.name, event: 'token_file.failed', op: 'publish', errorCode: code, error: (error as Error).message, path }, 'could not update the token file');
      }),
    );
    return holder.fileChain;
  }
}
