// `syncauth completion bash|zsh|fish`: a completion script generated from the command tree itself, so a new
// command or option completes as soon as it is declared. Each script carries the tree as small lookup
// functions (subcommands, options, options that take a value, their choices) and one function that walks the
// words typed so far to find which command the cursor is in, the same way in all three shells.
import type { Command, Help, Option } from 'commander';
import { ACCESS_MODES, STORES } from '../../config.js';
import { ValidationError } from '../../errors.js';
import { LOG_LEVELS } from '../../log.js';
import { SCHEDULES } from '../../service/constants.js';
import type { Io } from '../output.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface OptionNode {
  /** Every spelling: `-y`, `--yes`. */
  flags: string[];
  takesValue: boolean;
  description: string;
  choices: string[];
}

interface CommandNode {
  /** Words from the program down to this command: `source create` → ['source', 'create']; [] for the program. */
  path: string[];
  description: string;
  subcommands: { name: string; description: string }[];
  options: OptionNode[];
  /** Values the first argument takes, when it has a fixed set (`completion <shell>`). */
  argumentChoices: string[];
}

// Settings whose values are a fixed set, though their options carry no commander choices (the settings table
// parses them itself).
const VALUE_CHOICES: Record<string, readonly string[]> = {
  '--store': STORES,
  '--access': ACCESS_MODES,
  '--log-level': LOG_LEVELS,
  '--schedule': SCHEDULES,
};

/** The values an option takes: commander's choices, a setting's fixed set, or the list its help gives (`one of: a, b`). */
function choicesOf(option: Option): string[] {
  if (option.argChoices) return [...option.argChoices];
  if (option.long && VALUE_CHOICES[option.long]) return [...(VALUE_CHOICES[option.long] ?? [])];
  const listed = /\bone of: (.+?)(?:\)|$)/.exec(option.description)?.[1];
  return listed ? listed.split(/, | or /).map((v) => v.trim()).filter(Boolean) : [];
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** The command tree as the help shows it: visible commands (the implicit `help` too) and visible options. */
export function commandTree(program: Command): CommandNode[] {
  const nodes: CommandNode[] = [];
  const visit = (command: Command, path: string[]): void => {
    const help: Help = command.createHelp();
    const subcommands = help.visibleCommands(command);
    const options = help.visibleOptions(command).map((option): OptionNode => {
      const flags = [option.short, option.long].filter((f): f is string => typeof f === 'string');
      const takesValue = option.required || option.optional;
      const choices = takesValue ? choicesOf(option) : [];
      return { flags, takesValue, description: oneLine(option.description), choices };
    });
    const [first] = command.registeredArguments;
    const isHelp = path.length === 1 && path[0] === 'help' && command.parent === program;
    nodes.push({
      path,
      description: oneLine(command.description()),
      subcommands: subcommands.map((c) => ({ name: c.name(), description: oneLine(c.summary() || c.description()) })),
      options,
      // `syncauth help <command>` completes the top-level commands.
      argumentChoices: isHelp ? program.commands.map((c) => c.name()) : [...(first?.argChoices ?? [])],
    });
    for (const sub of subcommands) {
      // The implicit help command has no tree below it; it is listed under its parent and described above.
      if (sub.name() === 'help' && !command.commands.includes(sub)) {
        nodes.push({ path: [...path, 'help'], description: oneLine(sub.description()), subcommands: [], options: [], argumentChoices: command.commands.map((c) => c.name()) });
        continue;
      }
      visit(sub, [...path, sub.name()]);
    }
  };
  visit(program, []);
  return nodes;
}

