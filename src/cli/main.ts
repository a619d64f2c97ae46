#!/usr/bin/env node
// The binary: the command tree (program.ts) run with the process's own parts (factory.ts). Nothing is imported
// statically: `syncauth --help` (or `-h`) alone prints the help rendered at build time (help-cache.ts) and
// loads nothing else.
import { readFileSync } from 'node:fs';

// A reader that stops early (`syncauth status | head -1`) closes the pipe: the rest of the output has nowhere
// to go, which is no failure of the command.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
}

const args = process.argv.slice(2);
const prerendered = args.length === 1 && (args[0] === '--help' || args[0] === '-h') ? readPrerenderedHelp() : undefined;
if (prerendered !== undefined) {
  process.stdout.write(prerendered);
} else {
  const [{ SECRET_ENV_NAMES }, { processFactory }, { exitIfInterrupted }, { main }, { recordInvocation }] = await Promise.all([
    import('./context.js'),
    import('./factory.js'),
    import('./interrupt.js'),
    import('./program.js'),
    import('../profile/name.js'),
  ]);
  // Next commands are printed as the person ran this one (npx, the bin on PATH, node and the script).
  recordInvocation({ argv: process.argv, env: process.env, cwd: process.cwd() });
  process.exitCode = await main(process.argv, processFactory(SECRET_ENV_NAMES));
  // An interrupted command may leave abandoned work (a request nobody awaits) that would keep the process alive.
  exitIfInterrupted();
}

/** The help file beside this one; undefined when it is missing (a build that did not render it), to render it now. */
function readPrerenderedHelp(): string | undefined {
  try {
    return readFileSync(new URL('./help.txt', import.meta.url), 'utf8');
  } catch {
    return undefined;
  }
}
