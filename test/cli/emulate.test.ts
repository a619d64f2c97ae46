// `syncauth emulate` as a user runs it: it prints where it listens and how to point syncauth at it, answers
// on that address with the printed key, injects the faults asked for, and stops cleanly on SIGTERM.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLI, tempDir } from '../helpers/cli.js';

function startEmulate(args: string[]) {
  const child = spawn(process.execPath, [CLI, 'emulate', '--port', '0', ...args], { cwd: tempDir(), env: { PATH: process.env.PATH ?? '' } });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
  const ready = new Promise<{ url: string; key: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address printed: ${stdout}${stderr}`)), 10_000);
    child.stdout.on('data', () => {
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)?.[1];
      const key = /SYNCAUTH_API_KEY=(\S+)/.exec(stdout)?.[1];
      if (url && key) {
        clearTimeout(timer);
        resolve({ url, key });
      }
    });
  });
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, ready, exited, output: () => ({ stdout, stderr }) };
}

describe('syncauth emulate', () => {
  it('serves the printed address with the printed key and stops on SIGTERM with exit 0', async () => {
    const emulate = startEmulate([]);
    const { url, key } = await emulate.ready;
    const ok = await fetch(`${url}/api/v1/workflows/`, { headers: { 'service-api-key': key } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as unknown[]).length).toBe(1);
    const refused = await fetch(`${url}/api/v1/workflows/`);
    expect(refused.status).toBe(401);
    expect(emulate.output().stdout).toMatch(/SYNCAUTH_TOKEN_URL=http:\/\/127\.0\.0\.1:\d+\/oauth2\/token/);
    emulate.child.kill('SIGTERM');
    expect(await emulate.exited).toBe(0);
    expect(emulate.output().stderr).toContain('emulator stopped');
  });

  it('injects the faults given with --fault', async () => {
    const emulate = startEmulate(['--fault', 'sources:503', '--fault', 'token:429:1:7']);
    const { url, key } = await emulate.ready;
    try {
      const sources = await fetch(`${url}/api/v1/sources/`, { headers: { 'service-api-key': key } });
      expect(sources.status).toBe(503);
      const workflows = await fetch(`${url}/api/v1/workflows/`, { headers: { 'service-api-key': key } });
      expect(workflows.status).toBe(200);
      const token = await fetch(`${url}/oauth2/token`, { method: 'POST' });
      expect(token.status).toBe(429);
      expect(token.headers.get('retry-after')).toBe('7');
    } finally {
      emulate.child.kill('SIGTERM');
      await emulate.exited;
    }
  });
});
