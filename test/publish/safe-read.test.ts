// Reading a file others may have put in place: special files refused on the descriptor without blocking,
// a size bound, a deadline that frees the caller when the thread pool is stuck, and symbolic links followed
// only when root or this user chose where they lead (a real second user, uid 65534, plays the other side).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileRefusedError, readRegularFile } from '../../src/publish/safe-read.js';
import { ROOT, tempDir } from '../helpers/cli.js';

const NOBODY = ['--reuid', '65534', '--regid', '65534', '--clear-groups'];

/** Runs a command as uid 65534, failing the test if it fails. */
function asNobody(...argv: string[]): void {
  const run = spawnSync('setpriv', [...NOBODY, ...argv], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`as nobody: ${argv.join(' ')}: ${run.stderr}`);
}

async function refusal(promise: Promise<unknown>): Promise<FileRefusedError> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(FileRefusedError);
  return error as FileRefusedError;
}

/** A directory other users may traverse (mkdtemp makes 0700 ones). */
function sharedDir(): string {
  const dir = tempDir('syncauth-safe-read-');
  chmodSync(dir, 0o755);
  return dir;
}

/** A file only root may read, in a directory only root may enter. */
function rootSecret(): string {
  const dir = tempDir('syncauth-root-only-');
  const secret = path.join(dir, 'secret');
  writeFileSync(secret, 'ROOT-ONLY-SECRET\n', { mode: 0o600 });
  return secret;
}

