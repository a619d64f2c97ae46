// `syncauth completion bash|zsh|fish`: the script each shell gets is generated from the command tree, and it
// completes in the real shell: bash through COMP_WORDS/COMP_CWORD, fish through `complete -C`, zsh with its
// completion builtins stood in for (they need a terminal), each from a file the CLI printed.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
      _command_names() { print -- '<commands>'; }
      _normal() { print -- '<_normal>'; }
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
    expect(complete('syncauth exec -- ech')).toEqual(['<commands>']);
    expect(complete('syncauth exec -- ls ')).toEqual(['<files>']);
  });
});

/**
 * The words after `exec --` are a command line the user is still typing, and may hold a command substitution
 * meant for later (`$(…)`, `(…)`, backquotes). Completing there, in the real shell, must run none of it.
 * Each payload creates a file of its own, so the test names the one that ran.
 */
describe('completing after `exec --` runs nothing the line holds', () => {
  let dir: string;
  let bin: string;
  beforeAll(() => {
    dir = tempDir();
    bin = path.join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(path.join(bin, 'syncauth-probe-cmd'), '#!/bin/sh\n');
    chmodSync(path.join(bin, 'syncauth-probe-cmd'), 0o755);
    writeFileSync(path.join(dir, 'uniquefile.txt'), '');
  });
  const env = (line: string) => ({ PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`, HOME: dir, LINE: line, TERM: 'dumb' });
  /**
   * Lines that each hold a payload creating a file of its own name in the working directory (a relative name:
   * a path's slashes would split the word for zsh), in command position, as an argument, in a path.
   */
  const payloads = (shell: string, substitutions: ((cmd: string) => string)[]) =>
    substitutions.flatMap((sub, i) => [
      (name: string) => `syncauth exec -- ${sub(`touch ${name}`)}`,
      (name: string) => `syncauth exec -- ls ${sub(`touch ${name}`)}`,
      (name: string) => `syncauth exec -- ls ${sub(`touch ${name}`)}/`,
      (name: string) => `syncauth exec -- =${sub(`touch ${name}`)} a`,
      (name: string) => `syncauth exec --watch -- ${sub(`touch ${name}`)} `,
    ].map((make, j) => ({ line: make(`${shell}-ran-${i}-${j}`), marker: `${shell}-ran-${i}-${j}` })));
  /** The lines whose payload ran. */
  const ran = (lines: { line: string; marker: string }[]) => lines.filter(({ marker }) => existsSync(path.join(dir, marker))).map(({ line }) => line);

  it.skipIf(!has('fish'))('fish: `(…)` and `$(…)` stay unrun; a command, then files, still complete', async () => {
    const file = await script('fish');
    // The line travels in a variable: fish would run a `$(…)` written into the -c text itself.
    const complete = (line: string) => {
      const result = spawnSync('fish', ['-c', `source ${JSON.stringify(file)}; complete -C "$LINE"`], { encoding: 'utf8', cwd: dir, env: env(line) });
      expect(result.stderr).toBe('');
      return result.stdout.split('\n').filter(Boolean).map((l) => l.split('\t')[0]);
    };
    const lines = payloads('fish', [(cmd) => `(${cmd})`, (cmd) => `$(${cmd})`]);
    lines.push({ line: 'syncauth setup --config-dir (touch fish-ran-option)/', marker: 'fish-ran-option' });
    for (const { line } of lines) complete(line);
    expect(ran(lines)).toEqual([]);

    expect(complete('syncauth exec -- syncauth-probe-c')).toEqual(['syncauth-probe-cmd']);
    expect(complete('syncauth exec --watch -- ls uniquef')).toEqual(['uniquefile.txt']);
  });

  it.skipIf(!has('zsh'))('zsh (a real interactive shell in a pty): `$(…)` and backquotes stay unrun; a command, then files, still complete', async () => {
    const file = await script('zsh');
    const home = tempDir();
    // Tab completes (no expansion, which is zsh's own and asked for); ^X saves the line the completion left.
    writeFileSync(path.join(home, '.zshrc'), `
      autoload -Uz compinit && compinit -u -d ${JSON.stringify(path.join(home, 'zcompdump'))}
      source ${JSON.stringify(file)}
      bindkey '^I' complete-word
      _syncauth_test_save() { print -r -- "<$BUFFER>" > ${JSON.stringify(path.join(home, 'buffer'))}; }
      zle -N _syncauth_test_save
      bindkey '^X' _syncauth_test_save
    `);
    const complete = (line: string): string => {
      const buffer = path.join(home, 'buffer');
      rmSync(buffer, { force: true });
      const result = spawnSync('zsh', ['-f', '-c', `
        zmodload zsh/zpty
        zpty z 'zsh -i'
        zpty -w -n z "$LINE"$'\\t\\x18'
        for i in {1..400}; do [[ -s $ZDOTDIR/buffer ]] && break; sleep 0.05; done
        zpty -d z`], { encoding: 'utf8', cwd: dir, env: { ...env(line), ZDOTDIR: home } });
      expect(result.status).toBe(0);
      return readFileSync(buffer, 'utf8').trim();
    };
    // The harness does reach zsh's own evaluating completion: its _files runs a `$(…)` in a path.
    complete('ls $(touch zsh-control)/');
    expect(existsSync(path.join(dir, 'zsh-control'))).toBe(true);

    const lines = payloads('zsh', [(cmd) => `$(${cmd})`, (cmd) => `\`${cmd}\``]);
    lines.push({ line: 'syncauth setup --config-dir $(touch zsh-ran-option)/', marker: 'zsh-ran-option' });
    for (const { line } of lines) complete(line);
    expect(ran(lines)).toEqual([]);

    expect(complete('syncauth exec -- syncauth-probe-c')).toBe('<syncauth exec -- syncauth-probe-cmd >');
    expect(complete('syncauth exec --watch -- ls uniquef')).toBe('<syncauth exec --watch -- ls uniquefile.txt >');
  }, 60_000);

  it('bash: `$(…)` and backquotes stay unrun', async () => {
    const file = await script('bash');
    const lines = payloads('bash', [(cmd) => `$(${cmd})`, (cmd) => `\`${cmd}\``]);
    for (const { line } of lines) {
      // Words as readline makes them: a substitution stays one word.
      const words = [...(line.match(/(?:\$\([^)]*\)|`[^`]*`|\S)+/g) ?? []), ...(line.endsWith(' ') ? [''] : [])];
      const result = spawnSync('bash', ['-c', `
        source ${JSON.stringify(file)}
        COMP_WORDS=(${words.map((w) => `'${w.replaceAll("'", `'\\''`)}'`).join(' ')})
        COMP_CWORD=$((\${#COMP_WORDS[@]} - 1))
        _syncauth`], { encoding: 'utf8', cwd: dir, env: env(line) });
      expect(result.stderr).toBe('');
    }
    expect(ran(lines)).toEqual([]);
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
