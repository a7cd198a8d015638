import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMigrations } from '../../services/migrations.ts';
import type { RunningService } from '../../services/service.ts';
import { legacyMigrations } from '../db/legacy-migrations.ts';
import { contentHash } from '../../shared/canonical.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { roundStream, type TransactionRequest } from '../../services/rounds/events.ts';
import { PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { OP1, PROV_A, PROV_B, testCatalog } from '../helpers/catalog.ts';
import { startFakeWallet, type FakeWallet } from '../helpers/fakes.ts';
import { createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

const NEW = new Set(['ledger-005-wallet-key', 'ledger-006-claim-and-record']);

/**
 * A database written before transactionIds were unique per operator player: provider A's BET and provider
 * B's WIN under one id for one player, both recorded and applied. After the upgrade both stay answerable
 * from what was recorded, and the id is refused to anyone else for that player.
 */
describe('wallet-key migration of an existing registry', () => {
  let env: TestEnv;
  let wallet: FakeWallet;
  let svc: RunningService & { url: string };
  const player = 'legacy-p';
  const id = `legacy-${randomUUID()}`;
  const tokens = { [PROV_A.id]: `tok-a-${randomUUID()}`, [PROV_B.id]: `tok-b-${randomUUID()}` };
  const requests: Record<string, TransactionRequest> = {
    [PROV_A.id]: { transactionId: id, sessionToken: tokens[PROV_A.id]!, type: 'BET', roundId: 'ra', roundComplete: false, playerRef: player, amount: 100, currency: 'EUR', gameId: 'fruit-1' },
    [PROV_B.id]: { transactionId: id, sessionToken: tokens[PROV_B.id]!, type: 'WIN', roundId: 'rb', roundComplete: true, playerRef: player, amount: 5000, currency: 'GBP', gameId: 'dice-9' },
  };

  beforeAll(async () => {
    env = await createTestEnv('walletkeymig', { empty: true });
    wallet = await startFakeWallet(OP1.secret);
    const pool = createPool(env.db.url);
    // The release before the rule; the rest of its chain (the backfill) runs when it is upgraded below.
    await migrate(pool, legacyMigrations.filter((m) => !NEW.has(m.id)));
    const store = new PostgresEventStore(pool, env.db.url);
    for (const [providerId, request] of Object.entries(requests)) {
      const stream = roundStream(providerId, OP1.id, request.roundId);
      const hash = contentHash(request);
      const reply = { status: 'OK' as const, balance: providerId === PROV_A.id ? 9_900 : 14_900 };
      await store.append(
        stream,
        [
          { id: randomUUID(), type: 'TransactionRecorded', data: { providerId, operatorId: OP1.id, origin: 'provider', request: { ...request }, walletBody: JSON.stringify(request), contentHash: hash, recordedAt: new Date().toISOString() } },
          { id: randomUUID(), type: 'TransactionSettled', data: { transactionId: id, outcome: 'applied', reply: { ...reply, body: JSON.stringify(reply) }, attempt: 1, settledAt: new Date().toISOString() } },
        ],
        'no_stream',
      );
      await pool.query('INSERT INTO tx_registry (provider_id, transaction_id, content_hash, round_stream) VALUES ($1, $2, $3, $4)', [providerId, id, hash, stream]);
      await pool.query(
        `INSERT INTO session_tokens (token, operator_id, player_ref, provider_id, game_id, currency, language, demo, start_revision, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, NULL, false, 0, now(), now() + interval '1 hour')`,
        [request.sessionToken, OP1.id, player, providerId, request.gameId, request.currency],
      );
    }
    // Upgraded as a database must be: through the last release before the baselines, then to this one.
    await migrate(pool, legacyMigrations);
    await migrate(pool, allMigrations);
    await store.close();
    await pool.end();
    svc = await startInProcess(env);
    await svc.ctx.catalog.apply(testCatalog({ walletUrl: wallet.url }));
  });
  afterAll(async () => {
    await svc?.stop();
    await wallet?.close();
    await env?.cleanup();
  });

  it('answers both transactions recorded before the rule from what was recorded, without calling the wallet', async () => {
    for (const [providerId, request] of Object.entries(requests)) {
      const res = await signedRequest<{ status: string; balance: number }>(svc.url, { path: '/v1/wallet/transaction', body: request, as: providerId === PROV_A.id ? PROV_A : PROV_B });
      expect(res.status).toBe(200);
      expect(res.json.balance).toBe(providerId === PROV_A.id ? 9_900 : 14_900);
    }
    expect(wallet.calls).toHaveLength(0);
  });

  it('gives the wallet key to the first registration and refuses the id to anyone else for that player', async () => {
    const { rows } = await svc.ctx.pool.query<{ provider_id: string; player_ref: string | null }>('SELECT provider_id, player_ref FROM tx_registry WHERE transaction_id = $1 ORDER BY provider_id', [id]);
    expect(rows.filter((r) => r.player_ref === player)).toHaveLength(1);
    const adjustment = await fetch(`${svc.url}/v1/admin/adjustments`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-admin-token', 'content-type': 'application/json' },
      body: JSON.stringify({ operatorId: OP1.id, playerRef: player, amount: 1, currency: 'EUR', direction: 'CREDIT', reason: 'x', transactionId: id }),
    });
    expect(adjustment.status).toBe(409);
  });
});
