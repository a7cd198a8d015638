import { spawn } from 'node:child_process';
import net from 'node:net';

/**
 * A host that drops connection attempts silently, as a firewall or a dead host behind one does: the
 * connect neither succeeds nor fails, it waits. A child process listens with a backlog of one and blocks
 * its event loop, so it never accepts; once two connections fill its accept queue, the kernel drops every
 * further SYN. (Real: the kernel's own listen queue on 127.0.0.1, not a stand-in.)
 */
export interface SilentHost {
  url: string;
  /** Connections the host accepted once it came back (`comesBackAfterMs`), the ones that filled its queue among them. */
  accepted(): number;
  /** How many connections fill its queue. */
  fillers: number;
  close(): Promise<void>;
}

/** `comesBackAfterMs`: the host blocks that long, then accepts and counts connections (default: two minutes, should its test die first). */
export async function startSilentHost(comesBackAfterMs = 120_000): Promise<SilentHost> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const net = require('node:net'); const fs = require('node:fs');
       let accepted = 0;
       const s = net.createServer((c) => { accepted += 1; fs.writeSync(1, 'accepted ' + accepted + '\\n'); c.on('error', () => {}); });
       s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
         fs.writeSync(1, 'port ' + s.address().port + '\\n');
         Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${comesBackAfterMs});
       });`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let accepted = 0;
  let buffered = '';
  let onPort: (port: number) => void = () => {};
  child.stdout.on('data', (d: Buffer) => {
    buffered += d.toString();
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const [word, value] = buffered.slice(0, nl).split(' ');
      buffered = buffered.slice(nl + 1);
      if (word === 'port') onPort(Number(value));
      else if (word === 'accepted') accepted = Number(value);
    }
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    onPort = resolve;
  });
  // Fill the accept queue until a connect hangs: from then on, every connect to the port waits.
  const fillers: net.Socket[] = [];
  for (;;) {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    fillers.push(socket);
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 1000);
      socket.once('connect', () => (clearTimeout(timer), resolve(true)));
      socket.once('error', () => (clearTimeout(timer), resolve(true)));
    });
    if (!connected) {
      // This one waits; dropped, it leaves no connect of its own to complete when the host comes back.
      fillers.pop()?.destroy();
      break;
    }
    if (fillers.length > 64) throw new Error('the silent host kept accepting connections');
  }
  return {
    url: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    fillers: fillers.length,
    async close() {
      for (const s of fillers) s.destroy();
      child.kill('SIGKILL');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)));
    },
  };
}
