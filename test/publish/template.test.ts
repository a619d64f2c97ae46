// Templates: the flag, the fields, refusal of what cannot render before anything is written, and at renewal
// time a failure that keeps the previous file whole and logs without the token.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import {
  checkTemplate,
  parseTemplateFlag,
  renderTemplate,
  TEMPLATE_FIELDS,
  TemplateError,
  TemplateRenderer,
  type TemplateValues,
} from '../../src/publish/index.js';
import { tempDir } from '../helpers/cli.js';

const TOKEN = `sl.u.${'A'.repeat(60)}template-test-token`;
const EXPIRES = Date.parse('2031-05-06T07:08:09.000Z');

function values(overrides: Partial<TemplateValues> = {}): TemplateValues {
  return { accessToken: TOKEN, expiresAt: EXPIRES, profile: 'docs', accountId: 'dbid:AAH4f99', now: EXPIRES - 3_600_500, ...overrides };
}

function captureLog() {
  const lines: string[] = [];
  const logger = createLogger({ level: 'debug', destination: { write: (line: string) => void lines.push(line) } });
  return { logger, lines, records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

async function refusalOf(promise: Promise<unknown>): Promise<ValidationError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ValidationError);
  return error as ValidationError;
}

describe('parseTemplateFlag', () => {
  it('reads SRC:DEST[:MODE], paths made absolute, mode 0600 unless given', () => {
    expect(parseTemplateFlag('/etc/t/rclone.tpl:/run/out/{profile}.conf')).toEqual({
      source: '/etc/t/rclone.tpl',
      dest: '/run/out/{profile}.conf',
      mode: 0o600,
    });
    expect(parseTemplateFlag('t.env:out.env:0640')).toEqual({
      source: path.resolve('t.env'),
      dest: path.resolve('out.env'),
      mode: 0o640,
    });
  });

  it.each([
    ['only-a-source', 'SRC:DEST'],
    [':/run/out', 'no template file'],
    ['/etc/t:', 'no destination file'],
    ['/etc/t:/run/out:0640:extra', 'SRC:DEST'],
    ['/etc/t:/run/out:rw', 'not an octal mode'],
    ['/etc/t:/run/out:0666', 'world-writable'],
  ])('refuses %j, naming the field', (raw, why) => {
    let error: unknown;
    try {
      parseTemplateFlag(raw, 'templates[0]');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).issues[0]?.field).toBe('templates[0]');
    expect((error as ValidationError).message).toContain(why);
  });

  it('names --template by default', () => {
    expect(() => parseTemplateFlag('nothing')).toThrow(/^--template: /);
  });
});

describe('renderTemplate', () => {
  it('renders every field: an rclone remote section and an env file', () => {
    expect([...TEMPLATE_FIELDS]).toEqual(['access_token', 'expires_at', 'expires_at_unix', 'expires_in', 'profile', 'account_id']);
    const rclone = [
      '[dropbox-{{profile}}]',
      'type = dropbox',
      'token = {"access_token":"{{ access_token }}","token_type":"bearer","expiry":"{{ expires_at }}"}',
      '',
    ].join('\n');
    expect(renderTemplate(rclone, values())).toBe(
      [
        '[dropbox-docs]',
        'type = dropbox',
        `token = {"access_token":"${TOKEN}","token_type":"bearer","expiry":"2031-05-06T07:08:09.000Z"}`,
        '',
      ].join('\n'),
    );
    const env = [
      'DROPBOX_ACCESS_TOKEN={{access_token}}',
      'DROPBOX_EXPIRES_AT={{  expires_at_unix  }}',
      'DROPBOX_EXPIRES_IN={{expires_in }}',
      'DROPBOX_ACCOUNT_ID={{	account_id}}',
      'SYNCAUTH_PROFILE={{ profile }}',
      'LITERAL=} { }} {x}',
    ].join('\n');
    expect(renderTemplate(env, values())).toBe(
      [
        `DROPBOX_ACCESS_TOKEN=${TOKEN}`,
        `DROPBOX_EXPIRES_AT=${EXPIRES / 1000}`,
        // 3600.5 s left: whole seconds, rounded down.
        'DROPBOX_EXPIRES_IN=3600',
        'DROPBOX_ACCOUNT_ID=dbid:AAH4f99',
        'SYNCAUTH_PROFILE=docs',
        'LITERAL=} { }} {x}',
      ].join('\n'),
    );
    expect(renderTemplate('{{expires_in}}', values({ now: EXPIRES + 5_000 }))).toBe('0');
  });

  it.each([
    ['{{ nope }}', 'unknown field {{ nope }}'],
    ['ok\n{{ access-token }}', 'line 2: "{{" does not open a field'],
    ['{{ access_token }', 'does not open a field'],
    ['{{{ access_token }}}', 'does not open a field'],
    ['{{}}', 'does not open a field'],
  ])('refuses %j without quoting the template or a value', (text, why) => {
    let error: unknown;
    try {
      renderTemplate(`SECRET_FROM_TEMPLATE=abc ${text}`, values(), '/etc/t/x.tpl');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TemplateError);
    expect((error as TemplateError).code).toBe('TEMPLATE_INVALID');
    expect((error as TemplateError).message).toContain('template /etc/t/x.tpl: ');
    expect((error as TemplateError).message).toContain(why);
    expect((error as TemplateError).message).not.toContain('SECRET_FROM_TEMPLATE');
    expect((error as TemplateError).message).not.toContain(TOKEN);
  });

  it('refuses {{ account_id }} while the account id is unknown', () => {
    expect(() => renderTemplate('id={{account_id}}', values({ accountId: undefined }))).toThrow(TemplateError);
    expect(renderTemplate('no id here: {{ profile }}', values({ accountId: undefined }))).toBe('no id here: docs');
  });
});

