// Signal names as `syncauth exec` takes them, and the exit code of a process a signal ended.
import { constants } from 'node:os';
import { ValidationError } from '../errors.js';

/** What exec passes on to its child: the stop signals and the usual "reload" and "user" ones. */
export const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const satisfies readonly NodeJS.Signals[];
export type ForwardedSignal = (typeof FORWARDED_SIGNALS)[number];

/** The signals that ask the child to end; after one of them exec stops renewing and restarting. */
export function isStopSignal(signal: NodeJS.Signals): boolean {
  return signal === 'SIGINT' || signal === 'SIGTERM';
}

// A signal a child cannot catch would not tell it about a new token: it would end it.
const UNCATCHABLE = new Set(['SIGKILL', 'SIGSTOP']);

/** `HUP`, `SIGHUP`, `hup` or `SIGhup` → `SIGHUP`; an unknown or uncatchable name is bad input. */
export function parseSignal(raw: string, field: string): NodeJS.Signals {
  const upper = raw.trim().toUpperCase();
  const name = (upper.startsWith('SIG') ? upper : `SIG${upper}`) as NodeJS.Signals;
  if (!/^SIG[A-Z0-9]+$/.test(name) || !(name in constants.signals) || UNCATCHABLE.has(name)) {
    throw new ValidationError([{ field, message: 'must be a signal the child can catch, like HUP, SIGHUP, USR1 or TERM' }]);
  }
  return name;
}

/** 128 + the signal's number, as a shell reports a process that a signal ended (143 for SIGTERM). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}
