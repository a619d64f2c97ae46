// Shared files: the modes an operator may give, the group that lets another user read, and replacement whole
// or not at all. Readers run as other processes, the cross-user ones as nobody/nogroup (65534).
import { spawn } from 'node:child_process';
import { chmodSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { parseMode, parseSocketMode, resolveGroup, writeSharedFile } from '../../src/publish/index.js';
import { tempDir } from '../helpers/cli.js';

const NOBODY = 65534;

function refusal(run: () => unknown): ValidationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

/** Runs `cat file` as nobody/nogroup: exit code and output. */
function catAsNobody(file: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('cat', [file], { uid: NOBODY, gid: NOBODY, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

// Reads the file in a tight loop; every read must be one whole version: a header naming its length and exactly
// that many payload characters.
const READER = `
const fs = require('node:fs');
const [file, ms] = process.argv.slice(1);
const end = Date.now() + Number(ms);
let reads = 0, bad = 0;
const seen = new Set();
while (Date.now() < end) {
  let text;
  try { text = fs.readFileSync(file, 'utf8'); } catch (error) { if (error.code !== 'ENOENT') bad++; continue; }
  reads++;
  const m = /^v(\\d+) (\\d+)\\n([a-z]*)$/.exec(text);
  if (m && m[3].length === Number(m[2]) && /^([a-z])\\1*$/.test(m[3])) seen.add(m[1]); else bad++;
}
process.stdout.write(JSON.stringify({ reads, bad, distinct: seen.size }));
`;

function readConcurrently(file: string, ms: number): Promise<{ reads: number; bad: number; distinct: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', READER, file, String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.once('error', reject);
    child.once('close', () => resolve(JSON.parse(out) as { reads: number; bad: number; distinct: number }));
  });
}

describe('parseMode', () => {
  it('reads the octal spellings operators use', () => {
    expect(parseMode('0640', '--token-file-mode')).toBe(0o640);
    expect(parseMode('640', '--token-file-mode')).toBe(0o640);
    expect(parseMode('0o640', '--token-file-mode')).toBe(0o640);
    expect(parseMode('0600', '--token-file-mode')).toBe(0o600);
    expect(parseMode('0400', '--token-file-mode')).toBe(0o400);
    expect(parseMode('0644', '--token-file-mode')).toBe(0o644);
  });

  it.each([
    ['rw-r-----', 'not an octal mode'],
    ['0680', 'not an octal mode'],
    ['', 'not an octal mode'],
    ['0x1a0', 'not an octal mode'],
    ['4640', 'only permission bits'],
    ['1600', 'only permission bits'],
    ['0642', 'world-writable'],
    ['0666', 'world-writable'],
    ['0660', 'group-writable'],
    ['0040', 'the owner read'],
    ['0200', 'the owner read'],
  ])('refuses %j, naming the field', (raw, why) => {
    const error = refusal(() => parseMode(raw, '--token-file-mode'));
    expect(error.issues).toHaveLength(1);
    expect(error.issues[0]?.field).toBe('--token-file-mode');
    expect(error.message).toContain('--token-file-mode: ');
    expect(error.issues[0]?.message).toContain(why);
    expect(error.exitCode).toBe(2);
  });

  it('lets a socket be group-writable, which connecting needs, but never world-writable', () => {
    expect(parseSocketMode('0660', '--socket-mode')).toBe(0o660);
    expect(parseSocketMode('600', '--socket-mode')).toBe(0o600);
    expect(refusal(() => parseSocketMode('0666', '--socket-mode')).issues[0]?.field).toBe('--socket-mode');
    expect(refusal(() => parseSocketMode('0460', '--socket-mode')).issues[0]?.message).toContain('owner read and write');
  });
});

describe('resolveGroup', () => {
  it('takes a number as is and a name from /etc/group', async () => {
    expect(await resolveGroup('65534', '--token-file-group')).toBe(NOBODY);
    expect(await resolveGroup('4242', '--token-file-group')).toBe(4242);
    expect(await resolveGroup('nogroup', '--token-file-group')).toBe(NOBODY);
    expect(await resolveGroup('root', '--token-file-group')).toBe(0);
  });

  it('refuses an unknown name or a malformed one, naming the field', async () => {
    for (const raw of ['no-such-group-here', 'a:b', '4294967295']) {
      const error = await resolveGroup(raw, '--token-file-group').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).issues[0]?.field).toBe('--token-file-group');
    }
    const unknown = (await resolveGroup('no-such-group-here', 'tokenFileGroup').catch((e: unknown) => e)) as ValidationError;
    expect(unknown.message).toContain('no group named "no-such-group-here"');
  });
});

describe('writeSharedFile', () => {
  it('0640 with group nogroup: nobody can read it; 0600: nobody cannot', async () => {
    const dir = tempDir();
    chmodSync(dir, 0o755);
    const file = path.join(dir, 'token');

    await writeSharedFile(file, 'shared-token-value', { mode: 0o640, gid: NOBODY });
    const shared = statSync(file);
    expect(shared.mode & 0o777).toBe(0o640);
    expect(shared.gid).toBe(NOBODY);
    expect(await catAsNobody(file)).toMatchObject({ code: 0, stdout: 'shared-token-value' });

    await writeSharedFile(file, 'private-token-value', { mode: 0o600, gid: NOBODY });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const refused = await catAsNobody(file);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('Permission denied');
    expect(refused.stdout).toBe('');

    // The default goes through writePrivateFile: 0600, owned by this process's group.
    await writeSharedFile(file, 'default-token-value', { mode: 0o600 });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect((await catAsNobody(file)).code).not.toBe(0);
    expect(readdirSync(dir)).toEqual(['token']);
  });

  it('replaces the file atomically: a concurrent reader only ever sees whole versions', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'token');
    writeFileSync(file, 'v0 0\n');
    const reader = readConcurrently(file, 1500);
    const started = Date.now();
    let writes = 0;
    let inode = statSync(file).ino;
    let replaced = 0;
    while (Date.now() - started < 1400) {
      // Large enough that a write in place would be seen half done.
      const size = 200_000 + (writes % 7) * 10_000;
      const letter = String.fromCharCode(97 + (writes % 26));
      await writeSharedFile(file, `v${writes} ${size}\n${letter.repeat(size)}`, { mode: 0o640, gid: NOBODY });
      writes += 1;
      const next = statSync(file).ino;
      if (next !== inode) replaced += 1;
      inode = next;
    }
    const seen = await reader;
    expect(seen.bad).toBe(0);
    expect(seen.reads).toBeGreaterThan(50);
    expect(seen.distinct).toBeGreaterThan(5);
    expect(replaced).toBe(writes);
    expect(readdirSync(dir)).toEqual(['token']);
  });

  it('a write that fails (unknown group for a non-root writer, or a missing directory) leaves nothing behind', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'token');
    writeFileSync(file, 'before');
    await expect(writeSharedFile(path.join(dir, 'missing', 'token'), 'x', { mode: 0o640 })).rejects.toMatchObject({ code: 'ENOENT' });
    // A gid outside what chown accepts fails the write instead of leaving the file with another group.
    await expect(writeSharedFile(file, 'after', { mode: 0o640, gid: -2 })).rejects.toThrow();
    expect(readdirSync(dir)).toEqual(['token']);
    expect(statSync(file).size).toBe('before'.length);
  });
});
