// Asking the person at the terminal. Prompts go to stderr so stdout stays clean for data; secrets are asked
// with hidden input. Without a terminal nothing is asked: the caller gets an error naming what is missing.
import { createInterface } from 'node:readline';
import { ExitCode, SyncauthError } from '../errors.js';
import { interruptSignal } from './interrupt.js';

export function isInteractive(stdin: NodeJS.ReadableStream = process.stdin): boolean {
  return (stdin as NodeJS.ReadStream).isTTY === true && process.stderr.isTTY === true;
}

function cancelled(): SyncauthError {
  return new SyncauthError('SYNCAUTH_CANCELLED', 'cancelled; nothing was written', { exitCode: ExitCode.error });
}

export async function askText(message: string, options: { placeholder?: string; initial?: string; validate?: (value: string) => string | undefined } = {}): Promise<string> {
  const { text, isCancel } = await import('@clack/prompts');
  const answer = await text({
    message,
    output: process.stderr,
    signal: interruptSignal,
    ...(options.placeholder ? { placeholder: options.placeholder } : {}),
    ...(options.initial ? { initialValue: options.initial } : {}),
    ...(options.validate ? { validate: (v: string | undefined) => options.validate?.(v ?? '') } : {}),
  });
  if (isCancel(answer)) throw cancelled();
  return answer.trim();
}

export async function askSecret(message: string, options: { validate?: (value: string) => string | undefined } = {}): Promise<string> {
  const { password, isCancel } = await import('@clack/prompts');
  const answer = await password({
    message,
    output: process.stderr,
    signal: interruptSignal,
    validate: (v: string | undefined) => (v && v.trim() ? options.validate?.(v) : 'required'),
  });
  if (isCancel(answer)) throw cancelled();
  return answer.trim();
}

/**
 * Reads one line from a non-terminal stdin (a pasted code piped in), or undefined at end of input. Rejects
 * with the signal's reason when `signal` aborts first.
 */
export function readLine(stdin: NodeJS.ReadableStream = process.stdin, signal: AbortSignal = interruptSignal): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const lines = createInterface({ input: stdin, terminal: false });
    let settled = false;
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      lines.close();
      // A script may hold the pipe open after the line; an open stdin would keep the process alive after the
      // command is done.
      (stdin as { unref?: () => void }).unref?.();
      outcome();
    };
    const onAbort = (): void => settle(() => reject(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    lines.once('line', (line) => settle(() => resolve(line.trim())));
    lines.once('close', () => settle(() => resolve(undefined)));
  });
}

/** One choice out of `choices` (arrow keys and Enter), returning the chosen value. */
export async function askSelect<Value extends string>(
  message: string,
  choices: { value: Value; label: string; hint?: string }[],
  options: { initial?: Value } = {},
): Promise<Value> {
  const { select, isCancel } = await import('@clack/prompts');
  const answer = await select<Value>({
    message,
    output: process.stderr,
    signal: interruptSignal,
    // Each choice as Option<Value>: the generic Option type resolves only for a concrete Value.
    options: choices.map((c) => ({ value: c.value, label: c.label, ...(c.hint ? { hint: c.hint } : {}) })) as Parameters<typeof select<Value>>[0]['options'],
    ...(options.initial !== undefined ? { initialValue: options.initial } : {}),
  });
  if (isCancel(answer)) throw cancelled();
  return answer;
}

/** A yes/no question; `initial` is what Enter alone answers (no, unless said otherwise). */
export async function askConfirm(message: string, options: { initial?: boolean } = {}): Promise<boolean> {
  const { confirm, isCancel } = await import('@clack/prompts');
  const answer = await confirm({ message, output: process.stderr, signal: interruptSignal, initialValue: options.initial ?? false });
  if (isCancel(answer)) throw cancelled();
  return answer;
}
