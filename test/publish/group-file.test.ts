// The group file the daemon reads at start to resolve --token-file-group and --socket-group names: read as
// every file on the daemon's path is, so a FIFO or a device in its place is refused at once, not waited on.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/errors.js';
import { resolveGroup } from '../../src/publish/file.js';
import { tempDir } from '../helpers/cli.js';

describe('resolveGroup and its group file', () => {
  it('reads names from the file given', async () => {
    const file = path.join(tempDir(), 'group');
    writeFileSync(file, 'root:x:0:\nconsumers:x:4321:app\n');
    expect(await resolveGroup('consumers', '--token-file-group', file)).toBe(4321);
  });

  it('refuses a FIFO or /dev/zero in its place at once, naming the field', async () => {
    const fifo = path.join(tempDir(), 'group');
    execFileSync('mkfifo', [fifo]);
    const started = Date.now();
    for (const [file, kind] of [[fifo, 'a FIFO (named pipe)'], ['/dev/zero', 'a character device']] as const) {
      const error = await resolveGroup('consumers', '--socket-group', file).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).message).toBe(
        `--socket-group: cannot read ${file} to look up "consumers": it is ${kind}, not a regular file; give the group by number`,
      );
    }
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
