// A real terminal for a command line: a private tmux server (its own socket, no config) running a shell line
// in a window of 200×50, whose screen a test reads and where it types. The environment goes to the server, so
// secrets never travel in argv.
import { spawnSync } from 'node:child_process';
import { waitFor } from './wait.js';

export const hasTmux = spawnSync('tmux', ['-V']).status === 0;

export interface Terminal {
  /** What the window shows now, with its scrollback (wrapped lines joined). */
  screen(): string;
  /** Waits until `pattern` is on the screen. */
  see(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Types text as it is (no key names). */
  type(text: string): void;
  /** Presses a key by tmux's name: Enter, Down, C-c. */
  press(key: string): void;
  /** Waits for the line to end (it prints `exit=N` then) and gives the screen and N. */
  exit(timeoutMs?: number): Promise<{ code: number; screen: string }>;
  close(): void;
}

/** Runs `line` with `sh` in a new tmux server whose environment is `env`, in `cwd`. */
export function openTerminal(line: string, options: { env: Record<string, string>; cwd: string }): Terminal {
  const socket = `syncauth-term-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const tmux = (...args: string[]) => spawnSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], { encoding: 'utf8', env: options.env });
  const started = tmux('new-session', '-d', '-s', 't', '-x', '200', '-y', '50', '-c', options.cwd, `${line}; echo "exit=$?"; sleep 120`);
  if (started.status !== 0) throw new Error(`tmux did not start: ${started.stderr}`);
  const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-500', '-t', 't').stdout;
  return {
    screen,
    see: (pattern, timeoutMs = 20_000) =>
      waitFor(`${String(pattern)} on the screen`, () => (pattern.test(screen()) ? true : undefined), timeoutMs).then(() => undefined),
    type: (text) => {
      tmux('send-keys', '-t', 't', '-l', text);
    },
    press: (key) => {
      tmux('send-keys', '-t', 't', key);
    },
    exit: async (timeoutMs = 30_000) => {
      const final = await waitFor(`${line} to end`, () => {
        const text = screen();
        return /^exit=\d+$/m.test(text) ? text : undefined;
      }, timeoutMs);
      return { code: Number(/^exit=(\d+)$/m.exec(final)?.[1]), screen: final };
    },
    close: () => {
      tmux('kill-server');
    },
  };
}
