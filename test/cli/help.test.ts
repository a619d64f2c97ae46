// Every command's --help: options show what their value looks like (`--listen <host:port>`, never a bare
// `<value>`), and the example lines run as printed: no `…` standing for an id, no `<placeholder>` that a shell
// would read as a redirection.
import { describe, expect, it } from 'vitest';
import { runInProcess } from '../helpers/in-process.js';

/** Every command path the help lists, from the top: [], ['setup'], ['source', 'create'], … */
async function commandPaths(): Promise<string[][]> {
  const paths: string[][] = [];
  const visit = async (path: string[]): Promise<void> => {
    paths.push(path);
    const { stdout } = await runInProcess([...path, '--help']);
    const section = stdout.split(/^Commands:$/m)[1] ?? '';
    for (const [, name] of section.matchAll(/^ {2}([a-z][\w-]*)/gm)) {
      if (name !== 'help') await visit([...path, name as string]);
    }
  };
  await visit([]);
  return paths;
}

/** The lines under an `Example:`/`Examples:` heading, up to the next blank line. */
function exampleLines(help: string): string[] {
  return [...help.matchAll(/^Examples?:\n((?: {2}.*\n?)+)/gm)].flatMap((m) => (m[1] as string).split('\n').filter(Boolean));
}

describe('--help', () => {
  it('names what each option takes, for every command', async () => {
    const paths = await commandPaths();
    expect(paths.length).toBeGreaterThan(15);
    for (const path of paths) {
      const { stdout, code } = await runInProcess([...path, '--help']);
      expect(code, path.join(' ')).toBe(0);
      expect(stdout, `syncauth ${path.join(' ')} --help`).not.toContain('<value>');
    }
  }, 60_000);

  it('has examples that run as printed', async () => {
    const offenders: string[] = [];
    for (const path of await commandPaths()) {
      const { stdout } = await runInProcess([...path, '--help']);
      const then = [...stdout.matchAll(/^Then, .*: (.*)$/gm)].map((m) => m[1] as string);
      for (const line of [...exampleLines(stdout), ...then]) {
        const command = line.replace(/\s+#.*$/, '');
        if (/…|<[a-z][\w -]*>/i.test(command)) offenders.push(`syncauth ${path.join(' ')}: ${line.trim()}`);
      }
    }
    expect(offenders).toEqual([]);
  }, 60_000);
});
