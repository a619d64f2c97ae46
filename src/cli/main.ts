#!/usr/bin/env node
// The binary: the command tree (program.ts) run with the process's own parts (factory.ts).
import { SECRET_ENV_NAMES } from './context.js';
import { processFactory } from './factory.js';
import { exitIfInterrupted } from './interrupt.js';
import { main } from './program.js';

// A reader that stops early (`syncauth status | head -1`) closes the pipe: the rest of the output has nowhere
// to go, which is no failure of the command.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
}

process.exitCode = await main(process.argv, processFactory(SECRET_ENV_NAMES));
// An interrupted command may leave abandoned work (a request nobody awaits) that would keep the process alive.
exitIfInterrupted();
