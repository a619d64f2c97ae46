// What a template's SRC may be: a FIFO or a device is refused before the daemon starts and, swapped in later,
// fails its render at once; a link another user swaps in cannot put a root-only file into DEST. Renders of one
// file keep only the latest one waiting, and stop at shutdown.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { checkTemplate, TemplateRenderer, type TemplateValues } from '../../src/publish/index.js';
import { tempDir } from '../helpers/cli.js';

const TOKEN = `sl.u.${'B'.repeat(60)}template-source-token`;
const EXPIRES = Date.parse('2031-05-06T07:08:09.000Z');

function values(overrides: Partial<TemplateValues> = {}): TemplateValues {
  return { accessToken: TOKEN, expiresAt: EXPIRES, profile: 'docs', accountId: 'dbid:AAH4f99', now: EXPIRES - 3_600_000, ...overrides };
}

function captureLog() {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(line) } });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

async function issuesOf(promise: Promise<unknown>): Promise<string[]> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(ValidationError);
  return (error as ValidationError).issues.map((i) => `${i.field}: ${i.message}`);
}

describe('a template SRC that is not a regular file', () => {
  it('is refused before anything starts, at once: a FIFO and /dev/zero', async () => {
    const dir = tempDir();
    const fifo = path.join(dir, 'fifo.tpl');
    execFileSync('mkfifo', [fifo]);
    const started = Date.now();
    expect(await issuesOf(checkTemplate({ source: fifo, dest: path.join(dir, 'out'), mode: 0o600 }, ['docs']))).toEqual([
      `--template: cannot read template ${fifo}: it is a FIFO (named pipe), not a regular file`,
    ]);
    expect(await issuesOf(checkTemplate({ source: '/dev/zero', dest: path.join(dir, 'out'), mode: 0o600 }, ['docs'], 'templates[0]'))).toEqual([
      'templates[0]: cannot read template /dev/zero: it is a character device, not a regular file',
    ]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('swapped in between renders, fails its render at once and keeps the previous DEST', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    const dest = path.join(dir, 'env');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const log = captureLog();
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o600 }], log.logger);
    await renderer.render(values());
    rmSync(source);
    execFileSync('mkfifo', [source]);
    const started = Date.now();
    await renderer.render(values({ accessToken: `${TOKEN}-second` }));
    rmSync(source);
    symlinkSync('/dev/zero', source);
    await renderer.render(values({ accessToken: `${TOKEN}-third` }));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(readFileSync(dest, 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
    const failed = log.records().filter((r) => r.event === 'template.failed');
    expect(failed.map((r) => [r.errorCode, r.error])).toEqual([
      ['FILE_REFUSED', `${source}: is a FIFO (named pipe), not a regular file`],
      ['FILE_REFUSED', `${source}: is a character device, not a regular file`],
    ]);
  });
});

describe('a template SRC in a directory another user controls', () => {
  it('swapped for a link to a root-only file between renders: DEST never gets that file', async () => {
    const shared = tempDir('syncauth-tpl-shared-');
    chmodSync(shared, 0o755);
    const theirs = path.join(shared, 'consumer');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, 65534, 65534);
    const source = path.join(theirs, 'app.tpl');
    const asNobody = (...argv: string[]): void => {
      const run = spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', ...argv], { encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
    };
    asNobody('sh', '-c', `printf 'TOKEN={{ access_token }}\\n' > '${source}'`);
    const secretDir = tempDir('syncauth-root-only-');
    const secret = path.join(secretDir, 'shadow');
    writeFileSync(secret, 'ROOT-ONLY-CONTENT\n', { mode: 0o600 });
    const dest = path.join(shared, 'app.env');
    await checkTemplate({ source, dest, mode: 0o644 }, ['docs']);
    const log = captureLog();
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o644 }], log.logger);
    await renderer.render(values());
    expect(readFileSync(dest, 'utf8')).toBe(`TOKEN=${TOKEN}\n`);

    asNobody('ln', '-sfn', secret, source);
    await renderer.render(values({ accessToken: `${TOKEN}-second` }));
    expect(readFileSync(dest, 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
    const failed = log.records().filter((r) => r.event === 'template.failed');
    expect(failed).toHaveLength(1);
    expect(String(failed[0]?.error)).toContain(`goes through the symbolic link ${source}, owned by uid 65534`);
    expect(log.lines.join('')).not.toContain('ROOT-ONLY-CONTENT');
    // And at start, the same link is refused naming the flag.
    const issues = await issuesOf(checkTemplate({ source, dest, mode: 0o644 }, ['docs']));
    expect(issues[0]).toContain(`--template: cannot read template ${source}: it goes through the symbolic link ${source}, owned by uid 65534`);
  });
});

describe('TemplateRenderer queue', () => {
  it('while a render of a file runs, only the latest one asked for waits; each caller is answered', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const dest = path.join(dir, 'env');
    const log = captureLog();
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o600 }], log.logger);
    await Promise.all(Array.from({ length: 30 }, (_, i) => renderer.render(values({ accessToken: `${TOKEN}-${i}` }))));
    expect(readFileSync(dest, 'utf8')).toBe(`TOKEN=${TOKEN}-29\n`);
    // The first, then the last: the 28 between were replaced before their turn came.
    expect(log.records().filter((r) => r.event === 'template.rendered')).toHaveLength(2);
  });

  it('renders nothing after stop(), and answers a render that was waiting', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const dest = path.join(dir, 'env');
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o600 }], captureLog().logger);
    const first = renderer.render(values());
    const waiting = renderer.render(values({ accessToken: `${TOKEN}-waiting` }));
    renderer.stop();
    await Promise.all([first, waiting]);
    await renderer.render(values({ accessToken: `${TOKEN}-after` }));
    expect(readFileSync(dest, 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
  });
});

describe('a template DEST in a directory another user controls', () => {
  it('swapped for a link to a root-only file: the link is replaced, that file is left alone', async () => {
    const shared = tempDir('syncauth-tpl-dest-');
    chmodSync(shared, 0o755);
    const theirs = path.join(shared, 'consumer');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, 65534, 65534);
    const source = path.join(shared, 'app.tpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const dest = path.join(theirs, 'app.env');
    const victim = path.join(tempDir('syncauth-root-only-'), 'important');
    writeFileSync(victim, 'ROOT-ONLY-CONTENT\n', { mode: 0o600 });
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o644 }], captureLog().logger);
    await renderer.render(values());
    const run = spawnSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', 'ln', '-sfn', victim, dest], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    await renderer.render(values({ accessToken: `${TOKEN}-second` }));
    expect(readFileSync(victim, 'utf8')).toBe('ROOT-ONLY-CONTENT\n');
    expect(lstatSync(dest).isSymbolicLink()).toBe(false);
    expect(readFileSync(dest, 'utf8')).toBe(`TOKEN=${TOKEN}-second\n`);
  });
});
