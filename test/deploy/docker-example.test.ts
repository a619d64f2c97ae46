// The `docker run` example in the Dockerfile's header, run as a process the way the image runs it: the
// entrypoint is the CLI, `-e NAME` passes the caller's variable, `-e NAME=VALUE` sets one. Only the service's
// address (a placeholder host) and the Dropbox endpoints are pointed at the emulator. The example must be
// complete: it ends with the connector holding a fresh token, not a renewal thrown away.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, runCli, tempDir } from '../helpers/cli.js';
import { connectorsNamed, emulator, obtainGrant, tokensOf } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';

/** The example's `docker run …` line from the Dockerfile's comments, continuations joined. */
function dockerRunExample(): string[] {
  const comment = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('#'))
    .map((line) => line.replace(/^#\s?/, ''))
    .join('\n')
    .replace(/\\\n\s*/g, ' ');
  const line = comment.split('\n').find((l) => l.trim().startsWith('docker run '));
  if (!line) throw new Error('the Dockerfile has no `docker run` example');
  return line.trim().split(/\s+/);
}

describe("the Dockerfile's docker run example", () => {
  it('as written (the environment it names, the arguments after the image) leaves the connector setup makes with a fresh token', async () => {
    const words = dockerRunExample();
    const image = words.findIndex((w) => /^syncauth:/.test(w));
    expect(image).toBeGreaterThan(0);
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    // What the caller's environment holds, for the variables `-e NAME` passes through.
    const caller = containerEnv(emu, grant, home);
    const env: Record<string, string> = { PATH: caller.PATH as string, HOME: home, SYNCAUTH_CONFIG_DIR: path.join(home, 'config') };
    for (let i = 0; i < image; i++) {
      if (words[i] !== '-e') continue;
      const [name = '', value] = (words[i + 1] as string).split(/=(.*)/s);
      env[name] = value ?? (caller[name] as string);
    }
    expect(Object.keys(env)).toEqual(expect.arrayContaining(['SYNCAUTH_STORE', 'SYNCAUTH_APP_KEY', 'SYNCAUTH_APP_SECRET', 'SYNCAUTH_REFRESH_TOKEN', 'SYNCAUTH_API_KEY', 'SYNCAUTH_BASE_URL']));
    // The placeholder host is the one thing the example cannot know; the Dropbox endpoints are the emulator's.
    expect(env.SYNCAUTH_BASE_URL).toBe('https://platform.example.com');
    Object.assign(env, { SYNCAUTH_BASE_URL: emu.url, SYNCAUTH_TOKEN_URL: emu.tokenUrl, SYNCAUTH_DROPBOX_API_URL: emu.apiUrl });

    const result = await runCli(words.slice(image + 1), { env, cwd: home, timeoutMs: 30_000 });
    expect(result.code, result.stderr).toBe(0);
    const token = tokensOf(emu, grant.refreshToken).at(-1);
    expect(token?.expiresAt).toBeGreaterThan(Date.now());
    expect(connectorsNamed(emu, 'dropbox-data').map((c) => c.config.token)).toEqual([token?.token]);
  }, 60_000);
});
