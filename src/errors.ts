// The exit codes follow gh: 0 ok, 1 error, 2 usage or validation, 4 authentication required.
import { redact } from './redact.js';

export const ExitCode = {
  ok: 0,
  error: 1,
  usage: 2,
  authRequired: 4,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

export interface FieldIssue {
  /** Dotted path of the offending field, e.g. `config.remote_url`; empty for the value as a whole. */
  field: string;
  message: string;
}

/**
 * Base of every error syncauth raises on purpose: a stable `code`, an exit code, and a next step. Message and
 * hint pass the redaction step here, once for every error family: either may quote what a provider echoed.
 */
export class SyncauthError extends Error {
  readonly code: string;
  readonly exitCode: ExitCode;
  readonly hint: string | undefined;

  constructor(code: string, message: string, options: { exitCode?: ExitCode; hint?: string; cause?: unknown } = {}) {
    super(redact(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.exitCode = options.exitCode ?? ExitCode.error;
    this.hint = options.hint === undefined ? undefined : redact(options.hint);
  }
}

/** Input refused before anything was sent or written. Always exit 2. */
export class ValidationError extends SyncauthError {
  readonly issues: FieldIssue[];

  constructor(issues: FieldIssue[], options: { hint?: string } = {}) {
    super('SYNCAUTH_INVALID_INPUT', formatIssues(issues), { exitCode: ExitCode.usage, ...options });
    this.issues = issues;
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
