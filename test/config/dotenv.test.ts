// `.env` parsing: a malformed line is reported by number (never by value) and skipped alone, never taking the
// next variable with it; well-formed files read as Node's own parser reads them. And the names syncauth does
// not know get a "did you mean".
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { describe, expect, it } from 'vitest';
import { MAX_DOTENV_BYTES, parseDotenv, readDotenv, readDotenvFile, unknownSettingVariables } from '../../src/config.js';
import { tempDir } from '../helpers/cli.js';

const SECRET = 'sk-not-for-any-message-4f9a';

function dotenvIn(content: string): string {
  const dir = tempDir('syncauth-dotenv-');
  writeFileSync(path.join(dir, '.env'), content);
  return dir;
}

describe('a malformed .env line', () => {
  it('without "=" does not swallow the next variable (Node\'s parser makes one key of both lines)', () => {
    const dir = dotenvIn(`${SECRET}\nSYNCAUTH_REMOTE_URL=dropbox://data\n`);
    expect(readDotenv(dir)).toEqual({ SYNCAUTH_REMOTE_URL: 'dropbox://data' });
  });

  it('with an opening quote closed only by a later variable\'s value does not eat the variables between', () => {
    const content = `SYNCAUTH_API_KEY="${SECRET}\nSYNCAUTH_REMOTE_URL=dropbox://data\nSYNCAUTH_ACCESS="write"\n`;
    const { values, problems } = parseDotenv(content);
    expect(values).toEqual({ SYNCAUTH_REMOTE_URL: 'dropbox://data', SYNCAUTH_ACCESS: 'write' });
    expect(problems).toEqual([{ line: 1, message: 'the value\'s opening " is never closed' }]);
  });

  it('is reported by line number with what is wrong, never with its value', () => {
    const content = [
      '# a comment',
      '',
      SECRET,
      'SYNCAUTH_BASE_URL=https://platform.example.com',
      `NOT A NAME=${SECRET}`,
      `SYNCAUTH_STORE_KEY='${SECRET}`,
      'SYNCAUTH_RECURSIVE=true',
    ].join('\n');
    const { values, problems } = parseDotenv(content);
    expect(values).toEqual({ SYNCAUTH_BASE_URL: 'https://platform.example.com', SYNCAUTH_RECURSIVE: 'true' });
    expect(problems.map((p) => p.line)).toEqual([3, 5, 6]);
    expect(problems[0]?.message).toBe('expected NAME=value');
    expect(problems[1]?.message).toBe('the name before "=" is not a variable name (letters, digits, _ . -)');
    expect(JSON.stringify(problems)).not.toContain(SECRET);
    expect(JSON.stringify(problems)).not.toContain('NOT A NAME');
  });

  it('readDotenvFile names the file with the problems', () => {
    const dir = dotenvIn('oops\nSYNCAUTH_ACCESS=read\n');
    expect(readDotenvFile(dir)).toEqual({
      file: path.join(dir, '.env'), values: { SYNCAUTH_ACCESS: 'read' }, problems: [{ line: 1, message: 'expected NAME=value' }],
    });
  });
});

