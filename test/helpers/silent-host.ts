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
  close(): Promise<void>;
}

export async function startSilentHost(): Promise<SilentHost> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const net = require('node:net'); const fs = require('node:fs');
       const s = net.createServer();
       s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
         fs.writeSync(1, s.address().port + '\\n');
         Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
       });`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  // Fill the accept queue until a connect hangs: from then on, every connect to the port waits.
  const fillers: net.Socket[] = [];
  for (;;) {
    const socket = net.connect(port, '127.0.0.1');
    fillers.push(socket);
    const connected = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 300);
      socket.once('connect', () => (clearTimeout(timer), resolve(true)));
      socket.once('error', () => (clearTimeout(timer), resolve(true)));
    });
    if (!connected) break;
    if (fillers.length > 64) throw new Error('the silent host kept accepting connections');
  }
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const s of fillers) s.destroy();
      child.kill('SIGKILL');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(undefined) : child.once('exit', r)));
    },
  };
}