describe('readRegularFile', () => {
  it('reads a regular file, and refuses one larger than the bound instead of truncating it', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'a.tpl');
    writeFileSync(file, 'TOKEN={{ access_token }}\n');
    await expect(readRegularFile(file)).resolves.toBe('TOKEN={{ access_token }}\n');
    writeFileSync(file, 'x'.repeat(2_000));
    const big = await refusal(readRegularFile(file, { maxBytes: 1_000 }));
    expect(big.refusal).toBe('too_large');
    expect(big.message).toBe(`${file}: is 2000 bytes, more than the 1000 allowed`);
    // Errors of the file system stay what they are.
    await expect(readRegularFile(path.join(dir, 'gone'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('refuses a FIFO at once, with no writer, where a plain read would wait for ever', async () => {
    const fifo = path.join(tempDir(), 'fifo');
    execFileSync('mkfifo', [fifo]);
    const started = Date.now();
    const error = await refusal(readRegularFile(fifo));
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(error.refusal).toBe('not_regular');
    expect(error.message).toBe(`${fifo}: is a FIFO (named pipe), not a regular file`);
  });

  it('refuses /dev/zero, a directory, and a root-owned link to /dev/zero', async () => {
    expect((await refusal(readRegularFile('/dev/zero'))).why).toBe('is a character device, not a regular file');
    const dir = tempDir();
    expect((await refusal(readRegularFile(dir))).why).toBe('is a directory, not a regular file');
    const link = path.join(dir, 'zero.tpl');
    symlinkSync('/dev/zero', link);
    expect((await refusal(readRegularFile(link))).refusal).toBe('not_regular');
  });

  it('follows a link another user put in place of the file only to what that user could have given anyway', async () => {
    const dir = sharedDir();
    const theirs = path.join(dir, 'theirs');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, 65534, 65534);
    const source = path.join(theirs, 'app.tpl');
    asNobody('sh', '-c', `printf 'T={{ access_token }}\\n' > '${source}'`);
    // Their own file is theirs to give, under its own name or through a root-owned link to its directory
    // (as /var/run leads to /run).
    await expect(readRegularFile(source)).resolves.toBe('T={{ access_token }}\n');
    symlinkSync('theirs', path.join(dir, 'alias'));
    await expect(readRegularFile(path.join(dir, 'alias', 'app.tpl'))).resolves.toBe('T={{ access_token }}\n');

    // Swapped for a link to a file only root can read: refused, the secret not read.
    const secret = rootSecret();
    asNobody('ln', '-sfn', secret, source);
    const swapped = await refusal(readRegularFile(source));
    expect(swapped.refusal).toBe('untrusted_link');
    expect(swapped.message).toContain(`goes through the symbolic link ${source}, owned by uid 65534`);
    expect(swapped.message).not.toContain('ROOT-ONLY');

    // Or a directory on the way swapped for a link: refused the same.
    asNobody('ln', '-sfn', path.dirname(secret), path.join(theirs, 'conf'));
    expect((await refusal(readRegularFile(path.join(theirs, 'conf', 'secret')))).refusal).toBe('untrusted_link');
  });

  it('follows a root-owned link (a Kubernetes ConfigMap) to a file root owns that no one else can write, and no other', async () => {
    const dir = sharedDir();
    const data = path.join(dir, '..2026_11_26');
    mkdirSync(data, { mode: 0o755 });
    writeFileSync(path.join(data, 'app.tpl'), 'T={{ access_token }}\n', { mode: 0o644 });
    symlinkSync('..2026_11_26', path.join(dir, '..data'));
    symlinkSync('..data/app.tpl', path.join(dir, 'app.tpl'));
    await expect(readRegularFile(path.join(dir, 'app.tpl'))).resolves.toBe('T={{ access_token }}\n');

    // The file writable by others: whoever can write it decides what root publishes.
    chmodSync(path.join(data, 'app.tpl'), 0o666);
    expect((await refusal(readRegularFile(path.join(dir, 'app.tpl')))).why).toContain('which others may write');
    chmodSync(path.join(data, 'app.tpl'), 0o644);

    // Owned by another user, or in a directory another user owns: refused.
    chownSync(path.join(data, 'app.tpl'), 65534, 65534);
    expect((await refusal(readRegularFile(path.join(dir, 'app.tpl')))).why).toContain('which is owned by uid 65534');
    chownSync(path.join(data, 'app.tpl'), 0, 0);
    chownSync(data, 65534, 65534);
    expect((await refusal(readRegularFile(path.join(dir, 'app.tpl')))).why).toContain('which is in a directory owned by uid 65534');
    chownSync(data, 0, 0);
    chmodSync(data, 0o777);
    expect((await refusal(readRegularFile(path.join(dir, 'app.tpl')))).why).toContain('which is in a directory others may write');
  });

  it('gives up at its deadline when the thread pool is stuck, and does not queue another read behind a stuck one', async () => {
    // A process whose only pool thread is held by a blocking open of a FIFO (what a hung mount does): the read
    // cannot even start. It must return at its deadline; a second read of the same file must not take another
    // thread; once the pool is free the file is read again.
    const dir = tempDir();
    const fifo = path.join(dir, 'fifo');
    const file = path.join(dir, 'a.tpl');
    execFileSync('mkfifo', [fifo]);
    writeFileSync(file, 'hello');
    const script = `
      const fs = require('node:fs');
      const [module, fifo, file] = process.argv.slice(1);
      import(module).then(async ({ readRegularFile }) => {
        const blocker = fs.promises.open(fifo, 'r');
        const attempt = async () => {
          const started = performance.now();
          const outcome = await readRegularFile(file, { deadlineMs: 300 }).then((text) => text, (e) => e.refusal);
          return { outcome, ms: Math.round(performance.now() - started) };
        };
        const first = await attempt();
        const second = await attempt();
        // A writer from the main thread lets the blocked open finish.
        fs.closeSync(fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK));
        await (await blocker).close();
        await new Promise((resolve) => setTimeout(resolve, 200));
        const third = await attempt();
        process.stdout.write(JSON.stringify({ first, second, third }));
      });
    `;
    const child = spawn(process.execPath, ['-e', script, path.join(ROOT, 'dist/publish/safe-read.js'), fifo, file], {
      env: { ...process.env, UV_THREADPOOL_SIZE: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await new Promise((resolve) => child.once('close', resolve));
    clearTimeout(timer);
    const result = JSON.parse(out) as Record<'first' | 'second' | 'third', { outcome: string; ms: number }>;
    expect(result.first.outcome).toBe('timeout');
    expect(result.first.ms).toBeLessThan(3_000);
    expect(result.second.outcome).toBe('stuck');
    expect(result.second.ms).toBeLessThan(100);
    expect(result.third.outcome).toBe('hello');
  });
});

describe('readRegularFile against a swap raced with the read', () => {
  it('never reads the root-only file while another user keeps swapping a directory on the way for a link to it', async () => {
    const dir = sharedDir();
    const theirs = path.join(dir, 'theirs');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, 65534, 65534);
    const secret = rootSecret();
    asNobody('sh', '-c', `mkdir '${theirs}/conf' && printf 'THEIRS\\n' > '${theirs}/conf/secret' && ln -s '${path.dirname(secret)}' '${theirs}/link'`);
    // conf is a directory of theirs, then a link to root's directory, then a directory again, as fast as it goes.
    const swapper = spawn('setpriv', [...NOBODY, process.execPath, '-e', `
      const fs = require('node:fs');
      process.chdir(${JSON.stringify(theirs)});
      for (;;) {
        fs.renameSync('conf', 'dir'); fs.renameSync('link', 'conf');
        fs.renameSync('conf', 'link'); fs.renameSync('dir', 'conf');
      }
    `], { stdio: 'ignore' });
    try {
      const outcomes = new Map<string, number>();
      const until = Date.now() + 2_500;
      while (Date.now() < until) {
        const outcome = await readRegularFile(path.join(theirs, 'conf', 'secret')).then(
          (text) => (text === 'THEIRS\n' ? 'theirs' : text.includes('ROOT-ONLY') ? 'LEAKED' : 'other'),
          (e: unknown) => (e instanceof FileRefusedError ? e.refusal : String((e as NodeJS.ErrnoException).code)),
        );
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }
      expect(outcomes.get('LEAKED') ?? 0, JSON.stringify([...outcomes])).toBe(0);
      expect(outcomes.get('other') ?? 0).toBe(0);
      // The race was run: some reads went through, and some met the link.
      expect(outcomes.get('theirs') ?? 0, JSON.stringify([...outcomes])).toBeGreaterThan(0);
      expect((outcomes.get('untrusted_link') ?? 0) + (outcomes.get('changed') ?? 0), JSON.stringify([...outcomes])).toBeGreaterThan(0);
    } finally {
      swapper.kill('SIGKILL');
    }
  });
});
