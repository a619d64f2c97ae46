// Templates: files rendered from the token after each renewal, for consumers that want it inside their own
// configuration (`--template SRC:DEST[:MODE]`, MODE octal, default 0600; DEST may contain `{profile}`).
//
// A template is plain text in which `{{ field }}` (spaces inside the braces optional) is replaced by one of:
//
//   access_token     the current access token
//   expires_at       its expiry, RFC 3339 in UTC (2025-01-31T12:00:00.000Z)
//   expires_at_unix  its expiry, whole seconds since the Unix epoch
//   expires_in       whole seconds the token has left when the file is rendered
//   profile          the profile's name
//   account_id       the Dropbox account id of the profile's grant (a render fails while it is unknown)
//
// There is no escaping, no condition and no loop. Any `{{` that does not open one of these fields is an error,
// so a typo is refused when the daemon starts, not found in a consumer's configuration later. For example, an
// rclone remote:
//
//   [dropbox]
//   type = dropbox
//   token = {"access_token":"{{ access_token }}","token_type":"bearer","expiry":"{{ expires_at }}"}
//
// or an env file: `DROPBOX_ACCESS_TOKEN={{access_token}}`.
//
// SRC is read again at every render, so an edit applies at the next renewal. A render that fails (SRC
// unreadable, an unknown field, a write error) leaves the previous DEST as it was and is logged.
//
// SRC may sit in a directory another user writes (the consumer's own configuration): it is read as
// `readRegularFile` reads (src/publish/safe-read.ts), so a FIFO or device put there cannot wedge the daemon, and
// a symbolic link put there cannot make it publish a file that user could not read. Nor can a link put at DEST
// make it write another file: the link is replaced.
import { access, constants, stat } from 'node:fs/promises';
import path from 'node:path';
import { SyncauthError, ValidationError } from '../errors.js';
import type { FieldIssue } from '../errors.js';
import type { Logger } from '../log.js';
import { writePrivateFile } from '../profile/files.js';
import { identityOf, parseMode, type FileIdentity } from './file.js';
import type { SinkLocks } from './sink-lock.js';
import { PROFILE_PLACEHOLDER, tokenFileFor } from './place.js';
import { FileRefusedError, readRegularFile } from './safe-read.js';

export interface TemplateSpec {
  source: string;
  dest: string;
  mode: number;
}

export const TEMPLATE_FIELDS: readonly string[] = Object.freeze([
  'access_token',
  'expires_at',
  'expires_at_unix',
  'expires_in',
  'profile',
  'account_id',
]);

export interface TemplateValues {
  accessToken: string;
  /** Epoch milliseconds. */
  expiresAt: number;
  profile: string;
  accountId?: string;
  /** Epoch milliseconds: the time `expires_in` counts from. */
  now: number;
}

export class TemplateError extends SyncauthError {
  constructor(message: string) {
    super('TEMPLATE_INVALID', message, { hint: `a template may use {{ ${TEMPLATE_FIELDS.join(' }}, {{ ')} }}` });
  }
}

/** `--template SRC:DEST[:MODE]`, paths made absolute against the working directory. */
export function parseTemplateFlag(raw: string, field = '--template'): TemplateSpec {
  const parts = raw.split(':');
  const refuse = (message: string): never => {
    throw new ValidationError([{ field, message }]);
  };
  if (parts.length < 2 || parts.length > 3) refuse(`"${raw}" is not SRC:DEST or SRC:DEST:MODE (paths cannot contain ":")`);
  const [source = '', dest = '', mode] = parts;
  if (!source.trim()) refuse(`"${raw}" has no template file (SRC:DEST[:MODE])`);
  if (!dest.trim()) refuse(`"${raw}" has no destination file (SRC:DEST[:MODE])`);
  return {
    source: path.resolve(source),
    dest: path.resolve(dest),
    mode: mode === undefined ? 0o600 : parseMode(mode, field),
  };
}

type Part = { text: string } | { field: string };

interface Scan {
  parts: Part[];
  problems: string[];
}

const PLACEHOLDER = /\{\{[ \t]*([A-Za-z0-9_]+)[ \t]*\}\}/y;

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) line += 1;
  return line;
}

/**
 * Splits a template into text and fields. Problems name the line and the field, never quote the text around
 * it: a template may hold other secrets of the consumer's configuration.
 */
