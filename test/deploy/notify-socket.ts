// A stand-in for systemd's end of the notify protocol: a Unix datagram socket that records every message.
// Node has no Unix datagram sockets, so a short Perl program (perl-base is Essential in Debian, on every
// machine) receives them and prints each as one hex line. It calls recv() without room for ancillary data, so
// the kernel closes the file descriptor that `systemd-notify`'s barrier (BARRIER=1) passes, which is what PID 1
// does once it has processed the messages before it: the barrier completes. (socat keeps such descriptors
// open, so a barrier sent to it times out after 5 s and systemd-notify fails.)
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { waitFor } from '../helpers/wait.js';

const RECEIVER = String.raw`
use strict; use warnings; use IO::Socket::UNIX; use Socket qw(SOCK_DGRAM);
$| = 1;
my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0]) or die "cannot bind $ARGV[0]: $!\n";
print "listening\n";
while (1) { my $buf = ''; defined $s->recv($buf, 65536) or die "recv: $!\n"; print unpack('H*', $buf), "\n"; }
`;

export interface NotifyMessage {
  /** Date.now() when the test process read it. */
  at: number;
  /** The message's assignments, e.g. ['READY=1', 'STATUS=…']. */
  fields: string[];
}

export interface NotifyReceiver {
  /** What NOTIFY_SOCKET should say. */
  path: string;
  messages: NotifyMessage[];
  /** Called for each message as it is read, before anything else can run. */
  onMessage(listener: (message: NotifyMessage) => void): void;
  /** The first message holding `field`, waiting for it. */
  waitFor(field: string, timeoutMs?: number): Promise<NotifyMessage>;
  close(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export async function startNotifyReceiver(dir: string): Promise<NotifyReceiver> {
  const socketPath = path.join(dir, 'notify.sock');
  const child = spawn('perl', ['-e', RECEIVER, socketPath], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } });
  live.add(child);
  const messages: NotifyMessage[] = [];
  const listeners: ((message: NotifyMessage) => void)[] = [];
  let listening = false;
  let stderr = '';
  let exited: string | undefined;
  let pending = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (line === 'listening') {
        listening = true;
        continue;
      }
      const text = Buffer.from(line, 'hex').toString('utf8');
      const message = { at: Date.now(), fields: text.split('\n').filter((f) => f !== '') };
      messages.push(message);
      for (const listener of listeners) listener(message);
    }
  });
  child.once('error', (error) => (exited = `perl could not be started: ${error.message}`));
  child.once('exit', (code, signal) => {
    live.delete(child);
    exited = `the notify receiver exited (${signal ?? code}): ${stderr}`;
  });
  await waitFor('the notify receiver', () => {
    if (listening) return true;
    if (exited) throw new Error(exited);
    return undefined;
  });
  return {
    path: socketPath,
    messages,
    onMessage: (listener) => void listeners.push(listener),
    waitFor: (field, timeoutMs = 10_000) =>
      waitFor(`${field} on the notify socket`, () => messages.find((m) => m.fields.includes(field)), timeoutMs),
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await gone;
    },
  };
}
