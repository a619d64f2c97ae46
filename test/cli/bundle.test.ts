// The binary is a bundle (scripts/bundle-cli.mjs): a command loads its few chunks, not the hundred-odd modules
// of dist/ and zod, and what every command loads stays small (no zod, no node:crypto before they are needed).
// Structure only, no timings: `npm run bench` measures the start-up these keep down.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ROOT } from '../helpers/cli.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'syncauth-bundle-'));
  // Loader hooks that list every module file the run loads, and, at exit, Node's own modules it loaded.
  writeFileSync(path.join(dir, 'hooks.mjs'), `
import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  if (url.startsWith('file:')) appendFileSync(process.env.LOADED_OUT, url + '\\n');
  return next(url, context);
}
`);
  writeFileSync(path.join(dir, 'register.mjs'), `
import { register } from 'node:module';
import { writeFileSync } from 'node:fs';
register(${JSON.stringify(pathToFileURL(path.join(dir, 'hooks.mjs')).href)});
process.on('exit', () => writeFileSync(process.env.BUILTINS_OUT, process.moduleLoadList.join('\\n')));
`);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the built CLI with `args` in an empty config dir; gives the files and Node's modules it loaded. */
function loadedBy(args: string[]): { files: string[]; builtins: string[]; stdout: string } {
  const loadedOut = path.join(dir, `loaded-${args.join('-')}`);
  const builtinsOut = path.join(dir, `builtins-${args.join('-')}`);
  writeFileSync(loadedOut, '');
  const run = spawnSync(process.execPath, ['--import', pathToFileURL(path.join(dir, 'register.mjs')).href, CLI, ...args], {
    env: { PATH: process.env.PATH, HOME: dir, SYNCAUTH_CONFIG_DIR: path.join(dir, 'config'), LOADED_OUT: loadedOut, BUILTINS_OUT: builtinsOut },
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(run.status, run.stderr).toBe(0);
  const files = readFileSync(loadedOut, 'utf8').split('\n').filter(Boolean).map((url) => path.relative(ROOT, new URL(url).pathname));
  return { files: files.filter((f) => !f.startsWith('..')), builtins: readFileSync(builtinsOut, 'utf8').split('\n'), stdout: run.stdout };
}

describe('the binary', () => {
  it('runs a command from the bundle: chunks beside dist/cli/main.js, none of dist/\'s own modules, no zod', () => {
    const { files, builtins, stdout } = loadedBy(['--version']);
    expect(stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(files[0]).toBe('dist/cli/main.js');
    const outside = files.filter((f) => !/^dist\/cli\/(main|chunk-[A-Z0-9]+)\.js$/.test(f) && !f.startsWith('node_modules/'));
    expect(outside, 'modules loaded one by one rather than from the bundle').toEqual([]);
    // zod and commander are bundled; zod is loaded only by a command that parses something (zod names its
    // schema classes in strings that minifying keeps).
    expect(files.filter((f) => f.startsWith('node_modules/'))).toEqual([]);
    expect(files.filter((f) => readFileSync(path.join(ROOT, f), 'utf8').includes('"ZodObject"'))).toEqual([]);
    // node:crypto costs a tenth of Node's start-up: loaded by what uses it, not by every command.
    expect(builtins).not.toContain('NativeModule crypto');
  });

  it('keeps dist/\'s paths: the prerendered help beside main.js, the package version, and a command\'s own help', () => {
    expect(loadedBy(['--help']).stdout).toBe(readFileSync(path.join(ROOT, 'dist/cli/help.txt'), 'utf8'));
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(loadedBy(['--version']).stdout.trim()).toBe(version);
    expect(loadedBy(['source', '--help']).stdout).toMatch(/^Usage: syncauth source/);
  });
});
