// `syncauth exec` owns its child's whole tree, with real shells, real grandchildren and real signals: nothing the
// child started (and that holds the token in its environment) outlives exec, a --watch restart or a child
// that ignores SIGTERM; and an interactive child under a real terminal (tmux) keeps its terminal.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLI } from '../helpers/cli.js';
import { isCI } from '../helpers/pack.js';
import { waitFor } from '../helpers/wait.js';
import { emulator, obtainGrant, tempDir } from '../daemon/helpers.js';
import { containerEnv } from '../daemon/process.js';
import { spawnExec } from './helpers.js';

const hasTmux = spawnSync('tmux', ['-V']).status === 0;
const tmuxNote = hasTmux ? '' : '[skipped: tmux is not installed; with CI set this fails instead] ';

/**
 * No such process, or a zombie: a process that has ended and whose exit status nobody collected yet (orphans
 * are PID 1's to collect, and this container's PID 1 never does). A zombie holds no memory and no environment.
 */
function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The pids a shell wrote to `file`, one a line, once there are `count` of them. */
function pidsIn(file: string, count: number): Promise<number[]> {
  return waitFor(`${count} pid(s) in ${path.basename(file)}`, () => {
    if (!existsSync(file)) return undefined;
    const text = readFileSync(file, 'utf8');
    const pids = text.split('\n').filter((l) => /^\d+$/.test(l)).map(Number);
    return pids.length >= count && text.endsWith('\n') ? pids : undefined;
  }, 20_000);
}

function tokenIn(pid: number): string | undefined {
  const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  return environ.find((e) => e.startsWith('DROPBOX_ACCESS_TOKEN='))?.slice('DROPBOX_ACCESS_TOKEN='.length);
}

