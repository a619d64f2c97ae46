// `syncauth emulate --api-key-header X` listens for the key under X and prints the export that points syncauth
// at that header, next to the other exports; with the default header there is nothing to say.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLI, tempDir } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

async function emulate(args: string[]): Promise<string> {
  const child = spawn(process.execPath, [CLI, 'emulate', '--port', '0', ...args], { cwd: tempDir(), env: { PATH: process.env.PATH ?? '' } });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  try {
    await waitFor('the exports', () => (/Seeded workflow/.test(stdout) ? true : undefined));
    const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1] as string;
    const key = /SYNCAUTH_API_KEY=(\S+)/.exec(stdout)?.[1] as string;
    const header = /SYNCAUTH_API_KEY_HEADER=(\S+)/.exec(stdout)?.[1] ?? 'service-api-key';
    const answer = await fetch(`${url}/api/v1/workflows/`, { headers: { [header]: key } });
    expect(answer.status).toBe(200);
    return stdout;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

describe('emulate --api-key-header', () => {
  it('prints the matching SYNCAUTH_API_KEY_HEADER export among the others, and the printed header works', async () => {
    const out = await emulate(['--api-key-header', 'unstructured-api-key']);
    const exports = out.split('\n').filter((l) => l.trim().startsWith('export '));
    expect(exports).toContain('  export SYNCAUTH_API_KEY_HEADER=unstructured-api-key');
    expect(exports.some((l) => l.includes('SYNCAUTH_BASE_URL='))).toBe(true);
  });

  it('prints no header export for the default header', async () => {
    expect(await emulate([])).not.toContain('SYNCAUTH_API_KEY_HEADER');
  });
});