/** A single-quoted word for bash, zsh and fish alike (fish has no `'\''`, so it gets `\'` inside quotes). */
function sq(text: string, shell: Shell): string {
  return shell === 'fish' ? `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'` : `'${text.replaceAll("'", `'\\''`)}'`;
}

function key(node: CommandNode): string {
  return node.path.join(' ');
}

/** A `case` over command paths for bash and zsh: one line of output per item. */
function caseFunction(name: string, nodes: CommandNode[], items: (node: CommandNode) => string[], shell: 'bash' | 'zsh'): string {
  const arms = nodes
    .map((node) => ({ node, lines: items(node) }))
    .filter(({ lines }) => lines.length > 0)
    .map(({ node, lines }) => `    ${sq(key(node), shell)}) printf '%s\\n' ${lines.map((l) => sq(l, shell)).join(' ')} ;;`);
  return [`${name}() {`, '  case "$1" in', ...arms, '  esac', '}'].join('\n');
}

function choicesFunction(name: string, nodes: CommandNode[], shell: 'bash' | 'zsh'): string {
  const arms: string[] = [];
  for (const node of nodes) {
    for (const option of node.options) {
      if (option.choices.length === 0) continue;
      for (const flag of option.flags) {
        arms.push(`    ${sq(`${key(node)}|${flag}`, shell)}) printf '%s\\n' ${option.choices.map((c) => sq(c, shell)).join(' ')} ;;`);
      }
    }
  }
  return [`${name}() {`, '  case "$1|$2" in', ...arms, '  esac', '}'].join('\n');
}

const valued = (node: CommandNode) => node.options.filter((o) => o.takesValue).flatMap((o) => o.flags);

function bashScript(nodes: CommandNode[]): string {
  return `# bash completion for syncauth, generated by \`syncauth completion bash\` from its command tree.
${caseFunction('_syncauth_commands', nodes, (n) => n.subcommands.map((s) => s.name), 'bash')}
${caseFunction('_syncauth_options', nodes, (n) => n.options.flatMap((o) => o.flags), 'bash')}
${caseFunction('_syncauth_valued', nodes, valued, 'bash')}
${caseFunction('_syncauth_arguments', nodes, (n) => n.argumentChoices, 'bash')}
${choicesFunction('_syncauth_choices', nodes, 'bash')}

# True when function $1, asked about command path $2, lists the word $3.
_syncauth_has() {
  local list
  list=$'\n'$("$1" "$2")$'\n'
  [[ $list == *$'\n'"$3"$'\n'* ]]
}

# Sets _syncauth_path to the command the words before the cursor name (e.g. "source create"), skipping
# options and their values; _syncauth_rest to the number of words after a "--" (-1 when there is none).
_syncauth_walk() {
  _syncauth_path='' _syncauth_rest=-1
  local i word
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=\${COMP_WORDS[i]}
    if ((_syncauth_rest >= 0)); then ((_syncauth_rest++)); continue; fi
    if [[ $word == -- ]]; then _syncauth_rest=0; continue; fi
    if [[ $word == -* ]]; then
      if [[ $word != *=* ]] && _syncauth_has _syncauth_valued "$_syncauth_path" "$word"; then ((i++)); fi
      continue
    fi
    if _syncauth_has _syncauth_commands "$_syncauth_path" "$word"; then _syncauth_path=\${_syncauth_path:+$_syncauth_path }$word; fi
  done
}

_syncauth() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} IFS=$'\\n' _syncauth_path _syncauth_rest i
  COMPREPLY=()
  _syncauth_walk
  if ((_syncauth_rest == 0)); then
    COMPREPLY=($(compgen -c -- "$cur"))
    return
  elif ((_syncauth_rest > 0)); then
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
    return
  fi
  if ((COMP_CWORD > 1)) && [[ $prev == -* ]] && _syncauth_has _syncauth_valued "$_syncauth_path" "$prev"; then
    local choices
    choices=$(_syncauth_choices "$_syncauth_path" "$prev")
    if [[ -n $choices ]]; then
      # A value with spaces is typed escaped (every\\ 4): compare it unescaped.
      COMPREPLY=($(compgen -W "$choices" -- "\${cur//\\\\/}"))
      for i in "\${!COMPREPLY[@]}"; do COMPREPLY[i]=$(printf '%q' "\${COMPREPLY[i]}"); done
    else
      compopt -o filenames 2>/dev/null
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(_syncauth_options "$_syncauth_path")" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$(_syncauth_commands "$_syncauth_path"; _syncauth_arguments "$_syncauth_path")" -- "$cur"))
  fi
}