describe("syncauth exec and its child's tree", () => {
  it('SIGTERM to exec ends every descendant (a background job and a grandchild of it) before exec exits', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    // sh runs `sleep` in the background and a subshell that runs another one, and waits.
    const script = 'sleep 300 & echo $! >> "$0/pids"; (sleep 301 & echo $! >> "$0/pids"; wait) & wait';
    const { child, exited } = spawnExec(containerEnv(emu, grant, home), home, ['--', 'sh', '-c', script, home]);
    try {
      const pids = await pidsIn(path.join(home, 'pids'), 2);
      // What is at stake: each holds the token.
      for (const pid of pids) expect(tokenIn(pid)).toMatch(/\S/);
      child.kill('SIGTERM');
      expect(await exited).toBe(143);
      for (const pid of pids) expect(gone(pid), `pid ${pid}`).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('ends what the child leaves running when it exits on its own, and exits with its code', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const script = 'sleep 300 & echo $! >> "$0/pids"; sleep 1; exit 3';
    const { child, out, exited } = spawnExec(containerEnv(emu, grant, home), home, ['--', 'sh', '-c', script, home]);
    try {
      const [pid] = await pidsIn(path.join(home, 'pids'), 1);
      expect(await exited).toBe(3);
      expect(gone(pid as number)).toBe(true);
      expect(out.stderr).toContain(`syncauth exec: the child ended and left 1 process running (pid ${pid}): ending it`);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('SIGKILLs a tree that ignores SIGTERM --kill-timeout after it, and exits', async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    // An ignored signal stays ignored in what the shell starts: the background sleep ignores SIGTERM too.
    const script = 'trap "" TERM; sleep 300 & echo $! >> "$0/pids"; wait';
    const { child, out, exited } = spawnExec(containerEnv(emu, grant, home), home, ['--kill-timeout', '1', '--', 'sh', '-c', script, home]);
    try {
      const [pid] = await pidsIn(path.join(home, 'pids'), 1);
      const sent = Date.now();
      child.kill('SIGTERM');
      expect(await exited).toBe(128 + 9);
      const took = Date.now() - sent;
      expect(took).toBeGreaterThanOrEqual(900);
      expect(took).toBeLessThan(8_000);
      expect(gone(pid as number)).toBe(true);
      expect(out.stderr).toMatch(new RegExp(`^syncauth exec: the child \\(pid \\d+\\) and 1 process it started \\(pid ${pid}\\) did not end 1 s after SIGTERM: sending SIGKILL$`, 'm'));
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('--watch: the old tree is gone before the new child starts, at each restart', async () => {
    const emu = await emulator({ tokenLifetimeSeconds: 6 });
    const grant = await obtainGrant(emu);
    const home = tempDir();
    // Each start first writes down any process of an earlier start that still runs, then starts its own.
    const script = [
      'for p in $(cat "$0/pids" 2>/dev/null); do',
      '  if [ -r /proc/$p/stat ] && ! grep -q ") Z " /proc/$p/stat; then echo $p >> "$0/survivors"; fi',
      'done',
      'echo "$DROPBOX_ACCESS_TOKEN" >> "$0/tokens"; sleep 300 & echo $! >> "$0/pids"; wait',
    ].join('\n');
    const args = ['--watch', '--renew-margin', '3', '--kill-timeout', '2', '--', 'sh', '-c', script, home];
    const { child, exited } = spawnExec(containerEnv(emu, grant, home), home, args);
    try {
      const pids = await pidsIn(path.join(home, 'pids'), 3);
      // Each start with a token of its own.
      expect(new Set(readFileSync(path.join(home, 'tokens'), 'utf8').split('\n').filter(Boolean).slice(0, 3)).size).toBe(3);
      expect(existsSync(path.join(home, 'survivors'))).toBe(false);
      for (const pid of pids.slice(0, -1)) expect(gone(pid), `pid ${pid}`).toBe(true);
      child.kill('SIGTERM');
      expect(await exited).toBe(143);
      const all = readFileSync(path.join(home, 'pids'), 'utf8').split('\n').filter(Boolean).map(Number);
      for (const pid of all) expect(gone(pid), `pid ${pid}`).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  }, 40_000);

  it.skipIf(!hasTmux && !isCI())(`${tmuxNote}an interactive child keeps its terminal (tmux): /dev/tty, stdin, Ctrl-C`, async () => {
    const emu = await emulator();
    const grant = await obtainGrant(emu);
    const home = tempDir();
    const socket = `syncauth-exec-tree-${process.pid}`;
    const tmux = (...args: string[]) => spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], {
      encoding: 'utf8',
      // The server, started by the first call, hands this environment to the commands.
      env: { ...containerEnv(emu, grant, home), TERM: 'xterm-256color' },
    });
    const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-100', '-t', 'exec').stdout;
    // /dev/tty opens only for a process that has the terminal as its controlling terminal: a child put in a
    // session of its own (a process group for the tree) could not.
    const script = 'printf "first? "; read a < /dev/tty; printf "second? "; read b; echo "got $a $b" > "$0/out"; sleep 300 & echo $! >> "$0/pids"; sleep 301';
    try {
      const started = tmux('new-session', '-d', '-s', 'exec', '-x', '160', '-y', '40', '-c', home,
        `${process.execPath} ${CLI} exec -- sh -c '${script}' ${home}; echo "exit=$?"; sleep 60`);
      expect(started.status, started.stderr).toBe(0);
      await waitFor('the first prompt', () => (/first\? /.test(screen()) ? true : undefined), 15_000);
      tmux('send-keys', '-t', 'exec', '-l', 'hello');
      tmux('send-keys', '-t', 'exec', 'Enter');
      await waitFor('the second prompt', () => (/second\? /.test(screen()) ? true : undefined));
      tmux('send-keys', '-t', 'exec', '-l', 'world');
      tmux('send-keys', '-t', 'exec', 'Enter');
      const [pid] = await pidsIn(path.join(home, 'pids'), 1);
      expect(readFileSync(path.join(home, 'out'), 'utf8')).toBe('got hello world\n');
      // Ctrl-C reaches the shell too, which ends at once and orphans the background sleep: exec must have seen
      // the sleep in a snapshot before (they are 250 ms apart), as it would have for anything a person types at.
      await new Promise((resolve) => setTimeout(resolve, 600));
      tmux('send-keys', '-t', 'exec', 'C-c');
      const text = await waitFor('exec to end', () => (/exit=\d+/.test(screen()) ? screen() : undefined));
      expect(text).toContain('exit=130');
      expect(gone(pid as number)).toBe(true);
    } finally {
      tmux('kill-server');
    }
  });
});
