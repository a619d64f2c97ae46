// Runs a command in this process, through the same command tree and exit codes as the binary, with a factory
// of its own: the environment and directory given, stdout and stderr captured, stdin from a string. Much
// faster than spawning the binary; what is about the process itself (signals, pipes, a terminal, the packed
// tarball) is left to the end-to-end tests that do spawn it.
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { createFactory, processPrompter, type Prompter } from '../../src/cli/factory.js';
import { main } from '../../src/cli/program.js';
import { tempDir, type CliOptions, type CliResult } from './cli.js';

function capture(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
}

/**
 * A prompter that answers from a list, as a person at a terminal would type, and records what it was asked.
 * Nothing is shown: the questions are only recorded.
 */
export function scriptedPrompter(answers: string[]): Prompter & { asked: string[] } {
  const asked: string[] = [];
  const next = async (message: string): Promise<string> => {
    asked.push(message);
    const answer = answers.shift();
    if (answer === undefined) throw new Error(`no scripted answer left for "${message}"`);
    return answer;
  };
  return {
    ...processPrompter,
    asked,
    interactive: () => true,
    text: (message) => next(message),
    secret: (message) => next(message),
    confirm: async (message) => (await next(message)) === 'yes',
  };
}

export async function runInProcess(args: string[], options: CliOptions & { prompter?: Prompter } = {}): Promise<CliResult> {
  const cwd = options.cwd ?? tempDir();
  // The same clean environment runCli gives the binary.
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config') };
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  const stdout = capture();
  const stderr = capture();
  const factory = createFactory({
    env: () => ({ ...env }),
    cwd: () => cwd,
    io: { stdout: stdout.stream, stderr: stderr.stream },
    stdin: Readable.from([options.stdin ?? '']),
    ...(options.prompter ? { prompter: options.prompter } : {}),
  });
  const code = await main(['node', 'syncauth', ...args], factory);
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}
