// Where a program of the machine's is, for tests that use Debian's tools (promtool, systemd-analyze) for real.
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

/** The first executable `name` on PATH (then /usr/bin, /bin), or null. */
export function findExecutable(name: string): string | null {
  for (const dir of [...(process.env.PATH ?? '').split(path.delimiter), '/usr/bin', '/bin']) {
    if (!dir) continue;
    try {
      accessSync(path.join(dir, name), constants.X_OK);
      return path.join(dir, name);
    } catch {
      // not here
    }
  }
  return null;
}
