// What a command takes from the world, built in one place, in the manner of gh's cmdutil.Factory: the
// environment and working directory it resolves settings from, its streams, the service client, the secret
// store, the prompter that asks the person at the terminal, and the signals that stop it. The binary uses the
// process's own; a test builds a factory of its own and runs commands in-process, fast, leaving only a few
// end-to-end tests to spawn the binary.
import type { SecretStore, OpenSecretStoreOptions } from '../credentials/index.js';
import type { ServiceClient, ServiceClientOptions } from '../service/client.js';
import { handleSignals, interruptSignal, type SignalPolicy } from './interrupt.js';
import { processIo, type Io } from './output.js';
import { askConfirm, askSecret, askSelect, askText, isInteractive, readLine } from './prompt.js';

/** Asking the person at the terminal (prompt.ts); a test answers instead. */
export interface Prompter {
  /** Whether there is a person to ask: a terminal on stdin and stderr. */
  interactive(stdin: NodeJS.ReadableStream): boolean;
  text: typeof askText;
  secret: typeof askSecret;
  select: typeof askSelect;
  confirm: typeof askConfirm;
  readLine: typeof readLine;
}

/** How a command meets Ctrl-C and SIGTERM (interrupt.ts). */
export interface Signals {
  /** Aborts when the command is interrupted; every wait listens to it. */
  readonly interrupted: AbortSignal;
  /** Starts handling them with `policy`; returns how to stop. */
  handle(policy: SignalPolicy): () => void;
}

export const processPrompter: Prompter = { interactive: isInteractive, text: askText, secret: askSecret, select: askSelect, confirm: askConfirm, readLine };
export const processSignals: Signals = { interrupted: interruptSignal, handle: handleSignals };

export interface Factory {
  /**
   * The environment settings are resolved from. The process factory hands out a copy and takes the secrets
   * out of process.env itself, so that no child process inherits them.
   */
  env(): NodeJS.ProcessEnv;
  /** Where `.env` is looked for. */
  cwd(): string;
  io: Io;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Async so that a command that never talks to the service never loads its client (nor `--help`). */
  serviceClient(options: ServiceClientOptions): Promise<ServiceClient>;
  secretStore(options: OpenSecretStoreOptions): Promise<SecretStore>;
  prompter: Prompter;
  signals: Signals;
}

/** A factory of the real parts, with the environment, directory and streams given (the process's by default). */
export function createFactory(parts: Partial<Pick<Factory, 'env' | 'cwd' | 'io' | 'stdin' | 'prompter' | 'signals'>> = {}): Factory {
  return {
    prompter: parts.prompter ?? processPrompter,
    signals: parts.signals ?? processSignals,
    env: parts.env ?? (() => ({ ...process.env })),
    cwd: parts.cwd ?? (() => process.cwd()),
    io: parts.io ?? processIo,
    stdin: parts.stdin ?? process.stdin,
    async serviceClient(options) {
      const { ServiceClient } = await import('../service/client.js');
      return new ServiceClient(options);
    },
    async secretStore(options) {
      const { openSecretStore } = await import('../credentials/index.js');
      return openSecretStore(options);
    },
  };
}

/** The binary's factory: the process's parts, and the secrets taken out of process.env as they are read. */
export function processFactory(secretNames: readonly string[]): Factory {
  return createFactory({
    env() {
      const env: NodeJS.ProcessEnv = { ...process.env };
      // The secrets move out of process.env into the command's own copy: every child process (the browser
      // launcher and whatever it starts, the keychain helper) inherits process.env, and none of them needs one.
      for (const name of secretNames) delete process.env[name];
      return env;
    },
  });
}
