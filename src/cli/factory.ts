// What a command takes from the world, built in one place, in the manner of gh's cmdutil.Factory: the
// environment and working directory it resolves settings from, its streams, the service client and the secret
// store. The binary uses the process's own; a test builds a factory of its own and runs commands in-process,
// fast, leaving only a few end-to-end tests to spawn the binary. Prompts and signals still come from the
// process (a terminal and real signals are what those tests are about).
import type { SecretStore, OpenSecretStoreOptions } from '../credentials/index.js';
import type { ServiceClient, ServiceClientOptions } from '../service/client.js';
import { processIo, type Io } from './output.js';

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
}

/** A factory of the real parts, with the environment, directory and streams given (the process's by default). */
export function createFactory(parts: Partial<Pick<Factory, 'env' | 'cwd' | 'io' | 'stdin'>> = {}): Factory {
  return {
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
