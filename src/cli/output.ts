// Printing and failing, in one place, so every command speaks the same way.
import { ExitCode, SyncauthError, ValidationError } from '../errors.js';
import { syncauthCommand } from '../profile/name.js';
import { redact } from '../redact.js';
import { describeSystemError } from './errno.js';

export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export const processIo: Io = { stdout: process.stdout, stderr: process.stderr };

/**
 * Whether to colour what goes to `stream`: the one decision every styled line passes. NO_COLOR (any non-empty
 * value, https://no-color.org), NODE_DISABLE_COLORS, `--no-color` and TERM=dumb turn it off; otherwise a
 * terminal gets colour, and FORCE_COLOR (other than 0 or false) asks for it on a pipe too. NO_COLOR wins over
 * FORCE_COLOR: it is the reader's own choice, FORCE_COLOR is often set once for a whole CI system.
 */
export function colourEnabled(stream: NodeJS.WritableStream, env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = process.argv): boolean {
  if (env.NO_COLOR) return false;
  if (env.NODE_DISABLE_COLORS) return false;
  const end = argv.indexOf('--');
  if ((end < 0 ? argv : argv.slice(0, end)).includes('--no-color')) return false;
  const force = env.FORCE_COLOR;
  if (force !== undefined && force !== '') return !['0', 'false'].includes(force.toLowerCase());
  if (env.TERM === 'dumb') return false;
  return (stream as NodeJS.WriteStream).isTTY === true;
}

export interface Palette {
  /** `error:`, `fail`. */
  bad: (text: string) => string;
  /** `warning:`, `warn`. */
  warn: (text: string) => string;
  /** `ok`. */
  good: (text: string) => string;
  /** `hint:`, `note:`. */
  quiet: (text: string) => string;
  bold: (text: string) => string;
}

const sgr = (open: number, close: number) => (text: string) => `\x1b[${open}m${text}\x1b[${close}m`;
const COLOURED: Palette = { bad: sgr(31, 39), warn: sgr(33, 39), good: sgr(32, 39), quiet: sgr(36, 39), bold: sgr(1, 22) };
const PLAIN: Palette = { bad: String, warn: String, good: String, quiet: String, bold: String };

/** The styles for `stream`: colours where colourEnabled says so, the text unchanged otherwise. */
export function paletteFor(stream: NodeJS.WritableStream): Palette {
  return colourEnabled(stream) ? COLOURED : PLAIN;
}

/** A `warning: …` line on stderr. */
export function warn(io: Io, text: string): void {
  io.stderr.write(`${paletteFor(io.stderr).warn('warning:')} ${text}\n`);
}

/** A `note: …` line on stderr. */
export function note(io: Io, text: string): void {
  io.stderr.write(`${paletteFor(io.stderr).quiet('note:')} ${text}\n`);
}

export function printJson(io: Io, value: unknown): void {
  io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** Prints `key: value` lines, nested objects indented, aligned like `gh ... view`. */
export function printRecord(io: Io, record: Record<string, unknown>, indent = ''): void {
  const width = Math.max(0, ...Object.keys(record).map((k) => k.length)) + 1;
  for (const [key, value] of Object.entries(record)) {
    const label = `${indent}${`${key}:`.padEnd(width + 1)}`;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      io.stdout.write(`${indent}${key}:\n`);
      printRecord(io, value as Record<string, unknown>, `${indent}  `);
    } else {
      io.stdout.write(`${label}${formatScalar(value)}\n`);
    }
  }
}

function formatScalar(value: unknown): string {
  if (value === null || value === undefined) return '-';
  if (Array.isArray(value)) return value.length === 0 ? '-' : value.map((v) => (typeof v === 'object' ? JSON.stringify(v) : String(v))).join(', ');
  return String(value);
}

/** A count with its noun in the right number: `1 entry`, `2 entries`; `more` marks a lower bound (`100+ entries`). */
export function counted(count: number, singular: string, plural = `${singular}s`, more = false): string {
  return `${count}${more ? '+' : ''} ${count === 1 && !more ? singular : plural}`;
}

/** Prints rows under a header, columns padded to the widest cell. */
export function printTable(io: Io, header: string[], rows: string[][]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  io.stdout.write(`${line(header)}\n`);
  for (const row of rows) io.stdout.write(`${line(row)}\n`);
}

/**
 * Renders an error for people and returns the exit code; never prints a stack for expected failures. Every
 * line passes the redaction step: a message may quote what a provider echoed back.
 */
export function reportError(io: Io, error: unknown): ExitCode {
  const say = (line: string) => io.stderr.write(`${redact(line)}\n`);
  const paint = paletteFor(io.stderr);
  // An operating-system error (a busy port, a path of the wrong kind) is a sentence too, naming what it is about.
  const known = error instanceof SyncauthError ? error : describeSystemError(error);
  if (known) {
    say(`${paint.bad('error:')} ${known.message}`);
    // A remedy's command as the person ran syncauth (`npx … setup` through npx).
    const hint = known.hintFor(syncauthCommand);
    if (hint) say(`${paint.quiet('hint:')} ${hint}`);
    // Input refused before anything was sent or written, by definition of the kind (src/errors.ts).
    if (known instanceof ValidationError || known.kind === 'bad_input') say('nothing was sent or written.');
    if (process.env.SYNCAUTH_DEBUG && known !== error && error instanceof Error && error.stack) say(error.stack);
    return known.exitCode;
  }
  const message = error instanceof Error ? error.message : String(error);
  say(`${paint.bad('error:')} unexpected failure: ${message}`);
  if (process.env.SYNCAUTH_DEBUG && error instanceof Error && error.stack) say(error.stack);
  return ExitCode.error;
}
