import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimTransaction, releaseLease, type RegistryEntry } from '../../services/ledger/registry.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool, type Pool } from '../../shared/db/pool.ts';
import { registryMigrations } from '../../services/ledger/registry.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe('transaction registry: claims made at the same moment', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    db = await createTestDatabase('registry');
    pool = createPool(db.url);
    await migrate(pool, registryMigrations);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  const entry = (hash: string): RegistryEntry => ({ contentHash: hash, roundStream: 'round|p|o|r1' });
  const claim = (txId: string, hash: string) => claimTransaction(pool, 'studio-a', txId, entry(hash), randomUUID(), 10_000);

  it('gives one of twenty identical claims the registration and the lease; the others see it held', async () => {
    // Issued in one tick behind two other claims (which take the two batch slots), so all twenty share
    // one batch, before the id exists: repeats of one id inside a batch must not break it.
    const [, , ...claims] = await Promise.all([claim('tx-other-1', 'x'), claim('tx-other-2', 'y'), ...Array.from({ length: 20 }, () => claim('tx-same', 'h1'))]);
    expect(claims.filter((c) => c.inserted)).toHaveLength(1);
    expect(claims.filter((c) => c.leased)).toHaveLength(1);
    expect(claims.every((c) => c.entry.contentHash === 'h1')).toBe(true);
  });

  it('answers each id of a mixed batch on its own: new ids, a used id with other content, a lease taken again after release', async () => {
    const token = randomUUID();
    const held = await claimTransaction(pool, 'studio-a', 'tx-held', entry('h2'), token, 10_000);
    expect(held.leased).toBe(true);
    await releaseLease(pool, 'studio-a', 'tx-held', token);

    const [fresh1, fresh2, other, again, otherProvider] = await Promise.all([
      claim('tx-new-1', 'a'),
      claim('tx-new-2', 'b'),
      claim('tx-held', 'different content'),
      claim('tx-held', 'h2'),
      claimTransaction(pool, 'studio-b', 'tx-held', entry('zz'), randomUUID(), 10_000),
    ]);
    expect(fresh1).toMatchObject({ inserted: true, leased: true, entry: { contentHash: 'a' } });
    expect(fresh2).toMatchObject({ inserted: true, leased: true, entry: { contentHash: 'b' } });
    // Other content under a used id: told what the id holds, and never given the lease.
    expect(other).toMatchObject({ inserted: false, leased: false, entry: { contentHash: 'h2' } });
    // The same content after the lease was released takes it again.
    expect(again).toMatchObject({ inserted: false, leased: true, entry: { contentHash: 'h2' } });
    // transactionId is unique per provider, not across providers.
    expect(otherProvider).toMatchObject({ inserted: true, leased: true, entry: { contentHash: 'zz' } });
  });
});
