import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

const BASE = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
// Redis has 16 databases; 15 is `npm run sandbox`'s, which flushes it at start, so tests never use it.
const DATABASES = 15;

export interface TestRedis {
  /** redis:// URL selecting a database number this test file owns alone. */
  url: string;
  db: number;
  release(): Promise<void>;
}

/**
 * Claims a Redis database number (1..14) for one test file with SET NX on a claim key in db 0, and
 * empties it. Test files running in parallel therefore never share keys, BullMQ queues included.
 */
export async function claimTestRedis(): Promise<TestRedis> {
  const admin = new Redis(BASE, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await admin.connect();
  const owner = randomBytes(8).toString('hex');
  try {
    for (let attempt = 0; attempt < 200; attempt++) {
      for (let db = 1; db < DATABASES; db++) {
        if ((await admin.set(`test:redis-db-claim:${db}`, owner, 'EX', 900, 'NX')) === 'OK') {
          const url = new URL(BASE);
          url.pathname = `/${db}`;
          const c = new Redis(url.toString(), { maxRetriesPerRequest: 1 });
          await c.flushdb();
          c.disconnect();
          return {
            url: url.toString(),
            db,
            async release() {
              const r = new Redis(BASE, { maxRetriesPerRequest: 1 });
              const claim = `test:redis-db-claim:${db}`;
              if ((await r.get(claim)) === owner) await r.del(claim);
              r.disconnect();
            },
          };
        }
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error('no free Redis test database');
  } finally {
    admin.disconnect();
  }
}
