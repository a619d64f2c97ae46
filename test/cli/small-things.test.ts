// What people notice in the first minute: colour in a terminal that honours NO_COLOR, a broken `.env` line
// reported by number without losing the next variable, and a misspelt SYNCAUTH_ variable getting a "did you
// mean". Each runs the built CLI; the terminal ones under a real pseudo-terminal (util-linux `script`).
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { colourEnabled } from '../../src/cli/output.js';
import { CLI, runCli, tempDir } from '../helpers/cli.js';

const ESC = '\x1b[';
const SECRET = 'sk-never-printed-b71e0c';

/** Runs the CLI with stdout and stderr on a pseudo-terminal; `output` is what the terminal showed. */
function inTerminal(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const cwd = tempDir();
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  const command = [process.execPath, CLI, ...args].map(quote).join(' ');
  return new Promise((resolve, reject) => {
    const child = spawn('script', ['-qefc', command, '/dev/null'], {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd, TERM: 'xterm-256color', SYNCAUTH_CONFIG_DIR: path.join(cwd, 'config'), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { output += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { output += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe.concurrent('colour', () => {
  // `status --profile nosuch` fails at once, with an error and a hint: enough to see the styling.
  const failing = ['status', '--profile', 'nosuch'];

  it('on a terminal, the error and hint labels are coloured', async () => {
    const { code, output } = await inTerminal(failing);
    expect(code).toBe(4);
    expect(output).toContain(`${ESC}31m`);
    expect(output).toMatch(/error:.*profile "nosuch" has not been set up/);
  });

  it('NO_COLOR=1 turns it off on a terminal', async () => {
    const { code, output } = await inTerminal(failing, { NO_COLOR: '1' });
    expect(code).toBe(4);
    expect(output).toContain('error: profile "nosuch" has not been set up');
    expect(output).not.toContain(ESC);
  });

  it('an empty NO_COLOR does not (no-color.org), TERM=dumb does', async () => {
    expect((await inTerminal(failing, { NO_COLOR: '' })).output).toContain(ESC);
    expect((await inTerminal(failing, { TERM: 'dumb' })).output).not.toContain(ESC);
  });

  it('off a terminal there is none, unless FORCE_COLOR asks; NO_COLOR wins over FORCE_COLOR', async () => {
    const piped = await runCli(failing);
    expect(piped.stderr).toMatch(/^error: profile "nosuch" has not been set up\nhint: /);
    expect((await runCli(failing, { env: { FORCE_COLOR: '1' } })).stderr).toContain(ESC);
    expect((await runCli(failing, { env: { FORCE_COLOR: '1', NO_COLOR: '1' } })).stderr).not.toContain(ESC);
    expect((await runCli(failing, { env: { FORCE_COLOR: '0' } })).stderr).not.toContain(ESC);
  });

  it('one decision, for any stream', () => {
    const tty = { isTTY: true } as unknown as NodeJS.WritableStream;
    const pipe = {} as NodeJS.WritableStream;
    expect(colourEnabled(tty, {}, [])).toBe(true);
    expect(colourEnabled(pipe, {}, [])).toBe(false);
    expect(colourEnabled(tty, { NO_COLOR: 'yes' }, [])).toBe(false);
    expect(colourEnabled(tty, { NO_COLOR: '' }, [])).toBe(true);
    expect(colourEnabled(tty, { TERM: 'dumb' }, [])).toBe(false);
    expect(colourEnabled(tty, { NODE_DISABLE_COLORS: '1' }, [])).toBe(false);
    expect(colourEnabled(tty, {}, ['node', 'syncauth', 'status', '--no-color'])).toBe(false);
    expect(colourEnabled(tty, {}, ['node', 'syncauth', 'exec', '--', 'cmd', '--no-color'])).toBe(true);
    expect(colourEnabled(pipe, { FORCE_COLOR: '1' }, [])).toBe(true);
    expect(colourEnabled(pipe, { FORCE_COLOR: 'false' }, [])).toBe(false);
    expect(colourEnabled(tty, { FORCE_COLOR: '0' }, [])).toBe(false);
  });
});

describe.concurrent('a malformed .env line', () => {
  it('is reported on stderr by file and line, without its value, and the next variable still counts', async () => {
    const cwd = tempDir();
    writeFileSync(path.join(cwd, '.env'), `# settings\n${SECRET}\nSYNCAUTH_REMOTE_URL=dropbox://data\nSYNCAUTH_ACCESS="${SECRET}\nSYNCAUTH_RECURSIVE=true\n`);
    const result = await runCli(['status'], { cwd });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`warning: ${path.join(cwd, '.env')} line 2: expected NAME=value; the line is ignored\n`);
    expect(result.stderr).toContain(`warning: ${path.join(cwd, '.env')} line 4: the value's opening " is never closed; the line is ignored\n`);
    expect(result.stderr).toContain('note: .env set SYNCAUTH_REMOTE_URL, SYNCAUTH_RECURSIVE\n');
    expect(result.stdout + result.stderr).not.toContain(SECRET);
  });
});

describe.concurrent('an unknown SYNCAUTH_ variable', () => {
  it('in the environment: a warning with "did you mean", once, never the value', async () => {
    const result = await runCli(['status'], { env: { SYNCAUTH_BASEURL: SECRET, SYNCAUTH_STROE: 'file' } });
    expect(result.code).toBe(0);
    expect(result.stderr).toContain('warning: SYNCAUTH_BASEURL is not a syncauth setting and is ignored; did you mean SYNCAUTH_BASE_URL?\n');
    expect(result.stderr).toContain('warning: SYNCAUTH_STROE is not a syncauth setting and is ignored; did you mean SYNCAUTH_STORE?\n');
    expect(result.stderr.split('SYNCAUTH_BASEURL').length - 1).toBe(1);
    expect(result.stdout + result.stderr).not.toContain(SECRET);
  });

  it('in .env: the warning says so; one set in both places is named once', async () => {
    const cwd = tempDir();
    writeFileSync(path.join(cwd, '.env'), `SYNCAUTH_REMOTEURL=dropbox://${SECRET}\nSYNCAUTH_APIKEY=${SECRET}\n`);
    const result = await runCli(['status'], { cwd, env: { SYNCAUTH_APIKEY: SECRET } });
    expect(result.stderr).toContain('warning: SYNCAUTH_REMOTEURL (in .env) is not a syncauth setting and is ignored; did you mean SYNCAUTH_REMOTE_URL?\n');
    expect(result.stderr.split('SYNCAUTH_APIKEY').length - 1).toBe(1);
    expect(result.stderr).toContain('did you mean SYNCAUTH_API_KEY?');
    expect(result.stdout + result.stderr).not.toContain(SECRET);
  });

  it('known names, and names of other programs, pass silently', async () => {
    const result = await runCli(['status'], { env: { SYNCAUTH_RENEW_MARGIN: '600', SYNCAUTH_ENDPOINT_OVERRIDE: '1', SYNCAUTH_DEBUG: '', DROPBOX_TOKEN: 'x' } });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});
