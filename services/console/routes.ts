import { Router } from 'express';
import { z } from 'zod';
import { notFound } from '../../shared/errors.ts';
import { safeIntegerFrom } from '../../shared/bounds.ts';
import { bigJson } from '../../shared/http/big-json.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import { projectionFailures, projectionLag } from '../../projections/runner.ts';
import type { ServiceContext } from '../context.ts';
import { signingLate } from '../chain/checkpoints.ts';
import { CHAIN } from '../chain/projection.ts';
import { listGrants } from '../grants/queries.ts';
import { runnerNames } from '../read-models.ts';
import { sendStatement } from '../reconciliation/routes.ts';
import { mayRedrive, operatorStatus, UNSETTLED_STATUSES, type OperatorStatus, type TxStatus } from '../rounds/decider.ts';
import { replayBody, replayLink } from '../rounds/replay.ts';
import { stuckCounts, stuckTransactions } from '../rounds/queries.ts';
import { sessionStanding } from '../sessions/decider.ts';
import { sessionsOfPlayer } from '../sessions/queries.ts';
import { LATENCY_BUCKETS, percentileMs } from './projection.ts';

/**
 * The data of the back-office console (issue #23), under /v1/admin (bearer ADMIN_TOKEN): every answer
 * is read from the read models and the chain's tables, nothing from a metrics server.
 */

export const consoleOverviewQuery = z.strictObject({ window: z.enum(['hour', 'day'], { message: 'must be hour or day' }).default('hour') });
// Not trimmed: a playerRef may begin or end with a space (launch takes it as given); the search tries the
// text as typed and, when they differ, trimmed (a copied id with a stray space).
export const consoleSearchQuery = z.strictObject({
  q: z.string().max(300).refine((q) => q.trim() !== '', 'type a transaction id, round id, player ref or grant id'),
});
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const adminReplayLinkBody = z.strictObject({ ...replayBody.shape, operatorId: z.string().min(1).max(200) });

/** The console's statuses of what the wallet has not acknowledged, as operators see them. */
const STUCK: readonly TxStatus[] = [...UNSETTLED_STATUSES, 'dead', 'invalid'];