describe('checkTemplate', () => {
  it('passes a good template and writes nothing', async () => {
    const dir = tempDir();
    writeFileSync(path.join(dir, 'env.tpl'), 'TOKEN={{ access_token }}\n');
    mkdirSync(path.join(dir, 'out'));
    await checkTemplate({ source: path.join(dir, 'env.tpl'), dest: path.join(dir, 'out', '{profile}.env'), mode: 0o600 }, ['a', 'b']);
    expect(readdirSync(path.join(dir, 'out'))).toEqual([]);
  });

  it('refuses unknown placeholders, naming the field, the template and each placeholder', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'bad.tpl');
    writeFileSync(source, 'A={{ acces_token }}\nB={{ expires_at }}\nC={{ nope }}\n');
    const error = await refusalOf(checkTemplate({ source, dest: path.join(dir, 'out.env'), mode: 0o600 }, ['docs'], 'templates[1]'));
    expect(error.issues.map((i) => i.field)).toEqual(['templates[1]', 'templates[1]']);
    expect(error.issues[0]?.message).toBe(`template ${source}, line 1: unknown field {{ acces_token }}`);
    expect(error.issues[1]?.message).toBe(`template ${source}, line 3: unknown field {{ nope }}`);
    expect(readdirSync(dir)).toEqual(['bad.tpl']);
  });

  it('refuses a missing template, a missing destination directory, and one file for several profiles', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const missing = await refusalOf(checkTemplate({ source: path.join(dir, 'gone.tpl'), dest: path.join(dir, 'x'), mode: 0o600 }, ['docs']));
    expect(missing.message).toContain(`--template: cannot read template ${path.join(dir, 'gone.tpl')} (ENOENT)`);
    const noDir = await refusalOf(checkTemplate({ source, dest: path.join(dir, 'nowhere', '{profile}.env'), mode: 0o600 }, ['a', 'b']));
    expect(noDir.issues.map((i) => i.message)).toEqual([
      `the directory of ${path.join(dir, 'nowhere', 'a.env')} does not exist`,
      `the directory of ${path.join(dir, 'nowhere', 'b.env')} does not exist`,
    ]);
    const shared = await refusalOf(checkTemplate({ source, dest: path.join(dir, 'one.env'), mode: 0o600 }, ['a', 'b']));
    expect(shared.message).toContain('must contain {profile}');
    const itself = await refusalOf(checkTemplate({ source, dest: source, mode: 0o600 }, ['docs']));
    expect(itself.message).toContain('is the template itself');
  });
});

