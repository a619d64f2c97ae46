// The house layering, read from the imports of src/**/*.ts (static, type-only, re-exports and dynamic
// `import()` alike): the CLI stands on the rest and nothing stands on the CLI, so nothing under src/ but
// src/cli/ imports from src/cli/, and no files of src/cli/ import each other in a cycle; no files of different
// src/ directories import each other in a cycle, nor do the directories themselves (a file of notify/ importing
// daemon/ while another of daemon/ imports notify/);
// and a few directions are ruled out: delivery of notices and the re-authorization page stand beside the daemon
// (it hands them ports), and the Dropbox and service protocols know nothing of profiles.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../src');

type Graph = Map<string, Set<string>>;

function sourceFiles(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => file.split(path.sep).join('/'))
    .sort();
}

/** Each file's imports of other files under `root`, as paths relative to it. */
function importGraph(root: string): Graph {
  const files = sourceFiles(root);
  const known = new Set(files);
  const graph: Graph = new Map();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(path.join(root, file), 'utf8'), true, true);
    const targets = new Set<string>();
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), fileName));
      const candidates = [resolved.replace(/\.js$/, '.ts'), `${resolved}.ts`, `${resolved}/index.ts`];
      const target = candidates.find((candidate) => known.has(candidate)) ?? resolved;
      targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

const isCli = (file: string): boolean => file === 'cli' || file.startsWith('cli/');
/** A file's directory under src/ (its first segment); a file at the top is in `.`. */
const areaOf = (file: string): string => (file.includes('/') ? (file.split('/')[0] as string) : '.');

/** `from -> to` for each import of src/cli/ by a file outside it. */
function cliImports(graph: Graph): string[] {
  const found: string[] = [];
  for (const [file, targets] of graph) {
    if (isCli(file)) continue;
    for (const target of targets) if (isCli(target)) found.push(`${file} -> ${target}`);
  }
  return found;
}

/** The strongly connected components of more than one file (Tarjan), each sorted. */
function cycles(graph: Graph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, next);
    low.set(node, next);
    next += 1;
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(node, Math.min(low.get(node) as number, low.get(target) as number));
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node) as number, index.get(target) as number));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1) found.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return found;
}

/** Each src/ directory's imports of other directories; a file at the top of src/ is a node of its own. */
function directoryGraph(graph: Graph): Graph {
  const nodeOf = (file: string): string => (file.includes('/') ? (file.split('/')[0] as string) : file);
  const directories: Graph = new Map();
  for (const [file, targets] of graph) {
    const from = nodeOf(file);
    const edges = directories.get(from) ?? new Set<string>();
    directories.set(from, edges);
    for (const target of targets) if (nodeOf(target) !== from) edges.add(nodeOf(target));
  }
  return directories;
}

/** Cycles between src/ directories (and files at the top of src/), each as its sorted members. */
function directoryCycles(graph: Graph): string[] {
  return cycles(directoryGraph(graph)).map((component) => component.join(' <-> ')).sort();
}

/** Imports of `to`'s directory by files of `from`'s: `[from, to]` pairs of src/ directories. */
const FORBIDDEN_DIRECTIONS: readonly (readonly [string, string])[] = [
  ['notify', 'daemon'],
  // Notices are posted through net/, not through the Dropbox client's transport.
  ['notify', 'oauth'],
  ['reauth', 'daemon'],
  ['oauth', 'profile'],
  ['service', 'profile'],
];

/** `from -> to` for each import along a forbidden direction. */
function forbiddenImports(graph: Graph, rules: readonly (readonly [string, string])[] = FORBIDDEN_DIRECTIONS): string[] {
  const found: string[] = [];
  const inside = (file: string, directory: string): boolean => file.startsWith(`${directory}/`);
  for (const [file, targets] of graph) {
    for (const target of targets) {
      if (rules.some(([from, to]) => inside(file, from) && inside(target, to))) found.push(`${file} -> ${target}`);
    }
  }
  return found.sort();
}

/** Cycles whose files lie in more than one src/ directory. */
function crossDirectoryCycles(graph: Graph): string[] {
  return cycles(graph)
    .filter((component) => new Set(component.map(areaOf)).size > 1)
    .map((component) => component.join(' <-> '));
}