function scan(text: string): Scan {
  const parts: Part[] = [];
  const problems: string[] = [];
  let from = 0;
  for (let open = text.indexOf('{{'); open !== -1; open = text.indexOf('{{', from)) {
    PLACEHOLDER.lastIndex = open;
    const match = PLACEHOLDER.exec(text);
    const name = match?.[1];
    if (!match || name === undefined) {
      problems.push(`line ${lineOf(text, open)}: "{{" does not open a field such as {{ access_token }}`);
      from = open + 2;
      continue;
    }
    if (!TEMPLATE_FIELDS.includes(name)) problems.push(`line ${lineOf(text, open)}: unknown field {{ ${name} }}`);
    parts.push({ text: text.slice(from, open) }, { field: name });
    from = open + match[0].length;
  }
  parts.push({ text: text.slice(from) });
  return { parts, problems };
}

function valueOf(name: string, values: TemplateValues, where: string): string {
  switch (name) {
    case 'access_token':
      return values.accessToken;
    case 'expires_at':
      return new Date(values.expiresAt).toISOString();
    case 'expires_at_unix':
      return String(Math.floor(values.expiresAt / 1000));
    case 'expires_in':
      return String(Math.max(0, Math.floor((values.expiresAt - values.now) / 1000)));
    case 'profile':
      return values.profile;
    case 'account_id':
      if (values.accountId === undefined) {
        throw new TemplateError(`${where}uses {{ account_id }}, but the account id of profile ${values.profile} is not known`);
      }
      return values.accountId;
    default:
      throw new TemplateError(`${where}unknown field {{ ${name} }}`);
  }
}

/** Plain substitution of `{{ field }}`; throws TemplateError for anything else that opens with `{{`. */
export function renderTemplate(text: string, values: TemplateValues, source?: string): string {
  const where = source === undefined ? '' : `template ${source}: `;
  const { parts, problems } = scan(text);
  if (problems.length > 0) throw new TemplateError(`${where}${problems.join('; ')}`);
  return parts.map((part) => ('text' in part ? part.text : valueOf(part.field, values, where))).join('');
}

/** A template's text: a regular file of at most 1 MiB, read within 5 s, behind trusted links only (see safe-read.ts). */
function readTemplate(source: string): Promise<string> {
  return readRegularFile(source);
}

/**
 * Refuses, before anything is written, a template that cannot render: SRC unreadable or using an unknown field,
 * DEST in a directory that does not exist or cannot be written, or one DEST for several profiles.
 */
export async function checkTemplate(spec: TemplateSpec, profiles: readonly string[], field = '--template'): Promise<void> {
  const issues: FieldIssue[] = [];
  try {
    const text = await readTemplate(spec.source);
    for (const problem of scan(text).problems) issues.push({ field, message: `template ${spec.source}, ${problem}` });
  } catch (error) {
    if (error instanceof FileRefusedError) {
      issues.push({ field, message: `cannot read template ${spec.source}: it ${error.why}` });
    } else {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      issues.push({ field, message: `cannot read template ${spec.source} (${code})` });
    }
  }
  if (profiles.length > 1 && !spec.dest.includes(PROFILE_PLACEHOLDER)) {
    issues.push({ field, message: `${spec.dest} serves ${profiles.length} profiles, so it must contain ${PROFILE_PLACEHOLDER}` });
  }
  for (const dest of new Set(profiles.map((profile) => tokenFileFor(spec.dest, profile)))) {
    if (dest === spec.source) {
      issues.push({ field, message: `${dest} is the template itself; render it somewhere else` });
      continue;
    }
    const dir = path.dirname(dest);
    const info = await stat(dir).catch(() => undefined);
    if (!info?.isDirectory()) {
      issues.push({ field, message: `the directory of ${dest} does not exist` });
      continue;
    }
    if (await access(dir, constants.W_OK | constants.X_OK).then(() => false, () => true)) {
      issues.push({ field, message: `cannot write in the directory of ${dest}` });
    }
    if ((await stat(dest).catch(() => undefined))?.isDirectory()) issues.push({ field, message: `${dest} is a directory` });
  }
  if (issues.length > 0) throw new ValidationError(issues);
}

/** Whether any of the templates, as their sources read now, uses `field` (e.g. account_id, which costs a call to learn). */
export async function templatesUse(specs: readonly TemplateSpec[], field: (typeof TEMPLATE_FIELDS)[number]): Promise<boolean> {
  const pattern = new RegExp(`\\{\\{[ \\t]*${field}[ \\t]*\\}\\}`);
  const sources = await Promise.all(specs.map((spec) => readTemplate(spec.source).catch(() => '')));
  return sources.some((text) => pattern.test(text));
}

