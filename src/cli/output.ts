// Printing and failing, in one place, so every command speaks the same way.
import { ExitCode, SyncauthError, ValidationError } from '../errors.js';
import { redact } from '../redact.js';

export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export const processIo: Io = { stdout: process.stdout, stderr: process.stderr };

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
  if (error instanceof SyncauthError) {
    say(`error: ${error.message}`);
    if (error.hint) say(`hint: ${error.hint}`);
    if (error instanceof ValidationError) say('nothing was sent or written.');
    return error.exitCode;
  }
  const message = error instanceof Error ? error.message : String(error);
  say(`error: unexpected failure: ${message}`);
  if (process.env.SYNCAUTH_DEBUG && error instanceof Error && error.stack) say(error.stack);
  return ExitCode.error;
}
