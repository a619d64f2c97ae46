// `syncauth exec --watch` for real, with 6-second tokens and a 3-second margin: the child is restarted with
// each new token, or kept and signalled after the template was rendered with the new token.
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_EMULATOR_API_KEY } from '../../src/emulator/index.js';
import { waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant, tempDir, tokensOf } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';
import { childCommand, signalsIn, spawnExec, startsIn } from './helpers.js';

const WATCH = ['--watch', '--renew-margin', '3', '--kill-timeout', '2'];

describe('syncauth exec --watch', () => {
  it('restarts the child with a new token each time the token enters the margin', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 6 });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const { child, out, exited } = spawnExec(containerEnv(emu, grant, home), home, [...WATCH, ...childCommand(home, 'wait')]);
    try {
      const starts = await waitFor('two restarts', () => (startsIn(home).length >= 3 ? startsIn(home) : undefined), 20_000);
      const issued = tokensOf(emu, grant.refreshToken);
      // Each start its own process and its own token, every token one the emulator issued for this grant.
      expect(new Set(starts.map((s) => s.pid)).size).toBe(starts.length);
      expect(new Set(starts.map((s) => s.token)).size).toBe(starts.length);
      for (const start of starts) {
        const token = issued.find((t) => t.token === start.token);
        expect(token).toBeDefined();
        expect(Date.parse(start.expiresAt as string)).toBeLessThanOrEqual(token?.expiresAt as number);
      }
      // Each child before the last was asked to stop with SIGTERM and was not killed outright.
      expect(signalsIn(home).filter((s) => s.signal === 'SIGTERM').map((s) => s.pid)).toEqual(
        expect.arrayContaining(starts.slice(0, -1).map((s) => s.pid)),
      );
      child.kill('SIGTERM');
      expect(await exited).toBe(42);
      expect(out.stderr).toMatch(/^syncauth exec: token renewed \(expires .*\): restarting the child$/m);
      for (const secret of [grant.appKey, grant.appSecret, grant.refreshToken, DEFAULT_EMULATOR_API_KEY, ...issued.map((t) => t.token)]) {
        expect(out.stdout + out.stderr).not.toContain(secret);
      }
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('with --signal keeps the child and signals it once the template holds the new token', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 6 });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const source = path.join(home, 'token.env.tpl');
    const dest = path.join(home, 'token.env');
    writeFileSync(source, 'TOKEN={{ access_token }}\nPROFILE={{profile}}\n');
    const env = { ...containerEnv(emu, grant, home), CHILD_READ_FILE: dest };
    const { child, exited } = spawnExec(env, home, [...WATCH, '--signal', 'hup', '--template', `${source}:${dest}:0640`, ...childCommand(home, 'wait')]);
    try {
      const [start] = await waitFor('the child', () => (startsIn(home).length > 0 ? startsIn(home) : undefined));
      // Rendered before the child started, with the token it got.
      expect(readFileSync(dest, 'utf8')).toContain(`TOKEN=${start?.token}\n`);
      expect(statSync(dest).mode & 0o777).toBe(0o640);
      const hups = await waitFor('two SIGHUPs', () => {
        const seen = signalsIn(home).filter((s) => s.signal === 'SIGHUP');
        return seen.length >= 2 ? seen : undefined;
      }, 20_000);
      expect(startsIn(home)).toHaveLength(1);
      const issued = tokensOf(emu, grant.refreshToken).map((t) => t.token);
      const seenTokens = hups.map((h) => /^TOKEN=(.*)$/m.exec(h.file ?? '')?.[1]);
      for (const [i, hup] of hups.entries()) {
        expect(hup.pid).toBe(start?.pid);
        expect(hup.file).toContain('PROFILE=container\n');
        expect(issued).toContain(seenTokens[i]);
      }
      // Each signal came once the file held a token newer than the child's. The child reads the file when its
      // handler runs, which on a busy machine can be after the next renewal rendered it again: what it reads is
      // then never older than the signal's token, and a later signal never finds an older one.
      const order = seenTokens.map((token) => issued.indexOf(token as string));
      const started = issued.indexOf(start?.token as string);
      expect(started).toBeGreaterThanOrEqual(0);
      for (const [i, at] of order.entries()) expect(at).toBeGreaterThan(i === 0 ? started : (order[i - 1] as number) - 1);
      // One signal per new token, never two: at most as many signals as tokens issued since the child's.
      expect(hups.length).toBeLessThanOrEqual(issued.length - 1 - started);
      child.kill('SIGTERM');
      expect(await exited).toBe(42);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