/** Learning a profile's account id for its templates: one small call, never worth a long wait. */
export const ACCOUNT_ID_TIMEOUT_MS = 5_000;

interface Slot {
  /** The render of this file under way. */
  running: Promise<void>;
  /** The render to do once it ends: only the latest asked for; those it replaced are answered with it. */
  next?: { spec: TemplateSpec; values: TemplateValues; answer: (() => void)[] };
}

/**
 * Renders templates after each renewal. Never throws: a failure keeps the previous file and is logged. Renders
 * of one file run one after another, and while one runs only the latest render asked for waits: a slow source
 * delays its own file, never a renewal (the daemon does not wait for a render) nor the other files.
 */
export class TemplateRenderer {
  readonly specs: readonly TemplateSpec[];
  readonly #slots = new Map<string, Slot>();
  /** What this process last rendered at each destination, as it was then (see `intact`). */
  readonly #own = new Map<string, FileIdentity>();
  #stopped = false;

  /** `locks`: a destination is written only once this process holds its lock (see sink-lock.ts). */
  constructor(
    specs: readonly TemplateSpec[],
    private readonly log: Logger,
    private readonly locks?: SinkLocks,
  ) {
    this.specs = Object.freeze([...specs]);
  }

  /** Whether each destination of `specs` for `profile` is still what this process last rendered there. */
  async intact(specs: readonly TemplateSpec[], profile: string): Promise<boolean> {
    for (const spec of specs) {
      const dest = tokenFileFor(spec.dest, profile);
      // A render under way will write it anew; one that failed left no file of this process to judge.
      if (this.#slots.has(dest) || !this.#own.has(dest)) continue;
      if ((await identityOf(dest)) !== this.#own.get(dest)) return false;
    }
    return true;
  }

  /**
   * Resolves once each template has been rendered with `values` or a later render (or has failed, logged).
   * `specs`: those of the profile (the daemon-wide ones and its own), by default the daemon-wide ones.
   */
  async render(values: TemplateValues, specs: readonly TemplateSpec[] = this.specs): Promise<void> {
    await Promise.all(specs.map((spec) => this.#queue(spec, tokenFileFor(spec.dest, values.profile), values)));
  }

  /** No render starts after this; one queued is dropped, one under way is abandoned to finish by itself. */
  stop(): void {
    this.#stopped = true;
    for (const slot of this.#slots.values()) {
      for (const answer of slot.next?.answer ?? []) answer();
      delete slot.next;
    }
  }

  #queue(spec: TemplateSpec, dest: string, values: TemplateValues): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const slot = this.#slots.get(dest);
    if (!slot) {
      this.#start(spec, dest, values, []);
      return (this.#slots.get(dest) as Slot).running;
    }
    return new Promise<void>((resolve) => {
      const answer = [...(slot.next?.answer ?? []), resolve];
      slot.next = { spec, values, answer };
    });
  }

  #start(spec: TemplateSpec, dest: string, values: TemplateValues, answer: (() => void)[]): void {
    const running = this.#renderOne(spec, dest, values).then(() => {
      for (const done of answer) done();
      const slot = this.#slots.get(dest);
      const next = slot?.next;
      if (!slot || !next || this.#stopped) {
        this.#slots.delete(dest);
        return;
      }
      delete slot.next;
      this.#start(next.spec, dest, next.values, next.answer);
    });
    this.#slots.set(dest, { running });
  }

  async #renderOne(spec: TemplateSpec, dest: string, values: TemplateValues): Promise<void> {
    const context = { profile: values.profile, op: 'publish', template: spec.source, dest };
    try {
      await this.locks?.ensure(dest, '--template');
      const text = await readTemplate(spec.source);
      // A link at DEST is replaced, not followed: whoever writes DEST's directory (a consumer's own) must not be
      // able to point the render at another file, which this process may be allowed to overwrite.
      await writePrivateFile(dest, renderTemplate(text, values, spec.source), { mode: spec.mode }, { durable: false, followLinks: false });
      const identity = await identityOf(dest);
      if (identity !== undefined) this.#own.set(dest, identity);
      this.log.debug({ ...context, event: 'template.rendered' }, 'template rendered');
    } catch (error) {
      // Messages name files and fields only: neither the token nor the rendered text reaches them.
      const errorCode = error instanceof SyncauthError ? error.code : (error as NodeJS.ErrnoException).code;
      this.log.error(
        { ...context, event: 'template.failed', errorCode, error: (error as Error).message },
        'could not render the template; the previous file is kept',
      );
    }
  }
}