describe('layering of src/', () => {
  const graph = importGraph(SRC);

  it('reads the imports of every file, static, type-only, re-exported and dynamic', () => {
    expect(graph.size).toBeGreaterThan(50);
    // index.ts imports a type (daemon/types.ts), re-exports (library/access-token.ts) and loads the daemon lazily.
    expect([...(graph.get('index.ts') ?? [])]).toEqual(expect.arrayContaining(['daemon/types.ts', 'library/access-token.ts', 'daemon/index.ts']));
  });

  it('nothing under src/ but src/cli/ imports from src/cli/', () => {
    expect(cliImports(graph)).toEqual([]);
  });

  it('no files of different src/ directories import each other in a cycle', () => {
    expect(crossDirectoryCycles(graph)).toEqual([]);
  });

  it('no files of src/cli/ import each other in a cycle', () => {
    expect(cycles(graph).filter((component) => component.some(isCli)).map((component) => component.join(' <-> '))).toEqual([]);
  });

  it('no src/ directories import each other in a cycle', () => {
    expect(directoryCycles(graph)).toEqual([]);
  });

  it('notify/ and reauth/ do not import daemon/ (nor notify/ oauth/), oauth/ and service/ do not import profile/', () => {
    // The errors of Dropbox's steps and of the service's client carry a remedy (src/remedy.ts); how the person
    // ran syncauth (profile/name.ts) is written into it where it is shown.
    expect(forbiddenImports(graph)).toEqual([]);
  });

  it('the checks find what they look for', () => {
    const root = mkdtempSync(path.join(tmpdir(), 'syncauth-layering-'));
    try {
      const write = (file: string, text: string): void => {
        mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
        writeFileSync(path.join(root, file), text);
      };
      write('cli/context.ts', "export interface CommandContext { json: boolean }\n");
      write('cli/commands/shared.ts', "export const shared = 1;\n");
      write('library/a.ts', "import type { CommandContext } from '../cli/context.js';\nexport type A = CommandContext;\n");
      write('library/b.ts', "export async function b() { return import('../cli/commands/shared.js'); }\n");
      write('sync/x.ts', "import { y } from '../profile/y.js';\nexport const x = () => y;\n");
      write('profile/y.ts', "export { x as y } from '../sync/x.js';\n");
      write('sync/p.ts', "import { q } from './q.js';\nexport const p = q;\n");
      write('sync/q.ts', "import { p } from './p.js';\nexport const q = p;\n");
      write('cli/main.ts', "import { x } from '../sync/x.js';\nexport const main = x;\n");
      const made = importGraph(root);
      expect(cliImports(made)).toEqual(['library/a.ts -> cli/context.ts', 'library/b.ts -> cli/commands/shared.ts']);
      // A cycle within one directory (sync/p <-> sync/q) is that directory's business.
      expect(crossDirectoryCycles(made)).toEqual(['profile/y.ts <-> sync/x.ts']);
      expect(directoryCycles(made)).toEqual(['profile <-> sync']);
      // No two files import each other here, yet the directories do (notify/a -> daemon/b, daemon/c -> notify/d).
      write('notify/a.ts', "import type { B } from '../daemon/b.js';\nexport type A = B;\n");
      write('daemon/b.ts', "export type B = string;\n");
      write('daemon/c.ts', "import { d } from '../notify/d.js';\nexport const c = d;\n");
      write('notify/d.ts', "export const d = 1;\n");
      write('reauth/e.ts', "export async function e() { return import('../daemon/c.js'); }\n");
      write('oauth/f.ts', "export { d } from '../notify/d.js';\n");
      const more = importGraph(root);
      expect(crossDirectoryCycles(more)).toEqual(['profile/y.ts <-> sync/x.ts']);
      expect(directoryCycles(more)).toEqual(['daemon <-> notify', 'profile <-> sync']);
      expect(forbiddenImports(more)).toEqual(['notify/a.ts -> daemon/b.ts', 'reauth/e.ts -> daemon/c.ts']);
      expect(forbiddenImports(more, [['oauth', 'notify']])).toEqual(['oauth/f.ts -> notify/d.ts']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
