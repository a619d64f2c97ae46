// Where sinks are written: a link at a published path is replaced, never followed; a sink whose directory other
// users may write moves into the daemon's own subdirectory there, which must be a real directory of its own.
import { spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { writePrivateFile } from '../../src/profile/files.js';
import { writeSharedFile } from '../../src/publish/file.js';
import { placeSinks, privateSubdirName } from '../../src/publish/place.js';
import { tempDir } from '../helpers/cli.js';

const NOBODY = 65534;
const UID = process.geteuid?.() ?? 0;

function asNobody(script: string, ...args: string[]): void {
  const result = spawnSync('setpriv', ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', 'sh', '-ec', script, 'sh', ...args], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
}

function dirWithMode(mode: number): string {
  const dir = tempDir('syncauth-place-');
  chmodSync(dir, mode);
  return dir;
}

const one = (template: string): string[] => [template];

async function refusal(run: () => Promise<unknown>): Promise<ValidationError> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return error as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('writing a published file never follows a link', () => {
  it('a link at the token path is replaced by the file; what it pointed at is untouched', async () => {
    const dir = tempDir('syncauth-place-');
    const target = path.join(dir, 'secrets.enc');
    writeFileSync(target, 'the secret store', { mode: 0o600 });
    const file = path.join(dir, 'token');
    symlinkSync(target, file);
    await writeSharedFile(file, 'sl.token', { mode: 0o640 });
    expect(lstatSync(file).isFile()).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('sl.token');
    expect((statSync(file).mode & 0o777).toString(8)).toBe('640');
    expect(readFileSync(target, 'utf8')).toBe('the secret store');
    expect((statSync(target).mode & 0o777).toString(8)).toBe('600');
  });

  it("nor does a write of the config directory's own files", async () => {
    const dir = tempDir('syncauth-place-');
    const elsewhere = path.join(dir, 'elsewhere');
    writeFileSync(elsewhere, 'keep me');
    const file = path.join(dir, 'journal.json');
    symlinkSync(elsewhere, file);
    await writePrivateFile(file, '{}\n');
    expect(lstatSync(file).isFile()).toBe(true);
    expect(readFileSync(elsewhere, 'utf8')).toBe('keep me');
  });
});

describe('placing sinks', () => {
  it('a directory only its owner may write is used as it is', async () => {
    const dir = dirWithMode(0o755);
    const file = path.join(dir, 'token');
    expect(await placeSinks([{ path: file, field: '--token-file' }], one)).toEqual([{ path: file }]);
  });

  it.each([
    ['sticky and world-writable, like /tmp', 0o1777, 'world-writable (01777)'],
    ['a Kubernetes emptyDir', 0o2777, 'world-writable (02777)'],
    ['group-writable', 0o770, 'group-writable (0770)'],
  ])('%s: the sink moves into syncauth-<uid>, 0750 with the sink group', async (_, mode, why) => {
    const dir = dirWithMode(mode);
    const [placed] = await placeSinks([{ path: path.join(dir, 'token'), field: '--token-file', gid: NOBODY }], one);
    const own = path.join(dir, privateSubdirName());
    expect(placed).toEqual({ path: path.join(own, 'token'), movedBecause: `${dir} is ${why}` });
    const info = lstatSync(own);
    expect(info.isDirectory()).toBe(true);
    expect(info.uid).toBe(UID);
    expect(info.gid).toBe(NOBODY);
    expect((info.mode & 0o7777).toString(8)).toBe('750');
  });

  it('{profile} in the path is kept, each profile gets the subdirectory of its own directory', async () => {
    const dir = dirWithMode(0o1777);
    mkdirSync(path.join(dir, 'a'), { mode: 0o777 });
    chmodSync(path.join(dir, 'a'), 0o777);
    mkdirSync(path.join(dir, 'b'), { mode: 0o755 });
    const [placed] = await placeSinks([{ path: path.join(dir, '{profile}', 'token'), field: '--token-file' }], (t) => ['a', 'b'].map((p) => t.replace('{profile}', p)));
    expect(placed?.path).toBe(path.join(dir, '{profile}', privateSubdirName(), 'token'));
    for (const p of ['a', 'b']) expect(lstatSync(path.join(dir, p, privateSubdirName())).isDirectory()).toBe(true);
  });

  it('an existing subdirectory of its own is reused and given its mode and group back', async () => {
    const dir = dirWithMode(0o1777);
    const own = path.join(dir, privateSubdirName());
    mkdirSync(own, { mode: 0o700 });
    writeFileSync(path.join(own, 'token'), 'kept');
    await placeSinks([{ path: path.join(dir, 'token'), field: '--token-file', gid: NOBODY }], one);
    expect((statSync(own).mode & 0o7777).toString(8)).toBe('750');
    expect(statSync(own).gid).toBe(NOBODY);
    expect(readFileSync(path.join(own, 'token'), 'utf8')).toBe('kept');
  });

  it('a subdirectory of that name made by another user, a link, a file, or one its group may write is refused, naming the path and the rule', async () => {
    const squatted = dirWithMode(0o1777);
    asNobody('mkdir -m 0750 "$1"', path.join(squatted, privateSubdirName()));
    const linked = dirWithMode(0o1777);
    asNobody('ln -s /root "$1"', path.join(linked, privateSubdirName()));
    const file = dirWithMode(0o1777);
    asNobody(': > "$1"', path.join(file, privateSubdirName()));
    const loose = dirWithMode(0o1777);
    mkdirSync(path.join(loose, privateSubdirName()));
    chmodSync(path.join(loose, privateSubdirName()), 0o770);
    const cases: [string, string][] = [
      [squatted, `belongs to uid ${NOBODY}`],
      [linked, 'is a symbolic link'],
      [file, 'is not a directory'],
      [loose, 'is writable by its group or by others (0770)'],
    ];
    for (const [dir, why] of cases) {
      const error = await refusal(() => placeSinks([{ path: path.join(dir, 'token'), field: '--token-file' }], one));
      expect(error.issues).toHaveLength(1);
      expect(error.issues[0]?.field).toBe('--token-file');
      expect(error.issues[0]?.message).toContain(`${path.join(dir, privateSubdirName())} ${why}`);
      expect(error.issues[0]?.message).toContain('private subdirectory syncauth-<uid>');
    }
  });

  it('two sinks moving into one directory with different groups are refused', async () => {
    const dir = dirWithMode(0o1777);
    const error = await refusal(() =>
      placeSinks([
        { path: path.join(dir, 'token'), field: '--token-file', gid: NOBODY },
        { path: path.join(dir, 'token.sock'), field: '--socket', gid: 0 },
      ], one),
    );
    expect(error.issues[0]?.message).toMatch(/would need group 0 for --socket and group 65534 for --token-file/);
  });

  it('a write into the subdirectory is refused once another user has put their own in its place', async () => {
    const dir = dirWithMode(0o777);
    const [placed] = await placeSinks([{ path: path.join(dir, 'token'), field: '--token-file' }], one);
    const file = placed?.path as string;
    await writeSharedFile(file, 'sl.first', { mode: 0o600 });
    // Without the sticky bit anyone may rename the subdirectory away and make another of that name.
    const own = path.dirname(file);
    renameSync(own, `${own}.moved`);
    asNobody('mkdir -m 0777 "$1"', own);
    await expect(writeSharedFile(file, 'sl.second', { mode: 0o600 })).rejects.toMatchObject({ code: 'SINK_UNSAFE' });
    expect(() => lstatSync(file)).toThrow();
  });
});
