// The child of `syncauth exec`: started directly (no shell) with stdio inherited, in exec's own session and
// process group (so that an interactive command keeps its terminal), sent the signals exec receives, restarted
// with a new environment when the token is renewed, and its end turned into exec's exit code the way a shell
// reports it.
//
// exec owns the child's whole tree (src/exec/tree.ts): when the child is ended (a stop signal exec received, a
// restart for a new token) or ends on its own, every descendant it leaves is ended too before exec exits or
// starts the child again, so that no process holding the token outlives exec. A stop signal goes to the child,
// and SIGTERM to each descendant; a restart sends SIGTERM to all of them, and so does the end of the child to
// what it left. Whatever still runs
// `killTimeoutMs` after that first signal is sent SIGKILL. With `killTimeoutMs` 0 nothing is ever killed: exec
// says that the tree still runs and waits for it.
import { spawn, type ChildProcess } from 'node:child_process';
import { signalExitCode } from './signals.js';
import { ProcessTree } from './tree.js';

/** Exit codes a shell gives when it cannot run a command. */
export const EXIT_NOT_FOUND = 127;
export const EXIT_NOT_EXECUTABLE = 126;

/** While the child runs: how often its tree is looked at, so that processes it orphans are still known. */
const SNAPSHOT_MS = 250;
/** While the tree is being ended: how often exec looks whether it is gone (and for processes started meanwhile). */
const ENDING_POLL_MS = 50;
/** With --kill-timeout 0 (never kill): when exec says that the tree still runs. */
const NEVER_KILL_NOTICE_MS = 3_000;
/** After SIGKILL: how long exec waits for the tree to go before it gives up on what is left (a process stuck in the kernel). */
const AFTER_KILL_MS = 5_000;

export interface SupervisorOptions {
  command: string;
  args: readonly string[];
  /** After the first signal that ends the tree: when to SIGKILL what still runs. 0: never. */
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

/** Ending one child's tree: from the first signal until the child and every descendant are gone. */
interface Ending {
  /** The signal that began it (what a "still running" line names). */
  signal: NodeJS.Signals;
  poll: NodeJS.Timeout;
  deadline: NodeJS.Timeout | undefined;
  killed: boolean;
  giveUp: NodeJS.Timeout | undefined;
  /** Members SIGKILL could not be sent to (said once). */
  refused: Set<number>;
}

interface Running {
  process: ChildProcess;
  tree: ProcessTree;
  snapshots: NodeJS.Timeout;
  /** Set once the child itself has ended. */
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  ending?: Ending;
}

export class ChildSupervisor {
  /** Resolves with the code exec should exit with, once the child and its tree have ended and nothing will be started again. */
  readonly done: Promise<number>;
  private finish!: (code: number) => void;
  private running: Running | undefined;
  /** The environment of the next start, while a restart waits for the old tree to end. */
  private pendingRestart: Record<string, string> | undefined;
  private stopRequested: NodeJS.Signals | undefined;
  private finished = false;

  constructor(private readonly options: SupervisorOptions) {
    this.done = new Promise<number>((resolve) => {
      this.finish = resolve;
    });
  }

  /** The running child's pid, if one runs. */
  get pid(): number | undefined {
    const running = this.running;
    return running && !running.exit ? running.process.pid : undefined;
  }

  /** True once a stop signal was forwarded or the child ended for good: no more renewals or restarts. */
  get stopping(): boolean {
    // A child that ended on its own is not started again (its exit during a restart is the restart's own).
    return this.stopRequested !== undefined || this.finished || (this.running?.exit !== undefined && this.pendingRestart === undefined);
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
    const tree = new ProcessTree(child.pid as number);
    const snapshots = setInterval(() => tree.snapshot(), SNAPSHOT_MS);
    snapshots.unref();
    const running: Running = { process: child, tree, snapshots };
    child.once('exit', (code, signal) => this.exited(running, code, signal));
    this.running = running;
    // A stop signal that came while the child was being started is meant for it.
    if (this.stopRequested) this.endTree(running, this.stopRequested);
  }

  /**
   * Passes a signal exec received to the child. A stop signal also sends every descendant SIGTERM, ends renewals
   * and restarts, and begins ending the tree (SIGKILL after `killTimeoutMs`); a second one is passed on again.
   */
  forward(signal: NodeJS.Signals, stop: boolean): void {
    const running = this.running;
    if (stop) {
      this.stopRequested = signal;
      // A restart under way ends with the old child: nothing is started again.
      this.pendingRestart = undefined;
    }
    if (!running) return;
    if (stop) this.endTree(running, signal);
    else if (!running.exit) running.process.kill(signal);
  }

  /** Sends the child the signal that tells it a new token is there (`--signal`); the child keeps running. */
  notify(signal: NodeJS.Signals): boolean {
    const running = this.running;
    if (!running || this.stopping || this.pendingRestart) return false;
    return running.process.kill(signal);
  }

  /**
   * Ends the child and its tree (SIGTERM, then SIGKILL after `killTimeoutMs`) and starts it again with `env`
   * once all of it is gone. A restart asked for while one is under way only replaces the environment the new
   * child gets.
   */
  restart(env: Record<string, string>): void {
    const running = this.running;
    if (!running || this.stopping) return;
    const underWay = this.pendingRestart !== undefined;
    this.pendingRestart = env;
    if (underWay) return;
    this.endTree(running, 'SIGTERM');
  }

