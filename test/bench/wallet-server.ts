// A fast operator wallet in its own process for the benchmark: verifies every signature, keeps the
// idempotency record and balances in memory. Prints its URL on stdout. With WALLET_REPLY_BYTES, every
// reply is padded to that many bytes with random text (the bench's --reply-bytes).
import { createHash, createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const secret = process.env.WALLET_SECRET ?? 'operator-secret';
const replies = new Map<string, string>();
const balances = new Map<string, number>();
const replyBytes = Number(process.env.WALLET_REPLY_BYTES ?? 0);
// Random base64, which Postgres cannot compress much; made once, so the wallet's own memory stays small.
const padding = randomBytes(Math.ceil((replyBytes * 3) / 4)).toString('base64');

/** The reply kept (status and balance), padded on the way out to replyBytes when that is set. */
function padded(plain: string): string {
  const room = replyBytes - plain.length - ',"padding":""'.length;
  return room <= 0 ? plain : `${plain.slice(0, -1)},"padding":"${padding.slice(0, room)}"}`;
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    const h = req.headers;
    const bodyHash = createHash('sha256').update(raw).digest('hex');
    const expected = createHmac('sha256', secret).update([h['x-timestamp'], h['x-nonce'], req.method, req.url, bodyHash].join('\n')).digest('hex');
    if (expected !== h['x-signature']) {
      res.writeHead(401, { 'content-type': 'text/plain' }).end('invalid signature');
      return;
    }
    const tx = JSON.parse(raw) as { transactionId: string; playerRef: string; type: string; amount: number };
    let reply = replies.get(tx.transactionId);
    if (!reply) {
      const balance = (balances.get(tx.playerRef) ?? 1_000_000_000) + (tx.type === 'BET' ? -tx.amount : tx.amount);
      balances.set(tx.playerRef, balance);
      reply = JSON.stringify({ status: 'OK', balance });
      replies.set(tx.transactionId, reply);
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(padded(reply));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