export function consoleRoutes(ctx: ServiceContext): Router {
  const router = Router();

  router.get('/console/overview', async (req, res) => {
    const { window } = parseOr400(consoleOverviewQuery, req.query, 'query');
    const bucketSeconds = window === 'hour' ? 60 : 900;
    const spanMs = window === 'hour' ? 3_600_000 : 86_400_000;
    const now = ctx.now().getTime();
    const end = Math.floor(now / (bucketSeconds * 1000)) * bucketSeconds * 1000 + bucketSeconds * 1000;
    const start = end - spanMs;
    // A day is 1,440 rows an operator: summed here, histograms included.
    const { rows } = await ctx.pool.query<{ operator_id: string; minute: Date; transactions: number; calls: number; failures: number; latency: number[] }>(
      'SELECT operator_id, minute, transactions, calls, failures, latency FROM rm_console_minutes WHERE minute >= $1 AND minute < $2',
      [new Date(start), new Date(end)],
    );
    const buckets: string[] = [];
    for (let t = start; t < end; t += bucketSeconds * 1000) buckets.push(new Date(t).toISOString());
    const bucketOf = (d: Date) => new Date(Math.floor(d.getTime() / (bucketSeconds * 1000)) * bucketSeconds * 1000).toISOString();
    const perBucket = new Map<string, number>();
    const operators = new Map<string, Map<string, { calls: number; failures: number; latency: number[] }>>();
    for (const r of rows) {
      const at = bucketOf(r.minute);
      perBucket.set(at, (perBucket.get(at) ?? 0) + r.transactions);
      const op = operators.get(r.operator_id) ?? new Map<string, { calls: number; failures: number; latency: number[] }>();
      const b = op.get(at) ?? { calls: 0, failures: 0, latency: new Array<number>(LATENCY_BUCKETS).fill(0) };
      b.calls += r.calls;
      b.failures += r.failures;
      r.latency.forEach((n, i) => (b.latency[i]! += n));
      op.set(at, b);
      operators.set(r.operator_id, op);
    }
    // What the stuck-money page lists, counted the same way.
    const stuck = await stuckCounts(ctx.pool, STUCK);
    const { rows: lagRows } = await ctx.pool.query<{ name: string; minute: Date; events_behind: number; ms_behind: string }>(
      'SELECT name, minute, events_behind, ms_behind FROM console_lag_minutes WHERE minute >= $1 AND minute < $2',
      [new Date(start), new Date(end)],
    );
    const lagHistory = new Map<string, Map<string, { eventsBehind: number; msBehind: number }>>();
    for (const r of lagRows) {
      const at = bucketOf(r.minute);
      const byBucket = lagHistory.get(r.name) ?? new Map<string, { eventsBehind: number; msBehind: number }>();
      const b = byBucket.get(at);
      byBucket.set(at, { eventsBehind: Math.max(b?.eventsBehind ?? 0, r.events_behind), msBehind: Math.max(b?.msBehind ?? 0, Number(r.ms_behind)) });
      lagHistory.set(r.name, byBucket);
    }
    const projections = await Promise.all(runnerNames().map((name) => projectionLag(ctx.pool, ctx.eventStore, name)));
    const { rows: chain } = await ctx.pool.query<{ linked: string | null; signed_at: Date | null; seq: string | null; key_id: string | null }>(
      `SELECT (SELECT max(seq) FROM chain_links)::text AS linked, c.signed_at, c.seq::text AS seq, c.key_id
       FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT signed_at, seq, key_id FROM chain_checkpoints WHERE chain = '' ORDER BY seq DESC LIMIT 1) c ON true`,
    );
    const c = chain[0]!;
    const linked = Number(c.linked ?? 0);
    const failing = (await projectionFailures(ctx.pool, [CHAIN]))[0];
    const last = c.signed_at !== null && c.seq !== null ? { count: Number(c.seq), signedAt: c.signed_at } : undefined;
    res.json({
      window,
      bucketSeconds,
      generatedAt: new Date(now).toISOString(),
      transactions: buckets.map((at) => ({ at, count: perBucket.get(at) ?? 0 })),
      wallet: [...operators.keys()].sort().map((operatorId) => ({
        operatorId,
        buckets: buckets.map((at) => {
          const b = operators.get(operatorId)!.get(at);
          return { at, calls: b?.calls ?? 0, failures: b?.failures ?? 0, p50Ms: b ? percentileMs(b.latency, 0.5) : null, p99Ms: b ? percentileMs(b.latency, 0.99) : null };
        }),
      })),
      unsettled: { pending: stuck.get('pending') ?? 0, failed: stuck.get('failed') ?? 0, dead: stuck.get('dead') ?? 0 },
      projections: projections.map((p) => ({ name: p.name, eventsBehind: p.eventsBehind, msBehind: p.msBehind })),
      // The most each was behind in each bucket, as the projector processes sampled it (null: no sample).
      lagHistory: projections.map((p) => ({
        name: p.name,
        buckets: buckets.map((at) => {
          const b = lagHistory.get(p.name)?.get(at);
          return { at, eventsBehind: b?.eventsBehind ?? null, msBehind: b?.msBehind ?? null };
        }),
      })),
      chain: {
        linked,
        failing: failing ? failing.error : null,
        signingLate: signingLate(linked, last, new Date(now), ctx.config.chainCheckpointSeconds),
        behind: projections.find((p) => p.name === CHAIN)?.eventsBehind ?? 0,
        lastCheckpointAt: c.signed_at?.toISOString() ?? null,
        lastCheckpointCount: c.seq === null ? null : Number(c.seq),
        keyId: c.key_id,
      },
    });
  });

  router.get('/console/search', async (req, res) => {
    const { q } = parseOr400(consoleSearchQuery, req.query, 'query');
    const texts = [...new Set([q, q.trim()])];
    const grantIds = texts.filter((t) => UUID.test(t));
    const [txs, rounds, players, grants] = await Promise.all([
      ctx.pool.query<{ operator_id: string; provider_id: string; round_id: string; game_id: string; transaction_id: string; type: string }>(
        'SELECT operator_id, provider_id, round_id, game_id, transaction_id, type FROM rm_transactions WHERE transaction_id = ANY($1) LIMIT 20',
        [texts],
      ),
      ctx.pool.query<{ operator_id: string; provider_id: string; round_id: string; game_id: string }>(
        'SELECT operator_id, provider_id, round_id, game_id FROM rm_rounds WHERE round_id = ANY($1) AND operator_status IS NOT NULL LIMIT 20',
        [texts],
      ),
      // A player with any operator where they have a round (an adjustment's included), a session or a grant.
      ctx.pool.query<{ operator_id: string; player_ref: string }>(
        // Each source's own operators (not its first rows: a player with many rounds with one operator must
        // not hide another), read from indexes that lead with player_ref.
        `SELECT DISTINCT operator_id, player_ref FROM (
           (SELECT DISTINCT operator_id, player_ref FROM rm_rounds WHERE player_ref = ANY($1))
           UNION ALL (SELECT DISTINCT operator_id, player_ref FROM session_tokens WHERE player_ref = ANY($1))
           UNION ALL (SELECT DISTINCT operator_id, player_ref FROM rm_grants WHERE player_ref = ANY($1))
         ) p ORDER BY player_ref, operator_id LIMIT 20`,
        [texts],
      ),
      grantIds.length > 0 ? ctx.pool.query<{ id: string; operator_id: string; player_ref: string }>('SELECT id, operator_id, player_ref FROM rm_grants WHERE id = ANY($1::uuid[])', [grantIds]) : { rows: [] },
    ]);
    // A transaction of an adjustment has no round of a provider: it shows as its own round.
    const results = [
      ...txs.rows.map((t) => ({ kind: 'transaction', label: `${t.type} ${t.transaction_id} (round ${t.round_id}, ${t.operator_id})`, operatorId: t.operator_id, providerId: t.provider_id, roundId: t.round_id, gameId: t.game_id, transactionId: t.transaction_id })),
      ...rounds.rows.map((r) => ({ kind: 'round', label: `round ${r.round_id} (${r.game_id}, ${r.provider_id}, ${r.operator_id})`, operatorId: r.operator_id, providerId: r.provider_id, roundId: r.round_id, gameId: r.game_id })),
      ...players.rows.map((p) => ({ kind: 'player', label: `player ${p.player_ref} (${p.operator_id})`, operatorId: p.operator_id, playerRef: p.player_ref })),
      ...grants.rows.map((g) => ({ kind: 'grant', label: `grant ${g.id} (player ${g.player_ref}, ${g.operator_id})`, operatorId: g.operator_id, grantId: g.id, playerRef: g.player_ref })),
    ];
    res.json({ results });
  });

  router.get('/console/players/:operatorId/:playerRef', async (req, res) => {
    const operatorId = String(req.params.operatorId);
    const playerRef = String(req.params.playerRef);
    const now = ctx.now();
    const [sessions, rounds, adjustments, grants] = await Promise.all([
      sessionsOfPlayer(ctx.pool, operatorId, playerRef),
      ctx.pool.query<{ provider_id: string; round_id: string; game_id: string; currency: string; status: string; opened_at: Date; closed_at: Date | null; bet: string; win: string; refund: string; total: string }>(
        `SELECT r.provider_id, r.round_id, r.game_id, r.currency, r.status, r.opened_at, r.closed_at, r.total,
                coalesce(sum(t.amount) FILTER (WHERE t.type = 'BET' AND t.operator_status = 'applied'), 0)::text AS bet,
                coalesce(sum(t.amount) FILTER (WHERE t.type = 'WIN' AND t.operator_status = 'applied'), 0)::text AS win,
                coalesce(sum(t.amount) FILTER (WHERE t.type = 'ROLLBACK' AND t.operator_status = 'applied'), 0)::text AS refund
         -- The newest 200, each with how many there are in all (the window counts before the LIMIT).
         FROM (SELECT round_stream, provider_id, round_id, game_id, currency, operator_status AS status, created_at AS opened_at, closed_at, count(*) OVER () AS total FROM rm_rounds
               WHERE player_ref = $2 AND operator_id = $1 AND operator_status IS NOT NULL ORDER BY created_at DESC LIMIT 200) r
         LEFT JOIN rm_transactions t ON t.round_stream = r.round_stream
         GROUP BY r.provider_id, r.round_id, r.game_id, r.currency, r.status, r.opened_at, r.closed_at, r.total ORDER BY r.opened_at DESC`,
        [operatorId, playerRef],
      ),
      ctx.pool.query<{ transaction_id: string; direction: 'DEBIT' | 'CREDIT'; amount: string; currency: string; operator_status: OperatorStatus; recorded_at: Date }>(
        `SELECT transaction_id, direction, amount, currency, operator_status, recorded_at FROM rm_transactions
         WHERE operator_id = $1 AND player_ref = $2 AND type = 'ADJUSTMENT' ORDER BY recorded_at DESC LIMIT 200`,
        [operatorId, playerRef],
      ),
      listGrants(ctx.pool, operatorId, playerRef),
    ]);
    if (sessions.length === 0 && rounds.rows.length === 0 && adjustments.rows.length === 0 && grants.length === 0) throw notFound('player not found');
    res.type('application/json').send(bigJson({
      sessions: sessions.map((s) => {
        const status = sessionStanding({ expiresAt: s.expires_at, revokedAt: s.revoked_at }, now);
        return {
          token: s.token,
          providerId: s.provider_id,
          gameId: s.game_id,
          currency: s.currency,
          status,
          createdAt: s.created_at.toISOString(),
          expiresAt: s.expires_at.toISOString(),
          ...(status === 'kicked' && s.revoked_at !== null ? { revokedAt: s.revoked_at.toISOString() } : {}),
        };
      }),
      rounds: rounds.rows.map((r) => ({
        providerId: r.provider_id,
        roundId: r.round_id,
        gameId: r.game_id,
        currency: r.currency,
        status: r.status,
        openedAt: r.opened_at.toISOString(),
        ...(r.closed_at ? { closedAt: r.closed_at.toISOString() } : {}),
        // Sums of amounts up to 2^53-1 each: exact as bigint, written as bare digits (bigJson).
        betMinor: BigInt(r.bet),
        winMinor: BigInt(r.win),
        refundMinor: BigInt(r.refund),
      })),
      roundsTotal: Number(rounds.rows[0]?.total ?? 0),
      adjustments: adjustments.rows.map((a) => ({
        transactionId: a.transaction_id,
        direction: a.direction,
        amount: safeIntegerFrom(a.amount, 'amount'),
        currency: a.currency,
        status: a.operator_status,
        recordedAt: a.recorded_at.toISOString(),
      })),
      grants,
    }));
  });

  router.get('/console/stuck', async (_req, res) => {
    const now = ctx.now().getTime();
    const [rows, counts] = await Promise.all([stuckTransactions(ctx.pool, STUCK, 1000), stuckCounts(ctx.pool, STUCK)]);
    res.json({
      // The list is cut at 1,000 (the oldest); the page says how many more there are.
      total: Math.max(rows.length, [...counts.values()].reduce((a, b) => a + b, 0)),
      transactions: rows.map((r) => ({
        operatorId: r.operatorId,
        providerId: r.providerId,
        roundId: r.roundId,
        gameId: r.gameId,
        transactionId: r.transactionId,
        type: r.type,
        amount: r.amount,
        currency: r.currency,
        status: operatorStatus(r.type, r.status),
        recordedAt: r.recordedAt.toISOString(),
        ageSeconds: Math.max(0, Math.floor((now - r.recordedAt.getTime()) / 1000)),
        attempts: r.attempts,
        ...(r.lastError !== null ? { lastError: r.lastError } : {}),
        redrivable: mayRedrive(r.type, r.status),
      })),
    });
  });

  router.get('/console/operators', (_req, res) => {
    const snapshot = ctx.catalog.snapshot();
    res.json({
      operators: [...snapshot.operators.values()].map((o) => ({
        id: o.id,
        name: o.name,
        walletUrl: o.walletUrl,
        walletTimeoutMs: o.walletTimeoutMs,
        rateLimit: o.rateLimit,
        visibleGames: o.visibleGames.map((id) => {
          const entry = snapshot.games.get(id);
          return { id, name: entry?.game.name ?? id, providerId: entry?.provider.id ?? '' };
        }),
      })),
    });
  });

  router.get('/operators/:operatorId/settlement', async (req, res) => {
    const operatorId = String(req.params.operatorId);
    if (!ctx.catalog.snapshot().operators.has(operatorId)) throw notFound('operator not found');
    await sendStatement(ctx, req, res, operatorId);
  });

  router.post('/rounds/replay-link', async (req, res) => {
    const body = parseOr400(adminReplayLinkBody, req.body);
    res.json({ replayUrl: await replayLink(ctx, body.operatorId, body.roundId, body.gameId) });
  });

  return router;
}
