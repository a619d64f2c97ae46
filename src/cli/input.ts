// Reading JSON documents the user hands us (a file or stdin), with errors that say where.
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline/promises';
import { ExitCode, SyncauthError, ValidationError, type FieldIssue } from '../errors.js';
import type { CommandContext } from './context.js';
import { Uuid } from '../service/models.js';
import { decodeJson } from '../json-decode.js';

export async function readTextSource(source: string, field: string, stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  if (source === '-') {
    if ((stdin as NodeJS.ReadStream).isTTY) {
      throw new ValidationError([{ field, message: 'reading from stdin (-), but stdin is a terminal; pipe the JSON in or name a file' }]);
    }
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    return await readFile(source, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : code === 'EACCES' ? 'permission denied' : `cannot be read (${code ?? 'error'})`;
    throw new ValidationError([{ field, message: `${source}: ${reason}` }]);
  }
}

/** Parses JSON and, on failure, names the line and column, which JSON.parse does not reliably give. */
export function parseJsonText(text: string, field: string, where: string): unknown {
  const decoded = decodeJson(text);
  if (decoded.ok) return decoded.value;
  if (text.trim() === '') throw new ValidationError([{ field, message: `${where} is not valid JSON: it is empty` }]);
  // The decoder counts code points; lines and columns are counted the same way.
  const before = Array.from(text).slice(0, decoded.failure.pos).join('');
  const line = before.split('\n').length;
  const column = Array.from(before.slice(before.lastIndexOf('\n') + 1)).length + 1;
  throw new ValidationError([{ field, message: `${where} is not valid JSON at line ${line}, column ${column}: ${decoded.failure.msg}` }]);
}

export async function readJsonObject(source: string, field: string, stdin?: NodeJS.ReadableStream): Promise<Record<string, unknown>> {
  const text = await readTextSource(source, field, stdin);
  const value = parseJsonText(text, field, source === '-' ? 'stdin' : source);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError([{ field, message: `${source === '-' ? 'stdin' : source} must hold a JSON object` }]);
  }
  return value as Record<string, unknown>;
}

export async function readJsonArray(source: string, field: string, stdin?: NodeJS.ReadableStream): Promise<unknown[]> {
  const text = await readTextSource(source, field, stdin);
  const value = parseJsonText(text, field, source === '-' ? 'stdin' : source);
  if (!Array.isArray(value)) {
    throw new ValidationError([{ field, message: `${source === '-' ? 'stdin' : source} must hold a JSON array` }]);
  }
  return value;
}

/** Adds an issue to `issues` when `value` is not a UUID, naming `field`. */
export function checkUuid(value: string, field: string, issues: FieldIssue[]): void {
  if (!Uuid.safeParse(value).success) issues.push({ field, message: `must be a UUID, got "${value}"` });
}

/** Throws a ValidationError when `value` is not a UUID. */
export function requireUuid(value: string, field = 'id'): void {
  const issues: FieldIssue[] = [];
  checkUuid(value, field, issues);
  if (issues.length) throw new ValidationError(issues);
}

/**
 * Whether to delete `what` (e.g. `source connector <id>`): yes with --yes; otherwise asked on a terminal, where
 * only a typed "yes" agrees; refused with exit 2 when there is no terminal to ask on.
 */
export async function confirmDeletion(context: CommandContext, what: string, yes: boolean | undefined): Promise<boolean> {
  if (yes) return true;
  if (!process.stdin.isTTY) {
    throw new SyncauthError('SYNCAUTH_CONFIRMATION_REQUIRED', `refusing to delete ${what} without confirmation`, {
      exitCode: ExitCode.usage,
      hint: 'pass --yes to delete without a prompt',
    });
  }
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  const answer = await prompt.question(`Delete ${what}? Type "yes" to confirm: `);
  prompt.close();
  if (answer.trim().toLowerCase() === 'yes') return true;
  context.io.stderr.write('not deleted\n');
  return false;
}
