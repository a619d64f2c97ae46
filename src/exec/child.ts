// The child of `syncauth exec`: started directly (no shell) with stdio inherited, sent the signals exec
// receives, restarted with a new environment when the token is renewed, and its end turned into exec's exit
// code the way a shell reports it.
//
// Stop signals (SIGINT, SIGTERM) are forwarded and then left to the child, as Vault's supervisor does: exec never
// kills a child it was asked to stop. If the child is still running `killTimeoutMs` later, exec says so and
// goes on waiting; a second signal is forwarded too. Only a restart for a new token, which exec decides
// itself, ends a child that ignores SIGTERM with SIGKILL after `killTimeoutMs`.
import { spawn, type ChildProcess } from 'node:child_process';
import { signalExitCode } from './signals.js';

/** Exit codes a shell gives when it cannot run a command. */
export const EXIT_NOT_FOUND = 127;
export const EXIT_NOT_EXECUTABLE = 126;

export interface SupervisorOptions {
  command: string;
  args: readonly string[];
  /** After a forwarded stop signal: when to say the child is still running. On a restart: when to SIGKILL it. */
  killTimeoutMs: number;
  /** One status line for stderr (prefixed by the caller). */
  say: (level: 'info' | 'warn' | 'error', line: string) => void;
}

/** The child could not be started; `exitCode` is what a shell would exit with. */
export class SpawnFailure extends Error {
  constructor(message: string, readonly exitCode: number) {
    super(message);
    this.name = 'SpawnFailure';
  }
}

export class ChildSupervisor {
  /** Resolves with the code exec should exit with, once the child has ended and will not be started again. */
  readonly done: Promise<number>;
  private finish!: (code: number) => void;
  private child: ChildProcess | undefined;
  /** The environment of the next start, while a restart waits for the old child to end. */
  private pendingRestart: Record<string, string> | undefined;
  private restartKillTimer: NodeJS.Timeout | undefined;
  private stillRunningTimer: NodeJS.Timeout | undefined;
  private stopRequested: NodeJS.Signals | undefined;
  private finished = false;

  constructor(private readonly options: SupervisorOptions) {
    this.done = new Promise<number>((resolve) => {
      this.finish = resolve;
    });
  }

  /** The running child's pid, if one runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** True once a stop signal was forwarded or the child ended for good: no more renewals or restarts. */
  get stopping(): boolean {
    return this.stopRequested !== undefined || this.finished;
  }

  /** Starts the child; rejects with a SpawnFailure when the command cannot be run (nothing was started). */
  async start(env: Record<string, string>): Promise<void> {
    const { command, args } = this.options;
    const child = spawn(command, [...args], { stdio: 'inherit', env });
    await new Promise<void>((resolve, reject) => {
      const failed = (error: NodeJS.ErrnoException): void => {
        child.off('spawn', started);
        reject(spawnFailure(command, error));
      };
      const started = (): void => {
        child.off('error', failed);
        resolve();
      };
      child.once('error', failed);
      child.once('spawn', started);
    });
    // After a successful start an 'error' only means a signal could not be delivered (the child is gone).
    child.on('error', (error) => this.options.say('warn', `could not signal the child: ${error.message}`));
    child.once('exit', (code, signal) => this.exited(child, code, signal));
    this.child = child;
    // A stop signal that came while the child was being started is meant for it.
    if (this.stopRequested) child.kill(this.stopRequested);
  }

  /**
   * Passes a signal exec received to the child. A stop signal also ends renewals and restarts; if the child
   * has not ended `killTimeoutMs` later, exec says so and keeps waiting (never kills it).
   */
  forward(signal: NodeJS.Signals, stop: boolean): void {
    const child = this.child;
    if (stop) {
      this.stopRequested = signal;
      // A restart under way ends with the old child: nothing is started again.
      this.pendingRestart = undefined;
    }
    if (!child) return;
    child.kill(signal);
    if (stop && !this.stillRunningTimer) {
      const seconds = this.options.killTimeoutMs / 1000;
      this.stillRunningTimer = setTimeout(() => {
        if (this.child !== child) return;
        this.options.say(
          'warn',
          `the child (pid ${child.pid}) is still running ${seconds} s after ${signal}; waiting for it to end ` +
            '(send the signal again to forward it again, or kill the child)',
        );
      }, this.options.killTimeoutMs);
      this.stillRunningTimer.unref();
    }
  }

  /** Sends the child the signal that tells it a new token is there (`--signal`); the child keeps running. */
  notify(signal: NodeJS.Signals): boolean {
    const child = this.child;
    if (!child || this.stopping || this.pendingRestart) return false;
    return child.kill(signal);
  }

  /**
   * Ends the child (SIGTERM, then SIGKILL after `killTimeoutMs`) and starts it again with `env`. A restart
   * asked for while one is under way only replaces the environment the new child gets.
   */
  restart(env: Record<string, string>): void {
    const child = this.child;
    if (!child || this.stopping) return;
    const underWay = this.pendingRestart !== undefined;
    this.pendingRestart = env;
    if (underWay) return;
    child.kill('SIGTERM');
    this.restartKillTimer = setTimeout(() => {
      if (this.child !== child) return;
      this.options.say('warn', `the child (pid ${child.pid}) did not end ${this.options.killTimeoutMs / 1000} s after SIGTERM: sending SIGKILL`);
      child.kill('SIGKILL');
    }, this.options.killTimeoutMs);
  }

  private exited(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child !== child) return;
    this.child = undefined;
    clearTimeout(this.restartKillTimer);
    clearTimeout(this.stillRunningTimer);
    this.restartKillTimer = undefined;
    this.stillRunningTimer = undefined;
    const env = this.pendingRestart;
    this.pendingRestart = undefined;
    if (env && this.stopRequested === undefined) {
      this.start(env).then(
        () => {
          if (!this.stopRequested) this.options.say('info', `child restarted with the new token (pid ${this.child?.pid})`);
        },
        (error: unknown) => {
          this.options.say('error', error instanceof Error ? error.message : String(error));
          this.end(error instanceof SpawnFailure ? error.exitCode : EXIT_NOT_EXECUTABLE);
        },
      );
      return;
    }
    this.end(code ?? (signal ? signalExitCode(signal) : 1));
  }

  private end(code: number): void {
    if (this.finished) return;
    this.finished = true;
    this.finish(code);
  }
}

/** What a shell would print and exit with for a command that cannot be run. */
function spawnFailure(command: string, error: NodeJS.ErrnoException): SpawnFailure {
  if (error.code === 'ENOENT') return new SpawnFailure(`${command}: command not found`, EXIT_NOT_FOUND);
  if (error.code === 'EACCES') return new SpawnFailure(`${command}: permission denied (not an executable file)`, EXIT_NOT_EXECUTABLE);
  return new SpawnFailure(`${command}: cannot run it (${error.code ?? error.message})`, EXIT_NOT_EXECUTABLE);
}
