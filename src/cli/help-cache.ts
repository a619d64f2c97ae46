// `syncauth --help` as a file: the top-level help is rendered when the package is built (`node
// dist/cli/help-cache.js`, see the build script) and main.ts prints that file for `--help` and `-h` alone,
// without loading the command tree, commander or any module of ours. The help is wrapped at a fixed width
// (HELP_WIDTH) and depends on nothing at run time, so the file is what the command tree would print.
import { writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { createFactory } from './factory.js';
import { main } from './program.js';

export const HELP_FILE = new URL('./help.txt', import.meta.url);

/** What `syncauth --help` prints, through the command tree. */
export async function renderTopHelp(): Promise<string> {
  let text = '';
  const stdout = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      text += chunk.toString();
      done();
    },
  });
  const stderr = new Writable({ write: (_chunk, _encoding, done) => done() });
  const code = await main(['node', 'syncauth', '--help'], createFactory({ env: () => ({}), io: { stdout, stderr } }));
  if (code !== 0 || text === '') throw new Error(`rendering the help failed (exit ${code})`);
  return text;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) writeFileSync(HELP_FILE, await renderTopHelp());