complete -F _syncauth syncauth
`;
}

function zshScript(nodes: CommandNode[]): string {
  // _describe wants `name:description`, with colons in the name escaped.
  const described = (name: string, description: string) => `${name.replaceAll(':', '\\:')}:${description}`;
  return `#compdef syncauth
# zsh completion for syncauth, generated by \`syncauth completion zsh\` from its command tree.
${caseFunction('_syncauth_commands', nodes, (n) => n.subcommands.map((s) => described(s.name, s.description)), 'zsh')}
${caseFunction('_syncauth_options', nodes, (n) => n.options.flatMap((o) => o.flags.map((f) => described(f, o.description))), 'zsh')}
${caseFunction('_syncauth_valued', nodes, valued, 'zsh')}
${caseFunction('_syncauth_arguments', nodes, (n) => n.argumentChoices, 'zsh')}
${choicesFunction('_syncauth_choices', nodes, 'zsh')}

# True when the word at the cursor is plain text: zsh's own file and command completion (_files, _normal)
# evaluate a \`$(…)\`, backquotes or \`$var\` in the word they complete, so only a word of letters, digits,
# escaped spaces and \`_./+,:@%=~-\` is completed.
_syncauth_plain() {
  [[ $PREFIX$SUFFIX != *[^[:alnum:]_./+,:@%=~\\\\\\ -]* ]]
}

_syncauth() {
  local path_='' word i rest=-1
  local -a names valued items
  for (( i = 2; i < CURRENT; i++ )); do
    word=\${words[i]}
    if [[ $word == -- ]]; then rest=$i; break; fi
    if [[ $word == -* ]]; then
      valued=("\${(@f)$(_syncauth_valued "$path_")}")
      if [[ $word != *=* ]] && (( \${valued[(Ie)$word]} )); then (( i++ )); fi
      continue
    fi
    names=("\${(@)\${(@f)$(_syncauth_commands "$path_")}%%:*}")
    if (( \${names[(Ie)$word]} )); then path_=\${path_:+$path_ }$word; fi
  done
  if (( rest >= 0 )); then
    # After "--" (exec): a command of its own, then files. Not _normal: it hands the words to the command's
    # own completion, and evaluates a word such as \`=$(…)\` itself.
    _syncauth_plain || return
    if (( CURRENT == rest + 1 )); then _command_names -e; else _files; fi
    return
  fi
  local prev=\${words[CURRENT-1]}
  valued=("\${(@f)$(_syncauth_valued "$path_")}")
  if (( CURRENT > 2 )) && [[ $prev == -* ]] && (( \${valued[(Ie)$prev]} )); then
    items=("\${(@f)$(_syncauth_choices "$path_" "$prev")}")
    if [[ -n \${items[1]} ]]; then compadd -a items; elif _syncauth_plain; then _files; fi
    return
  fi
  if [[ \${words[CURRENT]} == -* ]]; then
    items=("\${(@f)$(_syncauth_options "$path_")}")
    _describe -t options option items
    return
  fi
  items=("\${(@f)$(_syncauth_commands "$path_")}")
  if [[ -n \${items[1]} ]]; then _describe -t commands command items; fi
  items=("\${(@f)$(_syncauth_arguments "$path_")}")
  if [[ -n \${items[1]} ]]; then compadd -a items; fi
}

# Loaded from fpath as the autoload function _syncauth it completes at once; sourced, it registers itself.
if [[ $funcstack[1] == _syncauth ]]; then
  _syncauth "$@"
else
  compdef _syncauth syncauth
