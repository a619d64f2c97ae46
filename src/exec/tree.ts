// The processes of `syncauth exec`'s child: the child and every descendant, found by walking /proc rather than
// by a process group. A process group would need the child in a new session (Node's `detached`), which takes
// the controlling terminal away from it: `/dev/tty` and job control would stop working for an interactive
// command. Walking parent links keeps the child in exec's own session and still finds what it started, jobs
// that a shell put in groups of their own and grandchildren that called setsid included.
//
// A process whose parent dies is handed to PID 1 (or to a subreaper) and no longer links to the child. So the
// tree is remembered: a snapshot is taken periodically while the child runs and again before each signal, and a
// process once seen stays a member, with its start time, until it is gone. Before a member is signalled its
// start time is read again, so that a recycled pid is never signalled. What escapes: a process that was
// started and orphaned between two snapshots (a command that daemonizes, or that starts something in the
// background and exits, faster than the snapshot period). Without /proc (not Linux) the tree is the child alone.
import { readdirSync, readFileSync } from 'node:fs';

export interface ProcStat {
  ppid: number;
  /** Field 22, clock ticks since boot: with the pid, it names one process for good. */
  start: string;
  /** Field 3: R, S, D, Z (zombie: already ended, only its exit status is left), … */
  state: string;
}

/** /proc/PID/stat read and parsed, or undefined when there is no such process. */
export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const ppid = Number(fields[1]);
  const start = fields[19];
  if (!state || !Number.isInteger(ppid) || !start) return undefined;
  return { ppid, start, state };
}

function isEnded(stat: ProcStat | undefined): boolean {
  return stat === undefined || stat.state === 'Z' || stat.state === 'X';
}

/** Whether /proc/PID/task/TID/children exists here (CONFIG_PROC_CHILDREN): the cheap way to find children. */
let childrenFiles: boolean | undefined;

/** Every live process's children, from the parent links of a whole /proc scan. */
function childrenByScan(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return children;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const stat = procStat(pid);
    if (!stat) continue;
    const list = children.get(stat.ppid);
    if (list) list.push(pid);
    else children.set(stat.ppid, [pid]);
  }
  return children;
}

function childrenFromFiles(pid: number): number[] {
  const found: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return found;
  }
  for (const task of tasks) {
    try {
      for (const word of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ')) if (word) found.push(Number(word));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return found;
}

function hasChildrenFiles(): boolean {
  if (childrenFiles === undefined) {
    try {
      readFileSync(`/proc/${process.pid}/task/${process.pid}/children`);
      childrenFiles = true;
    } catch {
      childrenFiles = false;
    }
  }
  return childrenFiles;
}

export interface Member {
  pid: number;
  start: string;
}

export class ProcessTree {
  /** Every process seen in the tree and not known to be gone: pid → start time. The root is not among them. */
  private readonly members = new Map<number, string>();
  private readonly rootStart: string | undefined;

  constructor(private readonly root: number) {
    this.rootStart = procStat(root)?.start;
  }

  /**
   * Adds every process now descending from the root or from a remembered member, and forgets the members
   * that ended (or whose pid now names another process). Returns the live members, the root left out.
   */
  snapshot(): Member[] {
    const start = new Map<number, string>();
    const alive = (pid: number, expected: string | undefined): boolean => {
      const stat = procStat(pid);
      if (isEnded(stat) || (expected !== undefined && stat?.start !== expected)) return false;
      start.set(pid, stat?.start as string);
      return true;
    };
    const seeds: number[] = [];
    if (this.rootStart !== undefined && alive(this.root, this.rootStart)) seeds.push(this.root);
    for (const [pid, known] of this.members) {
      if (alive(pid, known)) seeds.push(pid);
      else this.members.delete(pid);
    }
    const scan = hasChildrenFiles() ? undefined : childrenByScan();
    const queue = [...seeds];
    const visited = new Set<number>(queue);
    while (queue.length > 0) {
      const pid = queue.shift() as number;
      for (const child of scan ? (scan.get(pid) ?? []) : childrenFromFiles(pid)) {
        if (visited.has(child)) continue;
        visited.add(child);
        if (!alive(child, undefined)) continue;
        // A child must have started after its parent: a pid that was recycled meanwhile is not ours.
        if (BigInt(start.get(child) as string) < BigInt(start.get(pid) as string)) continue;
        this.members.set(child, start.get(child) as string);
        queue.push(child);
      }
    }
    return [...this.members].map(([pid, s]) => ({ pid, start: s }));
  }

  /** The live members, the root left out (no new ones are looked for). */
  remembered(): Member[] {
    for (const [pid, known] of this.members) {
      const stat = procStat(pid);
      if (isEnded(stat) || stat?.start !== known) this.members.delete(pid);
    }
    return [...this.members].map(([pid, start]) => ({ pid, start }));
  }

  /**
   * Sends `signal` to every member after a fresh snapshot, each one's start time read again just before.
   * Returns the pids signalled and those that could not be (another user's process: EPERM).
   */
  signal(signal: NodeJS.Signals, members: readonly Member[] = this.snapshot()): { sent: number[]; refused: number[] } {
    const sent: number[] = [];
    const refused: number[] = [];
    for (const member of members) {
      const stat = procStat(member.pid);
      if (isEnded(stat) || stat?.start !== member.start) continue;
      try {
        process.kill(member.pid, signal);
        sent.push(member.pid);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EPERM') refused.push(member.pid);
      }
    }
    return { sent, refused };
  }
}
