// The Dockerfile and .dockerignore, read as Docker reads them (no image is built here: there is no Docker):
// a non-root runtime stage with production dependencies only, an entrypoint that is the package's CLI, and a
// build context that holds no secret and no installed tree but everything the build copies.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

interface Instruction {
  op: string;
  args: string;
}

/** Instructions per stage, line continuations joined and comments dropped. */
function stagesOf(text: string): Instruction[][] {
  const joined = text.replace(/\\\n/g, ' ');
  const stages: Instruction[][] = [];
  for (const raw of joined.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [op = '', ...rest] = line.split(/\s+/);
    const instruction = { op: op.toUpperCase(), args: rest.join(' ') };
    if (instruction.op === 'FROM') stages.push([]);
    const stage = stages.at(-1);
    if (!stage) throw new Error(`${line}: an instruction before the first FROM`);
    stage.push(instruction);
  }
  return stages;
}

/** Whether Docker leaves `file` (a path relative to the context) out, by .dockerignore's rules: last match wins. */
function ignoredBy(patterns: string[], file: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const negated = raw.startsWith('!');
    const pattern = (negated ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, '');
    const source = pattern
      .split('/')
      .map((part) => (part === '**' ? '.*' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')))
      .join('/')
      .replace(/\.\*\//g, '(?:.*/)?');
    // A pattern that matches a directory leaves out everything in it.
    if (new RegExp(`^${source}(?:/.*)?$`).test(file)) ignored = !negated;
  }
  return ignored;
}

const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const dockerignore = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const stages = stagesOf(dockerfile);
const runtime = stages.at(-1) ?? [];
const all = (op: string, stage: Instruction[] = runtime): string[] => stage.filter((i) => i.op === op).map((i) => i.args);

describe('the Dockerfile', () => {
  it('builds in one stage and runs from a slim Node 20 base in another', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages[0] as Instruction[];
    expect(all('FROM', build)[0]).toMatch(/^node:20-bookworm-slim AS build$/i);
    expect(all('RUN', build).join('\n')).toMatch(/\bnpm ci\b/);
    expect(all('RUN', build).join('\n')).toMatch(/\bnpm run build\b/);
    expect(all('FROM')[0]).toBe('node:20-bookworm-slim');
  });

  it('installs production dependencies only in the image it ships', () => {
    const runs = all('RUN');
    expect(runs.some((r) => /\bnpm ci\b.*--omit=dev/.test(r))).toBe(true);
    // No other install in the runtime stage could bring the dev dependencies back.
    expect(runs.filter((r) => /\bnpm (ci|install|i)\b/.test(r) && !/--omit=dev/.test(r))).toEqual([]);
    expect(all('COPY').filter((c) => c.includes('--from='))).toEqual(['--from=build /src/dist ./dist']);
  });

  it('runs as the unprivileged node user, the CLI as entrypoint and the daemon by default', () => {
    const users = all('USER');
    expect(users.at(-1)).toBe('node');
    expect(users.filter((u) => /^(root|0)(:|$)/.test(u))).toEqual([]);
    // The USER comes after every RUN: nothing after it runs as root.
    const lastUser = runtime.map((i) => i.op).lastIndexOf('USER');
    expect(runtime.slice(lastUser).filter((i) => i.op === 'RUN')).toEqual([]);
    expect(JSON.parse(all('ENTRYPOINT').at(-1) ?? 'null')).toEqual(['node', '/app/dist/cli/main.js']);
    expect(JSON.parse(all('CMD').at(-1) ?? 'null')).toEqual(['daemon']);
    // The entrypoint is the package's own bin, at the place the runtime stage puts dist/.
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(path.posix.join(all('WORKDIR').at(-1) ?? '', pkg.bin.syncauth as string)).toBe('/app/dist/cli/main.js');
  });

  it('copies only files that exist and that .dockerignore lets into the context', () => {
    const sources = stages.flat()
      .filter((i) => i.op === 'COPY' && !i.args.includes('--from='))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(sources).toEqual(expect.arrayContaining(['package.json', 'npm-shrinkwrap.json', 'tsconfig.json', 'tsconfig.build.json', 'src']));
    for (const source of sources) {
      expect([source, existsSync(path.join(ROOT, source))]).toEqual([source, true]);
      expect([source, ignoredBy(dockerignore, source)]).toEqual([source, false]);
    }
    expect(ignoredBy(dockerignore, 'src/cli/main.ts')).toBe(false);
  });

  it('copies into the build stage every script the build runs from the repository', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const scripts = [...(pkg.scripts.build ?? '').matchAll(/\bnode\s+([\w./-]+\.m?js)\b/g)].map((m) => m[1] as string).filter((f) => !f.startsWith('dist/'));
    expect(scripts).toContain('scripts/bundle-cli.mjs');
    const copied = (stages[0] as Instruction[]).filter((i) => i.op === 'COPY').flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    for (const script of scripts) {
      expect([script, copied.some((source) => script === source || script.startsWith(`${source.replace(/\/$/, '')}/`))]).toEqual([script, true]);
    }
  });
});

describe('.dockerignore', () => {
  it('keeps secrets, installed and built trees, version control and test artefacts out of the context', () => {
    for (const file of ['.env', '.env.production', 'node_modules/pino/package.json', 'src/node_modules/x.js', 'dist/cli/main.js', '.git/HEAD', '.cache/node24/bin/node', 'npm-debug.log', 'coverage/index.html', 'syncauth-0.1.0.tgz']) {
      expect([file, ignoredBy(dockerignore, file)]).toEqual([file, true]);
    }
  });

  it('is read by the rules Docker uses (the matcher above can tell)', () => {
    expect(ignoredBy(['node_modules'], 'node_modules/a')).toBe(true);
    expect(ignoredBy(['node_modules'], 'src/node_modules/a')).toBe(false);
    expect(ignoredBy(['**/node_modules'], 'src/node_modules/a')).toBe(true);
    expect(ignoredBy(['.env.*', '!.env.example'], '.env.example')).toBe(false);
    expect(ignoredBy(['*.log'], 'a.log')).toBe(true);
    expect(ignoredBy(['*.log'], 'logs/a.log')).toBe(false);
  });
});
