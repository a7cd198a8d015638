import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { grantIdFor, grantStream } from '../../services/grants/events.ts';
import { OP1 } from '../helpers/catalog.ts';
import { ADMIN_TOKEN, startInProcess } from '../helpers/service.ts';
import { signedRequest, toTestResponse } from '../helpers/signing.ts';
import { parseExposition, samplesOf, total } from '../metrics/exposition.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';

interface Ready {
  status?: string;
  error?: string;
  down?: string[];
  failingProjections?: Array<{ name: string; position: string; eventType: string; streamId: string; error: string; since: string }>;
}

/**
 * #18 part 8: a read model that cannot apply an event says so (/readyz degraded, naming the projection and the
 * event, a gauge and a counter on /metrics) instead of retrying in silence, and the other read models keep
 * going. The failure is real: a CHECK constraint added to rm_grants in this test's database refuses the
 * row of one grant, as Postgres refused the out-of-range spins of the issue.
 */
describe('a projection that cannot apply an event (#18 part 8)', () => {
  let h: MoneyHarness;
  let apiOnly: RunningService & { url: string };
  beforeAll(async () => {
    h = await startMoneyHarness('poison', { ROLES: 'api,projector,worker' });
    // A process without the projector role answers /readyz from the same database.
    apiOnly = await startInProcess(h.env, { ROLES: 'api' });
  });
  afterAll(async () => {
    await apiOnly?.stop();
    await h?.close();
  });

  const ready = async (url: string) => toTestResponse<Ready>(await fetch(`${url}/readyz`));
  const metrics = async () => parseExposition(await (await fetch(`${h.svc.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text());
  const list = () => signedRequest<Array<{ id: string }>>(h.svc.url, { path: '/v1/operator/free-spins/grants', as: OP1 });

  it('reports the failing projection and its event on /readyz and /metrics, keeps the others going, and recovers once the cause is gone', async () => {
    expect((await ready(h.svc.url)).json).toEqual({ status: 'ready' });
    await h.svc.ctx.pool.query(`ALTER TABLE rm_grants ADD CONSTRAINT test_poison CHECK (player_ref <> 'poison-player')`);

    const key = randomUUID();
    const grantId = grantIdFor(OP1.id, key);
    const poisoned = await signedRequest<{ id: string }>(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: 'poison-player', idempotencyKey: key, gameId: 'fruit-1', spins: 5, currency: 'EUR' },
      as: OP1,
    });
    expect(poisoned.status).toBe(201); // recorded in the event store: only the read model refuses it
    const [requested] = await h.svc.ctx.eventStore.readStream(grantStream(grantId));

    // /readyz: still 200 (the money path reads no read model), degraded, naming the projection, the event
    // (position, type, stream) and the error, from any process.
    await h.until(async () => (await ready(h.svc.url)).json.status === 'degraded');
    for (const url of [h.svc.url, apiOnly.url]) {
      const res = await ready(url);
      expect(res.status).toBe(200);
      expect(res.json.status).toBe('degraded');
      expect(res.json.failingProjections).toEqual([
        { name: 'grants', position: requested!.position, eventType: 'GrantRequested', streamId: grantStream(grantId), error: expect.stringContaining('test_poison'), since: expect.any(String) },
      ]);
    }
    const m = await metrics();
    expect(total(m, 'projection_failing', { projection: 'grants' })).toBe(1);
    expect(samplesOf(m, 'projection_failing', { projection: 'rounds' }).map((s) => s.value)).toEqual([0]);
    expect(samplesOf(m, 'projection_failing', { projection: 'sessions' }).map((s) => s.value)).toEqual([0]);
    expect(total(m, 'projection_apply_failures_total', { projection: 'grants' })).toBeGreaterThanOrEqual(1);

    // The other read models keep going: a new session and a transaction reach rm_sessions and rm_transactions.
    const token = await h.launch('poison-other');
    const bet = h.bet(token, { playerRef: 'poison-other' });
    expect((await h.tx(bet)).status).toBe(200);
    await h.until(async () => {
      const s = await h.svc.ctx.pool.query('SELECT 1 FROM rm_sessions WHERE token = $1', [token]);
      const t = await h.svc.ctx.pool.query(`SELECT 1 FROM rm_transactions WHERE transaction_id = $1 AND status = 'applied'`, [bet.transactionId]);
      return s.rowCount === 1 && t.rowCount === 1;
    });
    expect((await list()).json.map((g) => g.id)).not.toContain(grantId);
    expect((await ready(h.svc.url)).json.status).toBe('degraded'); // still failing, still said

    // The cause removed: the grants read model catches up and /readyz is ready again.
    await h.svc.ctx.pool.query('ALTER TABLE rm_grants DROP CONSTRAINT test_poison');
    await h.until(async () => (await ready(h.svc.url)).json.status === 'ready', 20_000);
    expect((await ready(apiOnly.url)).json).toEqual({ status: 'ready' });
    expect((await list()).json.map((g) => g.id)).toContain(grantId);
    await h.until(async () => total(await metrics(), 'projection_failing', { projection: 'grants' }) === 0, 5000);
  });
});
