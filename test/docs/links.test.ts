// The README is for the person who installs syncauth, and links to the guides in docs/; every link of the
// README and the guides leads to a file that exists (and to a heading there when it names one), and no page a
// user of the package reads points at files such a user does not have (sources, tests, the design notes).
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';
import { docFiles } from '../helpers/docs.js';


interface Link {
  file: string;
  line: number;
  text: string;
  target: string;
}

function links(file: string): Link[] {
  const out: Link[] = [];
  let fenced = false;
  readFileSync(path.join(ROOT, file), 'utf8').split('\n').forEach((line, i) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) return;
    for (const match of line.matchAll(/\[([^\]]*)\]\(([^)\s]+)\)/g)) out.push({ file, line: i + 1, text: match[1] as string, target: match[2] as string });
  });
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
function anchors(file: string): Set<string> {
  const text = readFileSync(path.join(ROOT, file), 'utf8').replace(/^\s*```[\s\S]*?^\s*```/gm, '');
  return new Set([...text.matchAll(/^#{1,6} (.*)$/gm)].map((m) => (m[1] as string).toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')));
}

const local = (link: Link) => !/^[a-z]+:/i.test(link.target);
const resolved = (link: Link) => {
  const [file] = link.target.split('#');
  return file ? path.posix.normalize(path.posix.join(path.posix.dirname(link.file), file)) : link.file;
};

describe('the README and the guides in docs/', () => {
  const files = docFiles();

  it('link only to files that exist, and to headings that exist there; pending pages are listed until they exist', () => {
    const broken: string[] = [];
    for (const link of files.flatMap(links).filter(local)) {
      const target = resolved(link);
      const anchor = link.target.split('#')[1];
      if (!existsSync(path.join(ROOT, target))) broken.push(`${link.file}:${link.line}: ${link.target} (no such file)`);
      else if (anchor && target.endsWith('.md') && !anchors(target).has(anchor)) broken.push(`${link.file}:${link.line}: ${link.target} (no such heading)`);
    }
    expect(broken).toEqual([]);
  });

  it('the README and the index link to every guide, the pending ones by their titles', () => {
    const guides = [...new Set([...files.filter((f) => f.startsWith('docs/') && f !== 'docs/README.md')])].sort();
    expect(guides.length).toBeGreaterThanOrEqual(10);
    for (const page of ['README.md', 'docs/README.md']) {
      const linked = new Set(links(page).filter(local).map(resolved));
      expect(guides.filter((g) => !linked.has(g)), `guides ${page} does not link to`).toEqual([]);
    }
    expect(links('README.md').map(resolved)).toContain('docs/README.md');
    for (const page of ['README.md', 'docs/README.md']) {
      const byTarget = new Map(links(page).map((l) => [resolved(l), l.text]));
      expect(byTarget.get('docs/notices.md')).toBe('Notices when a person is needed');
      expect(byTarget.get('docs/reauthorization.md')).toBe('Re-authorization page');
    }
  });

  it('point a user of the package at nothing only a clone has: no sources, tests or design notes', () => {
    // The developer's guide describes the clone; every other page is read where the package is installed.
    const forUsers = files.filter((f) => f !== 'docs/development.md');
    const found = forUsers.flatMap((file) => readFileSync(path.join(ROOT, file), 'utf8').split('\n')
      .map((line, i) => ({ where: `${file}:${i + 1}`, line }))
      .filter(({ line }) => /\.\.\/shared\b|DESIGN\.md|SPEC\.md|(^|[\s`(])(src|test)\/[\w./-]+/.test(line))
      .map(({ where, line }) => `${where}: ${line.trim()}`));
    expect(found).toEqual([]);
  });

  it('keep the README to the person who installs it: what it is, install, the two commands, a quick start, links', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    expect([...readme.matchAll(/^## (.*)$/gm)].map((m) => m[1])).toEqual([
      'The two commands that matter', 'Install', 'Quick start with real accounts', 'When a person is needed', 'Documentation',
    ]);
    const twoCommands = /\n## The two commands that matter\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
    expect(twoCommands.split('\n').filter(Boolean).map((l) => l.replace(/\s+#.*$/, ''))).toEqual(['npm ci && npm run demo', 'npm test']);
    // `npm test` on a fresh machine needs more than Node: the README names the script that installs it, and
    // every package it names there is one that script installs (and the other way round).
    const needs = /\n`npm test` also needs the Debian packages[^(]*\(([^)]*)\): `(\.ci\/run)`[^\n]*about \d+ minutes/.exec(readme);
    expect(needs, 'a line after the two commands saying what `npm test` needs and which script installs it').not.toBeNull();
    const script = readFileSync(path.join(ROOT, needs?.[2] as string), 'utf8');
    const installed = (/apt-get install[^\n]*--no-install-recommends ([^>\n]*)/.exec(script)?.[1] ?? '').trim().split(/\s+/).filter((p) => !['ca-certificates', 'git'].includes(p));
    expect((needs?.[1] as string).split(/,\s*/).sort()).toEqual(installed.sort());
    expect(readme.split('\n').length).toBeLessThan(150);
  });
});