  /**
   * Sends the child `signal` and every descendant SIGTERM (not `signal`: a shell's background jobs ignore
   * SIGINT); the first call also sets the deadline for SIGKILL.
   */
  private endTree(running: Running, signal: NodeJS.Signals): void {
    // The descendants are looked up while the child still links to them, but the child is signalled first: a
    // shell waiting on its jobs would otherwise see them end, return from `wait` and exit 0 before its own
    // signal arrived, and exec would report a clean exit for a stop.
    const members = running.tree.snapshot();
    if (!running.exit) running.process.kill(signal);
    running.tree.signal('SIGTERM', members);
    if (running.ending) return;
    const { killTimeoutMs } = this.options;
    const ending: Ending = {
      signal,
      poll: setInterval(() => this.check(running), ENDING_POLL_MS),
      deadline: undefined,
      killed: false,
      giveUp: undefined,
      refused: new Set(),
    };
    running.ending = ending;
    if (killTimeoutMs > 0) {
      ending.deadline = setTimeout(() => this.kill(running), killTimeoutMs);
    } else {
      ending.deadline = setTimeout(() => {
        if (this.running !== running) return;
        const { who, is } = this.describe(running);
        this.options.say(
          'warn',
          `${who} ${is} still running ${NEVER_KILL_NOTICE_MS / 1000} s after ${signal}; waiting for it to end, never killing it ` +
            '(--kill-timeout 0; send the signal again to forward it again)',
        );
      }, NEVER_KILL_NOTICE_MS);
    }
    this.check(running);
  }

  private kill(running: Running): void {
    const ending = running.ending;
    if (this.running !== running || !ending) return;
    this.options.say('warn', `${this.describe(running).who} did not end ${this.options.killTimeoutMs / 1000} s after ${ending.signal}: sending SIGKILL`);
    ending.killed = true;
    this.killAll(running);
    ending.giveUp = setTimeout(() => {
      if (this.running !== running) return;
      const left = running.tree.remembered().map((m) => m.pid);
      this.options.say('error', `could not end process${left.length === 1 ? '' : 'es'} ${left.join(', ')} of the child's tree even with SIGKILL; leaving ${left.length === 1 ? 'it' : 'them'}`);
      this.complete(running);
    }, AFTER_KILL_MS);
  }

  private killAll(running: Running): void {
    const ending = running.ending as Ending;
    const refused = running.tree.signal('SIGKILL').refused.filter((pid) => !ending.refused.has(pid));
    if (!running.exit) running.process.kill('SIGKILL');
    for (const pid of refused) ending.refused.add(pid);
    if (refused.length > 0) this.options.say('error', `not allowed to signal process${refused.length === 1 ? '' : 'es'} ${refused.join(', ')} of the child's tree (another user's)`);
  }

  /** "the child (pid 12)", "the child (pid 12) and 2 processes it started (pids 13, 14)", or the latter alone; and its verb. */
  private describe(running: Running): { who: string; is: string } {
    const left = running.tree.remembered().map((m) => m.pid);
    const rest = `${left.length} process${left.length === 1 ? '' : 'es'} it started (pid${left.length === 1 ? '' : 's'} ${left.join(', ')})`;
    if (running.exit) return left.length === 0 ? { who: "the child's tree", is: 'is' } : { who: rest, is: left.length === 1 ? 'is' : 'are' };
    const child = `the child (pid ${running.process.pid})`;
    return left.length === 0 ? { who: child, is: 'is' } : { who: `${child} and ${rest}`, is: 'are' };
  }

  /** While ending: whether the child and its whole tree are gone; a process started after SIGKILL gets it too. */
  private check(running: Running): void {
    if (this.running !== running || !running.ending) return;
    const left = running.tree.snapshot();
    if (running.ending.killed && left.length > 0) this.killAll(running);
    if (running.exit && left.length === 0) this.complete(running);
  }

  private exited(running: Running, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.running !== running) return;
    running.exit = { code, signal };
    if (running.ending) {
      this.check(running);
      return;
    }
    // The child ended on its own: what it left running goes too, before exec exits.
    const left = running.tree.snapshot();
    if (left.length === 0) {
      this.complete(running);
      return;
    }
    this.options.say('info', `the child ended and left ${left.length} process${left.length === 1 ? '' : 'es'} running (pid${left.length === 1 ? '' : 's'} ${left.map((m) => m.pid).join(', ')}): ending ${left.length === 1 ? 'it' : 'them'}`);
    this.endTree(running, 'SIGTERM');
  }

  /** The child and its tree are gone: start the next child, or finish. */
  private complete(running: Running): void {
    if (this.running !== running) return;
    this.running = undefined;
    clearInterval(running.snapshots);
    if (running.ending) {
      clearInterval(running.ending.poll);
      clearTimeout(running.ending.deadline);
      clearTimeout(running.ending.giveUp);
    }
    const { code, signal } = running.exit ?? { code: null, signal: null };
    const env = this.pendingRestart;
    this.pendingRestart = undefined;
    if (env && this.stopRequested === undefined) {
      this.start(env).then(
        () => {
          if (!this.stopRequested) this.options.say('info', `child restarted with the new token (pid ${this.running?.process.pid})`);
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
