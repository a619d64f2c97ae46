// Asking the person at the terminal. Prompts go to stderr so stdout stays clean for data; secrets are asked
// with hidden input. Without a terminal nothing is asked: the caller gets an error naming what is missing.
import { createInterface } from 'node:readline';
import { interruptedAtPrompt, interruptSignal } from './interrupt.js';

export function isInteractive(stdin: NodeJS.ReadableStream = process.stdin): boolean {
  return (stdin as NodeJS.ReadStream).isTTY === true && process.stderr.isTTY === true;
}

/**
 * A signal for one prompt that aborts with `interruptSignal`, and the listener to let go of once it is answered.
 * The prompt library adds an abort listener to the signal it is given and never removes it: given the
 * process-wide `interruptSignal`, a setup of eleven questions left eleven listeners and Node warned of a leak.
 */
async function withPromptSignal<T>(ask: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onAbort = (): void => controller.abort(interruptSignal.reason);
  if (interruptSignal.aborted) onAbort();
  else interruptSignal.addEventListener('abort', onAbort, { once: true });
  try {
    return await ask(controller.signal);
  } finally {
    interruptSignal.removeEventListener('abort', onAbort);
  }
}

/** Ctrl-C (or Escape) at a prompt, or a signal that stopped it: the command is interrupted, exit 130. */
function cancelled(): Error {
  return interruptedAtPrompt();
}

export async function askText(message: string, options: { placeholder?: string; initial?: string; validate?: (value: string) => string | undefined } = {}): Promise<string> {
  const { text, isCancel } = await import('@clack/prompts');
  const answer = await withPromptSignal((signal) => text({
    message,
    output: process.stderr,
    signal,
    ...(options.placeholder ? { placeholder: options.placeholder } : {}),
    ...(options.initial ? { initialValue: options.initial } : {}),
    ...(options.validate ? { validate: (v: string | undefined) => options.validate?.(v ?? '') } : {}),
  }));
  if (isCancel(answer)) throw cancelled();
  return answer.trim();
}

export async function askSecret(message: string, options: { validate?: (value: string) => string | undefined } = {}): Promise<string> {
  const { password, isCancel } = await import('@clack/prompts');
  const answer = await withPromptSignal((signal) => password({
    message,
    output: process.stderr,
    signal,
    validate: (v: string | undefined) => (v && v.trim() ? options.validate?.(v) : 'required'),
  }));
  if (isCancel(answer)) throw cancelled();
  return answer.trim();
}

/**
 * What may be shown of a key typed hidden, so that a typo can be seen: its last four characters, never more,
 * and none of a key shorter than eight (four would then be half of it).
 */
export function hiddenTail(value: string): string {
  const chars = Array.from(value);
  return `••••${chars.length >= 8 ? chars.slice(-4).join('') : ''}`;
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
  const answer = await withPromptSignal((signal) => select<Value>({
    message,
    output: process.stderr,
    signal,
    // Each choice as Option<Value>: the generic Option type resolves only for a concrete Value.
    options: choices.map((c) => ({ value: c.value, label: c.label, ...(c.hint ? { hint: c.hint } : {}) })) as Parameters<typeof select<Value>>[0]['options'],
    ...(options.initial !== undefined ? { initialValue: options.initial } : {}),
  }));
  if (isCancel(answer)) throw cancelled();
  return answer;
}

/** A yes/no question; `initial` is what Enter alone answers (no, unless said otherwise). */
export async function askConfirm(message: string, options: { initial?: boolean } = {}): Promise<boolean> {
  const { confirm, isCancel } = await import('@clack/prompts');
  const answer = await withPromptSignal((signal) => confirm({ message, output: process.stderr, signal, initialValue: options.initial ?? false }));
  if (isCancel(answer)) throw cancelled();
  return answer;
}
