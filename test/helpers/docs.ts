// The README's and docs/'s shell examples, as a reader sees them: every fenced ```sh, ```bash or ```console
// block, its command lines (comments and blank lines left out, a line ending in `\` joined to the next).
import { chmodSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CLI, ROOT } from './cli.js';

export interface DocCommand {
  /** The command as a shell reads it, continuation lines joined, the trailing comment kept. */
  text: string;
  /** The command without its trailing `# comment`: how the tests' tables name it. */
  key: string;
  /** 1-based line of the file where the command starts. */
  line: number;
}

export interface DocBlock {
  /** Relative to the repository: `README.md`, `docs/setup.md`. */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The heading the block sits under (`## Install`), for messages and for finding a section. */
  heading: string;
  commands: DocCommand[];
}

const SHELL_FENCE = /^(\s*)```(sh|bash|console)\s*$/;

/** The files whose examples must run: README.md and every page of docs/. */
export function docFiles(): string[] {
  const pages = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`);
  return ['README.md', ...pages];
}

/** A comment that ends a line: `#` after a space, outside quotes (good enough for the examples' plain lines). */
function stripComment(text: string): string {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) {
      return text.slice(0, i).trimEnd();
    }
  }
  return text.trimEnd();
}

export function shellBlocks(file: string): DocBlock[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const blocks: DocBlock[] = [];
  let heading = '';
  for (let i = 0; i < lines.length; i += 1) {
    const open = SHELL_FENCE.exec(lines[i] as string);
    if (!open) {
      if (/^#{1,6} /.test(lines[i] as string)) heading = lines[i] as string;
      else if (/^\s*```/.test(lines[i] as string)) {
        // Another language's block: skip to its end, so a `#` line inside is not taken for a heading.
        for (i += 1; i < lines.length && !/^\s*```\s*$/.test(lines[i] as string); i += 1);
      }
      continue;
    }
    const indent = open[1]?.length ?? 0;
    const block: DocBlock = { file, line: i + 1, heading, commands: [] };
    let pending: { text: string; line: number } | undefined;
    for (i += 1; i < lines.length && !/^\s*```\s*$/.test(lines[i] as string); i += 1) {
      const raw = (lines[i] as string).slice(indent);
      if (pending) {
        pending.text += `\n${raw}`;
      } else {
        if (raw.trim() === '' || raw.trim().startsWith('#')) continue;
        pending = { text: raw, line: i + 1 };
      }
      if (!raw.endsWith('\\')) {
        block.commands.push({ text: pending.text, key: stripComment(pending.text.replace(/\\\n\s*/g, '')), line: pending.line });
        pending = undefined;
      }
    }
    if (pending) throw new Error(`${file}:${pending.line}: a command ends in \\ at the end of its block`);
    blocks.push(block);
  }
  return blocks;
}

/** The commands of the README's quick start, in order. */
export function quickStartCommands(): DocCommand[] {
  return shellBlocks('README.md').filter((b) => /^## Quick start\b/.test(b.heading)).flatMap((b) => b.commands);
}

/**
 * A directory holding `syncauth` as a global install puts it on PATH: a link to this checkout's built CLI
 * (dist/cli/main.js, made executable as npm makes a package's bin), beside the `node` its `#!/usr/bin/env node`
 * finds. Put it first on PATH: the examples then run as printed, and the CLI knows it was run as `syncauth`.
 */
export function syncauthOnPath(dir: string): string {
  chmodSync(CLI, 0o755);
  symlinkSync(CLI, path.join(dir, 'syncauth'));
  symlinkSync(process.execPath, path.join(dir, 'node'));
  return dir;
}

/** A "browser" for BROWSER (xdg-open honours it): it notes each URL it is asked to open, one a line, in `file`. */
export function recordingBrowser(dir: string, file: string): string {
  const script = path.join(dir, 'browser.sh');
  writeFileSync(script, `#!/bin/sh\nprintf '%s\\n' "$1" >> '${file}'\n`);
  chmodSync(script, 0o755);
  return script;
}
