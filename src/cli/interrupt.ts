// Ctrl-C (SIGINT) and SIGTERM for the commands that run to an end; `daemon` and `emulate` stop themselves.
//
// The first signal says so on stderr and aborts `interruptSignal`. A command that unwinds on it (it passes
// the signal to what it waits on: the browser callback, the pasted code, prompts, Dropbox's endpoints, the
// service client) stops those waits at once and says what it left behind; if it has not ended GRACE_MS later,
// the process exits anyway. A command that does not is ended at once: what it waits on is the network, and
// exiting abandons that. A second signal ends any command at once.
//
// The exit code is 128 + the signal's number, as a shell reports a process a signal killed: 130 for SIGINT,
// 143 for SIGTERM. It stays so even when the command went on to finish.
//
// No exit cuts a write section: it waits for the open ones to finish, after the second Ctrl-C too. They are
// local and short (a state file and the secret store; a keychain call gives up after 3 s), so a careful
// operator waits milliseconds, whereas a write cut in half could leave secrets without the state that names
// them.
import { SyncauthError } from '../errors.js';
import { processIo } from './output.js';

/** How a command meets the first signal: `unwind` on `interruptSignal`, or `exit` at once. */
export type SignalPolicy = 'unwind' | 'exit';

type HandledSignal = 'SIGINT' | 'SIGTERM';

const EXIT_CODES: Record<HandledSignal, number> = { SIGINT: 130, SIGTERM: 143 };

// Ctrl-C ends a command within 5 s: a second of that is left for a write section still running at the deadline.
const GRACE_MS = 4_000;

/** A command's own account of what an interruption left behind; printed where other errors of an interrupted command are not. */
export class InterruptedError extends SyncauthError {
  constructor(message: string, options: { hint?: string } = {}) {
    super('SYNCAUTH_INTERRUPTED', message, { kind: 'interrupted', ...options });
  }
}

const controller = new AbortController();

/** Aborted by the first SIGINT or SIGTERM, with an InterruptedError as its reason. */
export const interruptSignal: AbortSignal = controller.signal;

let exitCode: number | undefined;
let exitRequested = false;
let openWriteSections = 0;

/** 130 or 143 once a signal has arrived; undefined before. */
export function interruptedExitCode(): number | undefined {
  return exitCode;
}

/** Runs `work`, local writes that belong together, so that no signal ends the process in the middle of them. */
export async function writeSection<T>(work: () => Promise<T>): Promise<T> {
  openWriteSections++;
  try {
    return await work();
  } finally {
    openWriteSections--;
    if (exitRequested && openWriteSections === 0) process.exit(exitCode);
  }
}

/** Ends an interrupted process now, or once its open write sections are done; nothing when not interrupted. */
export function exitIfInterrupted(): void {
  if (exitCode === undefined) return;
  exitRequested = true;
  if (openWriteSections === 0) process.exit(exitCode);
}

/**
 * Ctrl-C pressed at a prompt: the terminal is in raw mode there, so the key reaches the prompt instead of
 * becoming SIGINT. It is the same interruption all the same (exit 130, every wait abandoned); returns the
 * error the prompt throws to unwind the command.
 */
export function interruptedAtPrompt(): InterruptedError {
  const error = new InterruptedError('cancelled; nothing was written');
  if (exitCode === undefined) {
    exitCode = EXIT_CODES.SIGINT;
    controller.abort(new InterruptedError('stopped by Ctrl-C at a prompt'));
    setTimeout(exitIfInterrupted, GRACE_MS).unref();
  }
  return error;
}

/**
 * Makes SIGINT and SIGTERM end the command as described above. Call once, before the command runs. Returns
 * what takes the handlers away again, for a command that hands the signals on from some point (`exec`).
 */
export function handleSignals(policy: SignalPolicy): () => void {
  const receive = (signal: HandledSignal): void => {
    const { stderr } = processIo;
    if (exitCode !== undefined) {
      if (openWriteSections > 0) stderr.write('finishing the write in progress, then stopping…\n');
      exitIfInterrupted();
      return;
    }
    exitCode = EXIT_CODES[signal];
    const again = policy === 'unwind' && signal === 'SIGINT' ? ' (Ctrl-C again to stop at once)' : '';
    stderr.write(`\n${signal === 'SIGINT' ? 'interrupted' : 'SIGTERM received'}: stopping…${again}\n`);
    controller.abort(new InterruptedError(`stopped by ${signal}`));
    if (policy === 'exit') {
      exitIfInterrupted();
      return;
    }
    // Unreferenced: a command that has ended must not be kept alive by its own deadline.
    setTimeout(exitIfInterrupted, GRACE_MS).unref();
  };
  process.on('SIGINT', receive);
  process.on('SIGTERM', receive);
  return () => {
    process.off('SIGINT', receive);
    process.off('SIGTERM', receive);
  };
}