fi
`;
}

function fishScript(nodes: CommandNode[]): string {
  const lines: string[] = [
    '# fish completion for syncauth, generated by `syncauth completion fish` from its command tree.',
    'function __syncauth_commands',
    '    switch "$argv[1]"',
  ];
  for (const node of nodes) {
    if (node.subcommands.length === 0) continue;
    lines.push(`        case ${sq(key(node), 'fish')}`, `            printf '%s\\n' ${node.subcommands.map((s) => sq(s.name, 'fish')).join(' ')}`);
  }
  lines.push('    end', 'end', '', 'function __syncauth_valued', '    switch "$argv[1]"');
  for (const node of nodes) {
    const flags = valued(node);
    if (flags.length === 0) continue;
    lines.push(`        case ${sq(key(node), 'fish')}`, `            printf '%s\\n' ${flags.map((f) => sq(f, 'fish')).join(' ')}`);
  }
  lines.push(
    '    end',
    'end',
    '',
    '# The command the words before the cursor name ("source create"), skipping options and their values;',
    '# once the words reach a "--" (exec\'s command line), "--" while the cursor is on its command and',
    '# "-- args" past it.',
    'function __syncauth_path',
    '    set -l path',
    '    set -l skip 0',
    '    set -l words (commandline -opc)[2..-1]',
    '    for i in (seq (count $words))',
    '        set -l word $words[$i]',
    '        if test $skip = 1',
    '            set skip 0',
    '            continue',
    '        end',
    '        if test "x$word" = x--',
    '            if test $i -eq (count $words)',
    "                printf '%s\\n' --",
    '            else',
    "                printf '%s\\n' '-- args'",
    '            end',
    '            return',
    '        end',
    "        if string match -q -- '-*' $word",
    "            if not string match -q -- '*=*' $word; and contains -- $word (__syncauth_valued \"$path\")",
    '                set skip 1',
    '            end',
    '            continue',
    '        end',
    '        if contains -- $word (__syncauth_commands "$path")',
    '            set path (string join \' \' -- $path $word)',
    '        end',
    '    end',
    "    printf '%s\\n' \"$path\"",
    'end',
    '',
    '# The commands the word after "--" may start. fish\'s own command completion (__fish_complete_command,',
    '# `complete -C`) runs a command substitution it is given, so it is asked only about plain text: completing',
    '# `(…)` or `$(…)` typed there must never run it.',
    'function __syncauth_command_names',
    '    set -l token (commandline -ct)',
    "    string match -qr -- '^[[:alnum:]_./+,:@%-]*$' $token; or return",
    "    string match -q -- '-*' $token; and return",
    '    complete -C "$token"',
    'end',
    '',
    'complete -c syncauth -f',
    "complete -c syncauth -n 'test \"x\"(__syncauth_path) = x--' -a '(__syncauth_command_names)'",
    "complete -c syncauth -n 'test \"x\"(__syncauth_path) = \"x-- args\"' -F",
  );
  for (const node of nodes) {
    const when = `-n ${sq(`test "x"(__syncauth_path) = ${sq(`x${key(node)}`, 'fish')}`, 'fish')}`;
    for (const sub of node.subcommands) lines.push(`complete -c syncauth ${when} -a ${sq(sub.name, 'fish')} -d ${sq(sub.description, 'fish')}`);
    if (node.argumentChoices.length > 0) lines.push(`complete -c syncauth ${when} -a ${sq(node.argumentChoices.join(' '), 'fish')}`);
    for (const option of node.options) {
      const names = option.flags.map((f) => (f.startsWith('--') ? `-l ${sq(f.slice(2), 'fish')}` : `-s ${sq(f.slice(1), 'fish')}`)).join(' ');
      const value = !option.takesValue ? '' : option.choices.length > 0
        ? ` -x -a ${sq(`(printf '%s\\n' ${option.choices.map((c) => sq(c, 'fish')).join(' ')})`, 'fish')}`
        : ' -r -F';
      lines.push(`complete -c syncauth ${when} ${names}${value} -d ${sq(option.description, 'fish')}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(program: Command, shell: Shell): string {
  const nodes = commandTree(program);
  switch (shell) {
    case 'bash':
      return bashScript(nodes);
    case 'zsh':
      return zshScript(nodes);
    case 'fish':
      return fishScript(nodes);
  }
}

/** Prints the script for `shell`; `program` is the whole command tree (the completion command's root). */
export function completion(program: Command, shell: string, io: Io): void {
  if (!(SHELLS as readonly string[]).includes(shell)) {
    throw new ValidationError([{ field: 'shell', message: `must be one of: ${SHELLS.join(', ')}` }]);
  }
  io.stdout.write(completionScript(program, shell as Shell));
}
