// The direct pool on Node's own http: undici's limits with undici's codes (so a failure is classified the
// same whichever pool carried the call), bodies and statuses as sent, and a service command that goes
// direct never loading undici at all.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DirectPool } from '../../src/net/direct.js';
import { DEFAULT_EMULATOR_API_KEY, startEmulator } from '../../src/emulator/index.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { hang, misbehavingServer, trickle } from '../helpers/servers.js';
import { emulator, obtainGrant } from '../daemon/helpers.js';
import { containerEnv, spawnDaemon } from '../daemon/process.js';

const LIMITS = { connectMs: 5_000, headersMs: 5_000, bodyMs: 5_000 };

describe('DirectPool', () => {
  it('answers with the status, headers and body as sent, and keeps one connection for calls in turn', async () => {
    const s = await misbehavingServer((res) => {
      res.writeHead(201, { 'content-type': 'application/json', 'x-seen': 'yes' });
      res.end('{"ok":"é"}');
    });
    const pool = new DirectPool(s.url, LIMITS);
    try {
      for (let i = 0; i < 3; i += 1) {
        const answer = await pool.request({ method: 'POST', path: '/x?y=1', headers: { 'content-type': 'application/json' }, body: '{}' });
        expect(answer).toMatchObject({ statusCode: 201, text: '{"ok":"é"}' });
        expect(answer.headers['x-seen']).toBe('yes');
      }
      expect(s.requests()).toBe(3);
    } finally {
      await pool.close();
    }
    await expect(pool.request({ method: 'GET', path: '/', headers: {} })).rejects.toThrow(/closed/);
  });

  it('a server that never answers trips the headers limit with undici\'s code', async () => {
    const s = await misbehavingServer(hang);
    const pool = new DirectPool(s.url, { ...LIMITS, headersMs: 100 });
    try {
      await expect(pool.request({ method: 'GET', path: '/', headers: {} })).rejects.toMatchObject({ code: 'UND_ERR_HEADERS_TIMEOUT' });
    } finally {
      await pool.close();
    }
  });

  it('a body that stops arriving trips the body limit; one that trickles faster does not trip it', async () => {
    const stalled = await misbehavingServer(trickle(60_000));
    const pool = new DirectPool(stalled.url, { ...LIMITS, bodyMs: 150 });
    try {
      await expect(pool.request({ method: 'GET', path: '/', headers: {} })).rejects.toMatchObject({ code: 'UND_ERR_BODY_TIMEOUT' });
    } finally {
      await pool.close();
    }
    const trickling = await misbehavingServer(trickle(20));
    const patient = new DirectPool(trickling.url, { ...LIMITS, bodyMs: 500 });
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('enough')), 800);
    try {
      // Only the caller's signal ends it: the silence never reaches the limit.
      await expect(patient.request({ method: 'GET', path: '/', headers: {}, signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' });
    } finally {
      clearTimeout(timer);
      await patient.close();
    }
  });

  it('a closed port is a refused connection', async () => {
    const pool = new DirectPool('http://127.0.0.1:1', LIMITS);
    try {
      await expect(pool.request({ method: 'GET', path: '/', headers: {} })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      await pool.close();
    }
  });
});

/** A preload that, at exit, writes how many files of each package the process loaded. */
function loadProbe(dir: string, packages: readonly string[]): string {
  const probe = path.join(dir, 'probe.cjs');
  writeFileSync(probe, `process.on('exit', () => {
    for (const name of ${JSON.stringify(packages)}) {
      const loaded = Object.keys(require.cache).filter((f) => f.includes('/node_modules/' + name + '/'));
      process.stderr.write(name + ' files: ' + loaded.length + '\\n');
    }
  });\n`);
  return probe;
}

describe('with no proxy', () => {
  it('an idle daemon that renewed its token loads neither undici nor express', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const env = { ...containerEnv(emu, grant, home, { tokenFile: path.join(home, 'token') }), NODE_OPTIONS: `--require ${loadProbe(home, ['undici', 'express'])}` };
    const { child, out, exited, started, ready } = spawnDaemon(env, home);
    try {
      await ready((await started()).listen);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out.stderr).toContain('undici files: 0\n');
      expect(out.stderr).toContain('express files: 0\n');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('source list loads no undici', async () => {
    const emu = await startEmulator({});
    try {
      const dir = tempDir();
      const probe = loadProbe(dir, ['undici']);
      const result = await runCli(['source', 'list'], {
        cwd: dir,
        env: { SYNCAUTH_BASE_URL: emu.url, SYNCAUTH_API_KEY: DEFAULT_EMULATOR_API_KEY, SYNCAUTH_STORE: 'env', NODE_OPTIONS: `--require ${probe}` },
      });
      expect(result.code).toBe(0);
      expect(result.stderr).toContain('no source connectors');
      expect(result.stderr).toContain('undici files: 0\n');
    } finally {
      await emu.close();
    }
  });
});
