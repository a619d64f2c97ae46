// A command line that names a top-level command first declares that command alone (program.ts, buildProgram's
// `only`): start-up builds a few options rather than the whole tree. What the user sees must not change.
import { Writable } from 'node:stream';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { createFactory } from '../../src/cli/factory.js';
import { buildProgram, COMMAND_NAMES, commandRun, type CommandName } from '../../src/cli/program.js';
import { runInProcess } from '../helpers/in-process.js';

function quietFactory() {
  const sink = () => new Writable({ write: (_chunk, _encoding, done) => done() });
  return createFactory({ env: () => ({}), io: { stdout: sink(), stderr: sink() } });
}

/** Every command under `command`, itself first, with its full path. */
function walk(command: Command, path: string[] = []): Array<[string, Command]> {
  return [[path.join(' '), command], ...command.commands.flatMap((sub) => walk(sub, [...path, sub.name()]))];
}

describe('declaring only the command that runs', () => {
  const full = buildProgram(quietFactory());

  it('knows every top-level command of the tree', () => {
    expect(full.commands.map((c) => c.name())).toEqual([...COMMAND_NAMES]);
  });

  it('gives each command and subcommand the same help, arguments and options as the whole tree', () => {
    for (const name of COMMAND_NAMES) {
      const only = buildProgram(quietFactory(), name);
      expect(only.commands.map((c) => c.name())).toEqual([name]);
      const expected = walk(full.commands.find((c) => c.name() === name) as Command, [name]);
      const got = walk(only.commands[0] as Command, [name]);
      expect(got.map(([path]) => path)).toEqual(expected.map(([path]) => path));
      for (const [i, [path, command]] of got.entries()) {
        const reference = (expected[i] as [string, Command])[1];
        expect(command.helpInformation(), path).toBe(reference.helpInformation());
        expect(command.options.map((o) => [o.flags, o.defaultValue]), path).toEqual(reference.options.map((o) => [o.flags, o.defaultValue]));
      }
    }
  });

  it('is chosen only when the first argument names a command, and never for completion', () => {
    const argv = (...args: string[]) => ['node', 'syncauth', ...args];
    expect(commandRun(argv('source', 'list'))).toBe('source');
    expect(commandRun(argv('reauth-link', '--profile', 'p'))).toBe('reauth-link');
    for (const args of [[], ['--no-color', 'source', 'list'], ['help', 'source'], ['sorce', 'list'], ['completion', 'bash'], ['--help']]) {
      expect(commandRun(argv(...args)), args.join(' ')).toBeUndefined();
    }
    const named: CommandName[] = COMMAND_NAMES.filter((n) => n !== 'completion');
    for (const name of named) expect(commandRun(argv(name))).toBe(name);
  });

  it('says the same about mistakes made after a command as the whole tree does', async () => {
    const seen = await runInProcess(['source', 'lst']);
    expect(seen.code).toBe(2);
    expect(seen.stderr).toContain("unknown command 'lst'");
    expect(seen.stderr).toContain('(Did you mean list?)');
    const option = await runInProcess(['source', 'list', '--typ', 's3']);
    expect(option.code).toBe(2);
    expect(option.stderr).toContain("unknown option '--typ'");
    expect(option.stderr).toContain('(Did you mean --type?)');
    // The whole tree, through `help`, prints what `source --help` prints.
    const viaHelp = await runInProcess(['help', 'source']);
    const direct = await runInProcess(['source', '--help']);
    expect(direct.stdout).toBe(viaHelp.stdout);
  });
});
