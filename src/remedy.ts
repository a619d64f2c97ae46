// What a person does about a failure, as data, and how its command is written where it is shown. An error made
// below the CLI (Dropbox's steps, the service's client, the stores) says which syncauth command fixes it, not
// how the person typed syncauth: its hint is written once with plain `syncauth` (what a library caller reads in
// `error.hint`), and again where it is shown with the command line the person can paste (the CLI's error
// output, the daemon's logs, the authorization page: `npx --yes ./syncauth-….tgz setup` through npx).

/** What fixes a failure. */
export type Remedy =
  /** Authorize again: `setup --profile NAME`, or `setup` where the profile is not known (Dropbox's own steps). */
  | { readonly action: 'reauthorize'; readonly profile?: string | undefined }
  /** Run a syncauth command: `command` is the subcommand and its arguments, e.g. `source check ID`. */
  | { readonly action: 'run'; readonly command: string };

/** Writes a syncauth subcommand (`rest`) as a command line the person can paste. */
export type CommandLine = (rest: string) => string;

/** The command line where nobody recorded how syncauth was run: a library caller, a test in-process. */
export const plainCommandLine: CommandLine = (rest) => `syncauth ${rest}`;

/** The subcommand and its arguments that carry out `remedy`, without the program's name. */
export function remedyArguments(remedy: Remedy): string {
  if (remedy.action === 'reauthorize') return remedy.profile === undefined ? 'setup' : `setup --profile ${remedy.profile}`;
  return remedy.command;
}

/** The command line of `remedy`, written by `line`. */
export function remedyCommand(remedy: Remedy, line: CommandLine = plainCommandLine): string {
  return line(remedyArguments(remedy));
}

/** A hint that names its remedy's command: `words` is given the command line as written where it is shown. */
export interface RemedyHint {
  readonly remedy: Remedy;
  readonly words: (command: string) => string;
}

/** A hint around `remedy`'s command: `words` says what to do with it (`(command) => 'run ' + command + ' again'`). */
export function remedyHint(remedy: Remedy, words: (command: string) => string): RemedyHint {
  return { remedy, words };
}

/** A hint as it reads with `line`'s command lines; a hint of plain words reads the same everywhere. */
export function renderHint(hint: string | RemedyHint, line: CommandLine = plainCommandLine): string {
  return typeof hint === 'string' ? hint : hint.words(remedyCommand(hint.remedy, line));
}

/** The one way a failure only a new authorization cures is told: run `setup` (naming the profile when known). */
export function reauthorizeRemedyHint(profile?: string): RemedyHint {
  return remedyHint({ action: 'reauthorize', profile }, (command) => `run \`${command}\` to authorize again`);
}
