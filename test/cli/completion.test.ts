// `syncauth completion bash|zsh|fish`: the script each shell gets is generated from the command tree, and it
// completes in the real shell: bash through COMP_WORDS/COMP_CWORD, fish through `complete -C`, zsh with its
// completion builtins stood in for (they need a terminal), each from a file the CLI printed.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';

const has = (shell: string) => spawnSync(shell, ['-c', 'exit 0']).status === 0;

async function script(shell: string): Promise<string> {
  const result = await runCli(['completion', shell]);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  const file = path.join(tempDir(), `syncauth.${shell}`);
  writeFileSync(file, result.stdout);
  return file;
}

function run(shell: string, args: string[]): string {
  const result = spawnSync(shell, args, { encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tempDir() } });
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  return result.stdout;
}

/** The top-level commands `syncauth --help` lists. */
async function helpCommands(): Promise<string[]> {
  const { stdout } = await runCli(['--help']);
  const section = stdout.split(/^Commands:$/m)[1] ?? '';
  return [...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1] as string);
}

describe('bash', () => {
  let file: string;
  beforeAll(async () => {
    file = await script('bash');
  });

  /**
   * COMPREPLY for a command line typed up to the cursor, split into words as bash does (an escaped space stays
   * in its word, backslash and all; a trailing space starts a new word).
   */
  function complete(line: string): string[] {
    const words = line.split(/(?<!\\) /);
    const quoted = words.map((w) => `'${w.replaceAll("'", `'\\''`)}'`).join(' ');
    const out = run('bash', ['-c', `
      source ${JSON.stringify(file)}
      COMP_WORDS=(${quoted})
      COMP_CWORD=$((\${#COMP_WORDS[@]} - 1))
      _syncauth
      printf '%s\\n' "\${COMPREPLY[@]}"`]);
    return out.split('\n').filter(Boolean);
  }

  it('registers the completion function', () => {
    expect(run('bash', ['-c', `source ${JSON.stringify(file)}; complete -p syncauth`])).toBe('complete -F _syncauth syncauth\n');
  });

  it('completes `syncauth da<TAB>` to daemon', () => {
    expect(complete('syncauth da')).toEqual(['daemon']);
  });

  it('offers every command the help lists, and the subcommands below one', async () => {
    const commands = await helpCommands();
    expect(commands).toEqual(expect.arrayContaining(['setup', 'daemon', 'doctor', 'completion', 'source']));
    expect(complete('syncauth ').sort()).toEqual([...commands].sort());
    expect(complete('syncauth source ')).toEqual(expect.arrayContaining(['create', 'get', 'list', 'update', 'delete']));
  });

  it('completes the options of the command in front of the cursor, past options and their values', () => {
    expect(complete('syncauth source create --ty')).toEqual(['--type']);
    expect(complete('syncauth --version st')).toEqual(['status']);
    expect(complete('syncauth token --profile docs --fo')).toEqual(['--force']);
    expect(complete('syncauth daemon --once --listen 127.0.0.1:9464 --token-f')).toEqual(['--token-file', '--token-file-mode', '--token-file-group']);
  });

  it('completes the values of options with a fixed set, and the shells of `completion`', () => {
    expect(complete('syncauth setup --store ')).toEqual(['keychain', 'file', 'env']);
    expect(complete('syncauth source list --type dr')).toEqual(['dropbox']);
    expect(complete('syncauth workflow update 3fa8 --workflow-type ')).toEqual(['basic', 'advanced', 'platinum', 'custom']);
    expect(complete('syncauth workflow update 3fa8 --schedule every\\ 4')).toEqual(['every\\ 4\\ hours']);
    expect(complete('syncauth completion ')).toEqual(['bash', 'zsh', 'fish']);
  });

  it('after `exec --`, a command of its own', () => {
    expect(complete('syncauth exec --watch -- bas')).toContain('bash');
  });
});

describe.skipIf(!has('fish'))('fish', () => {
  let file: string;
  beforeAll(async () => {
    file = await script('fish');
  });

  const complete = (line: string) =>
    run('fish', ['-c', `source ${JSON.stringify(file)}; complete -C${JSON.stringify(line)}`]).split('\n').filter(Boolean).map((l) => l.split('\t')[0]);

  it('completes commands, subcommands, options and values', () => {
    expect(complete('syncauth da')).toEqual(['daemon']);
    expect(complete('syncauth source ')).toEqual(expect.arrayContaining(['create', 'delete', 'get', 'list', 'update']));
    expect(complete('syncauth source create --ty')).toEqual(['--type']);
    expect(complete('syncauth setup --access ')).toEqual(expect.arrayContaining(['read', 'write', 'read-write']));
    expect(complete('syncauth completion ')).toEqual(['bash', 'fish', 'zsh']);
  });
});

describe.skipIf(!has('zsh'))('zsh', () => {
  let file: string;
  beforeAll(async () => {
    file = await script('zsh');
  });

  // compadd, _describe and friends work only inside a completion widget; these print what they were given.
  function complete(line: string): string[] {
    const out = run('zsh', ['-f', '-c', `
      compdef() { :; }
      _describe() { local -a arr; arr=("\${(@P)4}"); print -rl -- "\${(@)arr%%:*}"; }
      compadd() { [[ $1 == -a ]] && print -rl -- "\${(@P)2}"; }
      _files() { print -- '<files>'; }
      _normal() { print -- "<command line from \${words[1]}>"; }
      source ${JSON.stringify(file)}
      words=(\${(z)\${:-${JSON.stringify(line)}}})
      [[ ${JSON.stringify(line)} == *' ' ]] && words+=('')
      CURRENT=\${#words}
      _syncauth`]);
    return out.split('\n').filter(Boolean);
  }

  it('sourced after compinit (as --help says), registers itself for syncauth', () => {
    const home = tempDir();
    const out = run('zsh', ['-f', '-c', `autoload -Uz compinit && compinit -u -d ${JSON.stringify(path.join(home, 'zcompdump'))}; source ${JSON.stringify(file)}; print -r -- $_comps[syncauth]`]);
    expect(out).toBe('_syncauth\n');
  });

  it('parses, and completes commands, subcommands, options and values', () => {
    expect(complete('syncauth d')).toEqual(expect.arrayContaining(['daemon', 'demo', 'doctor']));
    expect(complete('syncauth source ')).toEqual(expect.arrayContaining(['create', 'delete', 'get', 'list', 'update']));
    expect(complete('syncauth source create --ty')).toContain('--type');
    expect(complete('syncauth setup --store ')).toEqual(['keychain', 'file', 'env']);
    expect(complete('syncauth setup --config-dir ')).toEqual(['<files>']);
    expect(complete('syncauth exec -- ech')).toEqual(['<command line from ech>']);
  });
});

it('refuses a shell it has no script for, naming the choices', async () => {
  const result = await runCli(['completion', 'tcsh']);
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/value 'tcsh' is invalid for argument 'shell'\. Allowed choices are bash, zsh, fish/);
});

it('--help says how to install it', async () => {
  const result = await runCli(['completion', '--help']);
  expect(result.stdout).toContain("echo 'source <(syncauth completion bash)' >> ~/.bashrc");
  expect(result.stdout).toContain('syncauth completion fish > ~/.config/fish/completions/syncauth.fish');
});