describe('a well-formed .env', () => {
  // Lines Node's parseEnv reads the way dotenv does; ours must read them the same.
  const corpus = [
    'A=plain', 'B= spaced value  ', 'C="double"', "D='single'", 'E=`back`', 'F="with # hash" # and a comment', 'G=cut#here',
    'H=', 'export I=exported', ' J = padded ', 'K="line\\nbreak"', "L='no\\nbreak'", 'M="a" trailing', 'N=1', 'N=2',
    'O="multi\nline\nvalue"', 'P=after.multi', 'Q.R-S=dotted', 'T=it\'s', 'U="quote \' inside"',
  ].join('\n');

  it('reads as Node\'s parseEnv reads it, with no problems', () => {
    const { values, problems } = parseDotenv(corpus);
    expect(problems).toEqual([]);
    expect(values).toEqual(parseEnv(corpus));
  });

  it('with CRLF line ends too', () => {
    const crlf = corpus.replaceAll('\n', '\r\n');
    expect(parseDotenv(crlf)).toEqual({ values: parseEnv(crlf), problems: [] });
  });

  it('a multi-line value runs to its closing quote when no variable starts inside it', () => {
    const pem = 'KEY="-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\nq1w+/Zr0Tw==\n-----END KEY-----"\nNEXT=1\n';
    expect(parseDotenv(pem)).toEqual({ values: { KEY: '-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\nq1w+/Zr0Tw==\n-----END KEY-----', NEXT: '1' }, problems: [] });
    expect(parseDotenv(pem).values).toEqual(parseEnv(pem));
  });

  it('an absent .env, and a directory called .env (a Python virtualenv), read as empty', () => {
    const dir = tempDir('syncauth-dotenv-');
    expect(readDotenvFile(dir)).toEqual({ file: path.join(dir, '.env'), values: {}, problems: [] });
    mkdirSync(path.join(dir, '.env'));
    expect(readDotenvFile(dir)).toEqual({ file: path.join(dir, '.env'), values: {}, problems: [] });
  });
});

describe('unknown SYNCAUTH_ variables', () => {
  it('suggest the nearest setting by edit distance, and leave known and foreign names alone', () => {
    expect(unknownSettingVariables([
      'SYNCAUTH_BASEURL', 'SYNCAUTH_API_KY', 'SYNCAUTH_REFRESH_TOKN', 'Syncauth_Base_Url', 'SYNCAUTH_WHATEVER_ELSE',
      'SYNCAUTH_BASE_URL', 'SYNCAUTH_ENDPOINT_OVERRIDE', 'SYNCAUTH_DEBUG', 'PATH', 'DROPBOX_TOKEN',
    ])).toEqual([
      { name: 'SYNCAUTH_BASEURL', suggestion: 'SYNCAUTH_BASE_URL' },
      { name: 'SYNCAUTH_API_KY', suggestion: 'SYNCAUTH_API_KEY' },
      { name: 'SYNCAUTH_REFRESH_TOKN', suggestion: 'SYNCAUTH_REFRESH_TOKEN' },
      { name: 'Syncauth_Base_Url', suggestion: 'SYNCAUTH_BASE_URL' },
      { name: 'SYNCAUTH_WHATEVER_ELSE' },
    ]);
  });

  it('each name once', () => {
    expect(unknownSettingVariables(['SYNCAUTH_PROFILES', 'SYNCAUTH_PROFILES'])).toEqual([{ name: 'SYNCAUTH_PROFILES', suggestion: 'SYNCAUTH_PROFILE' }]);
  });
});

describe('a .env that is not a regular file', () => {
  it('a FIFO is refused at once, not waited on, and its settings are not used', () => {
    const dir = tempDir('syncauth-dotenv-fifo-');
    execFileSync('mkfifo', [path.join(dir, '.env')]);
    // A blocking open of a FIFO with no writer never returns: the test would time out, not fail.
    const read = readDotenvFile(dir);
    expect(read.values).toEqual({});
    expect(read.unreadable).toMatch(/not a regular file/);
  });

  it('a link to a device (/dev/zero) is refused, not read without end', () => {
    const dir = tempDir('syncauth-dotenv-dev-');
    symlinkSync('/dev/zero', path.join(dir, '.env'));
    const read = readDotenvFile(dir);
    expect(read.values).toEqual({});
    expect(read.unreadable).toMatch(/not a regular file/);
  });

  it('an oversized file is refused whole rather than read in part', () => {
    const dir = dotenvIn(`SYNCAUTH_PROFILE=big\n#${'x'.repeat(MAX_DOTENV_BYTES)}\n`);
    const read = readDotenvFile(dir);
    expect(read.values).toEqual({});
    expect(read.unreadable).toMatch(/larger than/);
  });
});
