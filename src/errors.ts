// The exit codes follow gh: 0 ok, 1 error, 2 usage or validation, 4 authentication required.
import { redact } from './redact.js';
import { renderHint, type CommandLine, type Remedy, type RemedyHint } from './remedy.js';

export const ExitCode = {
  ok: 0,
  error: 1,
  usage: 2,
  authRequired: 4,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * What the daemon does about a failure: `terminal` and `configuration` park the profile until a person acts,
 * `rate_limited` and `transient` retry it later (after `retryAfterMs` when known), `coordinator` keeps renewing
 * and holds the work shared between replicas until the coordinator is back.
 */
export type FailureKind = 'rate_limited' | 'transient' | 'terminal' | 'configuration' | 'coordinator';

/**
 * What each {@link ErrorKind} leads to: the CLI's exit code and the daemon's decision. The one place either is
 * decided; an error family sets a kind, never an exit code of its own (the few exceptions are marked where
 * they are made).
 */
export const ERROR_KIND_OUTCOMES = {
  terminal: { exitCode: ExitCode.authRequired, daemon: 'terminal' },
  configuration: { exitCode: ExitCode.error, daemon: 'configuration' },
  bad_input: { exitCode: ExitCode.usage, daemon: 'configuration' },
  rate_limited: { exitCode: ExitCode.error, daemon: 'rate_limited' },
  transient: { exitCode: ExitCode.error, daemon: 'transient' },
  coordinator: { exitCode: ExitCode.error, daemon: 'coordinator' },
  denied: { exitCode: ExitCode.error, daemon: 'transient' },
  protocol: { exitCode: ExitCode.error, daemon: 'transient' },
  interrupted: { exitCode: ExitCode.error, daemon: 'transient' },
  unclassified: { exitCode: ExitCode.error, daemon: 'transient' },
} as const satisfies Record<string, { exitCode: ExitCode; daemon: FailureKind }>;

/**
 * What a caller must decide about a {@link SyncauthError}, read from its `kind`:
 * - `terminal`: the Dropbox grant is gone; the user must authorize again (exit 4).
 * - `configuration`: a setting or a stored file is wrong (app key, API key, URL, permissions, a corrupt state
 *   file); a person must fix it, retrying will not help (exit 1).
 * - `bad_input`: input refused before anything was sent or written (exit 2).
 * - `rate_limited`: wait `retryAfterMs` (when known), then retry (exit 1).
 * - `transient`: network, timeout, a server error or a busy lock; retry with backoff (exit 1).
 * - `coordinator`: the coordinator (Redis) of the daemon's replicas is out of reach; renewals go on, the work
 *   the replicas share waits for it (exit 1).
 * - `denied`: the user refused (clicked Deny) or the flow was stopped; do not retry on your own (exit 1).
 * - `protocol`: an answer was not what the protocol promises (bad JSON, wrong state, missing field) (exit 1).
 * - `interrupted`: SIGINT or SIGTERM stopped the command; the CLI exits 130 or 143 as a shell would.
 * - `unclassified`: no family has said more than that it failed (exit 1); the daemon retries it later, as it
 *   does any error it does not know.
 *
 * {@link ERROR_KIND_OUTCOMES} gives each kind's exit code and the daemon's decision.
 */
export type ErrorKind = keyof typeof ERROR_KIND_OUTCOMES;

export interface FieldIssue {
  /** Dotted path of the offending field, e.g. `config.remote_url`; empty for the value as a whole. */
  field: string;
  message: string;
}

export interface SyncauthErrorOptions {
  /** What a caller must decide; each family sets it from its code or status. */
  kind?: ErrorKind;
  /** Only where an exit code older than kinds differs from the kind's; otherwise the kind decides. */
  exitCode?: ExitCode;
  /** How long the other side asked to wait before a retry (Retry-After), when it said. */
  retryAfterMs?: number;
  /**
   * The next step, for people. A hint naming a syncauth command is a {@link RemedyHint}: the error then carries
   * its {@link Remedy}, and the command is written where the hint is shown (see {@link SyncauthError.hintFor}).
   */
  hint?: string | RemedyHint | undefined;
  cause?: unknown;
}

/**
 * Base of every error syncauth raises on purpose: a stable `code`, a {@link ErrorKind} saying what to do about
 * it, the exit code that kind gives, and a next step. Message and hint pass the redaction step here, once for
 * every error family: either may quote what a provider echoed.
 */
export class SyncauthError extends Error {
  readonly code: string;
  readonly kind: ErrorKind;
  readonly exitCode: ExitCode;
  readonly retryAfterMs: number | undefined;
  /** The next step, its command written `syncauth …` (see {@link hintFor} for the command as the person ran it). */
  readonly hint: string | undefined;
  /** What fixes it, when that is a syncauth command: the command the hint names. */
  readonly remedy: Remedy | undefined;
  readonly #hint: string | RemedyHint | undefined;

  constructor(code: string, message: string, options: SyncauthErrorOptions = {}) {
    super(redact(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.kind = options.kind ?? 'unclassified';
    this.exitCode = options.exitCode ?? ERROR_KIND_OUTCOMES[this.kind].exitCode;
    this.retryAfterMs = options.retryAfterMs;
    this.#hint = options.hint;
    this.hint = options.hint === undefined ? undefined : redact(renderHint(options.hint));
    this.remedy = typeof options.hint === 'object' ? options.hint.remedy : undefined;
  }

  /** The hint with its command written by `line`, as it is shown to the person (`npx … setup` through npx). */
  hintFor(line: CommandLine): string | undefined {
    return this.#hint === undefined ? undefined : redact(renderHint(this.#hint, line));
  }

  /** The hint as it was given, for an error made from this one to carry on (its command still unwritten). */
  get hintSource(): string | RemedyHint | undefined {
    return this.#hint;
  }
}

/** Input refused before anything was sent or written: kind `bad_input`, exit 2. */
export class ValidationError extends SyncauthError {
  readonly issues: FieldIssue[];

  constructor(issues: FieldIssue[], options: { hint?: string | RemedyHint } = {}) {
    super('SYNCAUTH_INVALID_INPUT', formatIssues(issues), { kind: 'bad_input', hint: options.hint });
    this.issues = issues;
  }
}

/** `absorbing` for a check that does not wait: its ValidationError's issues join `issues`, undefined returned. */
export function absorbed<T>(issues: FieldIssue[], check: () => T): T | undefined {
  try {
    return check();
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    issues.push(...error.issues);
    return undefined;
  }
}

/**
 * Runs a check; a ValidationError it throws joins `issues` (undefined is returned), so that every bad setting is
 * named at once. Any other error is thrown.
 */
export async function absorbing<T>(issues: FieldIssue[], check: () => T | Promise<T>): Promise<T | undefined> {
  try {
    return await check();
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    issues.push(...error.issues);
    return undefined;
  }
}

export function formatIssues(issues: FieldIssue[]): string {
  if (issues.length === 1) {
    const [only] = issues as [FieldIssue];
    return only.field ? `${only.field}: ${only.message}` : only.message;
  }
  return ['invalid input:', ...issues.map((i) => `  - ${i.field ? `${i.field}: ` : ''}${i.message}`)].join('\n');
}

/** Turns a zod path (`['config', 'hosts', 0]`) into the dotted field name users see (`config.hosts[0]`). */
export function fieldName(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}