describe('TemplateRenderer', () => {
  it('renders with the mode given (0600 by default), per profile, and logs without the token', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, 'TOKEN={{ access_token }}\n');
    const log = captureLog();
    const renderer = new TemplateRenderer(
      [
        { source, dest: path.join(dir, '{profile}.env'), mode: 0o600 },
        parseTemplateFlag(`${source}:${path.join(dir, '{profile}.shared.env')}:0640`),
      ],
      log.logger,
    );
    await renderer.render(values());
    await renderer.render(values({ profile: 'other', accessToken: `${TOKEN}-other` }));
    expect(readFileSync(path.join(dir, 'docs.env'), 'utf8')).toBe(`TOKEN=${TOKEN}\n`);
    expect(readFileSync(path.join(dir, 'other.env'), 'utf8')).toBe(`TOKEN=${TOKEN}-other\n`);
    expect(statSync(path.join(dir, 'docs.env')).mode & 0o777).toBe(0o600);
    expect(statSync(path.join(dir, 'docs.shared.env')).mode & 0o777).toBe(0o640);
    expect(statSync(path.join(dir, 'other.shared.env')).mode & 0o777).toBe(0o640);
    const rendered = log.records().filter((r) => r.event === 'template.rendered');
    expect(rendered).toHaveLength(4);
    expect(rendered.map((r) => `${String(r.profile)} ${String(r.template)} ${String(r.dest)}`).sort()).toEqual(
      ['docs.env', 'docs.shared.env', 'other.env', 'other.shared.env'].map((f) => `${f.split('.')[0]} ${source} ${path.join(dir, f)}`),
    );
    expect(log.lines.join('')).not.toContain(TOKEN);
  });

  it('after SRC is broken or deleted, keeps the previous DEST byte for byte and logs template.failed once', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'rclone.tpl');
    const dest = path.join(dir, 'rclone.conf');
    writeFileSync(source, '[dropbox]\ntoken = {"access_token":"{{ access_token }}","expiry":"{{ expires_at }}"}\n');
    const log = captureLog();
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o640 }], log.logger);
    await renderer.render(values());
    const before = readFileSync(dest);
    const inode = statSync(dest).ino;

    // An operator's edit applies at the next render: here a typo.
    writeFileSync(source, 'token={{ access_token }} {{nope}}\n');
    await renderer.render(values({ accessToken: `${TOKEN}-second` }));
    expect(readFileSync(dest).equals(before)).toBe(true);
    expect(statSync(dest).ino).toBe(inode);

    rmSync(source);
    await renderer.render(values({ accessToken: `${TOKEN}-third` }));
    expect(readFileSync(dest).equals(before)).toBe(true);

    writeFileSync(source, 'id={{ account_id }}\n');
    await renderer.render(values({ accessToken: `${TOKEN}-fourth`, accountId: undefined }));
    expect(readFileSync(dest).equals(before)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['rclone.conf', 'rclone.tpl']);

    const failed = log.records().filter((r) => r.event === 'template.failed');
    expect(failed).toHaveLength(3);
    for (const record of failed) expect(record).toMatchObject({ profile: 'docs', template: source, dest, level: 50 });
    expect(failed[0]?.error).toContain('unknown field {{ nope }}');
    expect(failed[1]?.errorCode).toBe('ENOENT');
    expect(failed[2]?.error).toContain('account id');
    // Neither the token nor anything rendered reaches the log.
    expect(log.lines.join('')).not.toContain(TOKEN);
    expect(log.lines.join('')).not.toContain('access_token":"');

    // Fixed, the next render goes through.
    writeFileSync(source, 'token={{ access_token }}\n');
    await renderer.render(values({ accessToken: `${TOKEN}-fifth` }));
    expect(readFileSync(dest, 'utf8')).toBe(`token=${TOKEN}-fifth\n`);
  });

  it('a write error (destination directory gone) is logged, not thrown', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, '{{ access_token }}');
    const log = captureLog();
    const renderer = new TemplateRenderer([{ source, dest: path.join(dir, 'gone', 'env'), mode: 0o600 }], log.logger);
    await expect(renderer.render(values())).resolves.toBeUndefined();
    expect(log.records().filter((r) => r.event === 'template.failed')).toHaveLength(1);
  });

  it('renders of one file run one after another: the last render queued is what stays', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'env.tpl');
    writeFileSync(source, `${'#'.repeat(100_000)}\nTOKEN={{ access_token }}\n`);
    const dest = path.join(dir, 'env');
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o640 }], captureLog().logger);
    await Promise.all(Array.from({ length: 40 }, (_, i) => renderer.render(values({ accessToken: `${TOKEN}-${i}` }))));
    expect(readFileSync(dest, 'utf8').endsWith(`TOKEN=${TOKEN}-39\n`)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['env', 'env.tpl']);
  });

  it('replaces DEST atomically: a reader looping on it only sees whole renders', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'big.tpl');
    const dest = path.join(dir, 'big.env');
    // Large, so that a render written in place would be caught half done.
    writeFileSync(source, `# ${'padding '.repeat(25_000)}\nTOKEN={{ access_token }}\nPROFILE={{ profile }}\nEND\n`);
    const renderer = new TemplateRenderer([{ source, dest, mode: 0o640 }], captureLog().logger);
    await renderer.render(values({ accessToken: 'tok-000000' }));
    const expectedLength = readFileSync(dest, 'utf8').length;
    // The reader reads until it has seen enough whole renders (or a minute has passed, on a machine far too busy
    // for anything), and the renders go on until the reader is done: counts, not a time window, decide the test.
    let done = false;
    const reader = readConcurrently(dest, expectedLength, 60_000).finally(() => (done = true));
    let renders = 1;
    while (!done) {
      await renderer.render(values({ accessToken: `tok-${String(renders).padStart(6, '0')}` }));
      renders += 1;
    }
    const seen = await reader;
    expect(seen.bad).toBe(0);
    expect(seen.reads).toBeGreaterThan(50);
    expect(seen.distinct).toBeGreaterThan(5);
    expect(renders).toBeGreaterThan(5);
  }, 90_000);
});

const READER = `
const fs = require('node:fs');
const [file, length, ms] = process.argv.slice(1);
const end = Date.now() + Number(ms);
let reads = 0, bad = 0;
const seen = new Set();
while (Date.now() < end && (reads <= 200 || seen.size <= 20)) {
  let text;
  try { text = fs.readFileSync(file, 'utf8'); } catch { bad++; continue; }
  reads++;
  const m = /\\nTOKEN=(tok-\\d{6})\\nPROFILE=docs\\nEND\\n$/.exec(text);
  if (m && text.length === Number(length) && text.startsWith('# padding ')) seen.add(m[1]); else bad++;
}
process.stdout.write(JSON.stringify({ reads, bad, distinct: seen.size }));
`;

function readConcurrently(file: string, length: number, ms: number): Promise<{ reads: number; bad: number; distinct: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', READER, file, String(length), String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('close', () => resolve(JSON.parse(out) as { reads: number; bad: number; distinct: number }));
  });
}
