import type { Pool } from '../../shared/db/pool.ts';
import { isFinal, outstandingBets, roundDecider } from './decider.ts';
import { RECONCILER_SESSION, STALE_ROLLBACK_PREFIX, type TransactionRequest } from './events.ts';
import { AppError } from '../../shared/errors.ts';
import { handleCommand } from '../../shared/eventstore/command.ts';
import { signedCall, walletTarget } from '../../shared/http/outbound.ts';
import type { Logger } from '../../shared/logger.ts';
import { readRound } from './dispatch.ts';
import { submitTransaction, type LedgerDeps } from './submit.ts';

export interface ReconcilerDeps extends LedgerDeps {
  pool: Pool;
  staleAfterSeconds: number;
  intervalSeconds: number;
}

export interface SweepResult {
  roundsClosed: number;
  rollbacks: number;
}

const SWEEP_LOCK = 7281004;

/** The operators a process is sweeping now, with their sweeps: a tick starts only the others. */
export type SweepsInFlight = Map<string, Promise<SweepResult>>;

/**
 * One sweep: rounds with outstanding bets and no transaction for staleAfterSeconds are force-closed.
 * Candidates come from the rounds read model; each is confirmed against its own stream before anything
 * is sent. Each outstanding bet gets a best-effort balance call, then a ROLLBACK with the deterministic
 * id `stale-rollback:<bet id>`, submitted like any credit (recorded, dispatched, retried until the wallet
 * accepts it).
 *
 * Operators are swept apart (contract section 8, rule 8): each operator's rounds one after the other,
 * under a lock of that operator's alone, so one operator's hung wallet (a balance check and a rollback per
 * round, each up to its timeout) holds back only its own rounds. A tick starts the operators not being
 * swept already, so another operator's round that goes stale meanwhile is refunded on the next tick. The
 * advisory lock keeps an operator's sweep single across reconciler processes; the deterministic id makes
 * a repeat harmless anyway (it is answered from what was recorded).
 */
export async function sweepStaleRounds(deps: ReconcilerDeps, inFlight: SweepsInFlight = new Map()): Promise<SweepResult> {
  // Stale open rounds, and rounds this reconciler closed whose rollbacks are not all recorded yet (a
  // process that died between closing and rolling back). Up to 500 per operator, oldest first.
  const { rows } = await deps.pool.query<{ round_stream: string; operator_id: string }>(
    `SELECT round_stream, operator_id FROM (
       SELECT round_stream, operator_id, last_activity_at,
              row_number() OVER (PARTITION BY operator_id ORDER BY last_activity_at) AS n
       FROM rm_rounds
       WHERE outstanding_bets > 0
         AND ((status = 'open' AND last_activity_at < now() - $1 * interval '1 second') OR force_closed)
     ) stale
     WHERE n <= 500 ORDER BY last_activity_at`,
    [deps.staleAfterSeconds],
  );
  const byOperator = new Map<string, string[]>();
  for (const r of rows) {
    const streams = byOperator.get(r.operator_id);
    if (streams) streams.push(r.round_stream);
    else byOperator.set(r.operator_id, [r.round_stream]);
  }
  const started: Array<Promise<SweepResult>> = [];
  for (const [operatorId, streams] of byOperator) {
    if (inFlight.has(operatorId)) continue;
    const sweep = sweepOperator(deps, operatorId, streams).finally(() => inFlight.delete(operatorId));
    inFlight.set(operatorId, sweep);
    started.push(sweep);
  }
  const result: SweepResult = { roundsClosed: 0, rollbacks: 0 };
  for (const r of await Promise.all(started)) {
    result.roundsClosed += r.roundsClosed;
    result.rollbacks += r.rollbacks;
  }
  return result;
}

/** One operator's stale rounds, under that operator's advisory lock (held on a connection for the sweep). */
async function sweepOperator(deps: ReconcilerDeps, operatorId: string, streams: readonly string[]): Promise<SweepResult> {
  const result: SweepResult = { roundsClosed: 0, rollbacks: 0 };
  const client = await deps.pool.connect();
  try {
    const { rows: lock } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [SWEEP_LOCK, operatorId]);
    if (!lock[0]?.ok) return result;
    try {
      for (const roundStream of streams) {
        try {
          const n = await closeRound(deps, roundStream);
          if (n !== undefined) {
            result.roundsClosed += 1;
            result.rollbacks += n;
          }
        } catch (err) {
          deps.logger.error({ err, roundStream }, 'could not close stale round; next sweep retries');
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [SWEEP_LOCK, operatorId]);
    }
  } finally {
    client.release();
  }
  return result;
}

/**
 * Closes a stale round, then rolls back its outstanding bets; undefined when it is not stale after all.
 * Closing comes first, decided at the revision read (so a BET or WIN that arrives meanwhile either
 * lands before the close, making the round not stale, or is refused with 409 after it): nothing can
 * join the round while its bets are being refunded.
 */
async function closeRound(deps: ReconcilerDeps, roundStream: string): Promise<number | undefined> {
  const closed = await handleCommand(deps.eventStore, roundStream, roundDecider, (s) => {
    const last = s.lastActivityAt ? Date.parse(s.lastActivityAt) : 0;
    const stale = !s.completed && deps.now().getTime() - last >= deps.staleAfterSeconds * 1000;
    const bets = outstandingBets(s);
    return {
      events: stale && bets.length > 0 ? [{ type: 'RoundForceClosed' as const, data: { closedAt: deps.now().toISOString(), rolledBack: bets.map((b) => b.request.transactionId) } }] : [],
      result: stale && bets.length > 0,
    };
  });
  // Closed now, or closed by an earlier sweep that did not finish its rollbacks.
  if (!closed.result && !closed.state.forceClosed) return undefined;
  const bets = outstandingBets(closed.next);
  for (const bet of bets) {
    const b = bet.request;
    await balanceCheck(deps, bet.operatorId, b.playerRef);
    const request: TransactionRequest = {
      transactionId: `${STALE_ROLLBACK_PREFIX}${b.transactionId}`,
      sessionToken: RECONCILER_SESSION,
      type: 'ROLLBACK',
      roundId: b.roundId,
      roundComplete: false,
      originalTransactionId: b.transactionId,
      playerRef: b.playerRef,
      amount: b.amount,
      currency: b.currency,
      gameId: b.gameId,
    };
    try {
      const tx = await submitTransaction(deps, {
        request,
        registryKey: bet.providerId,
        providerId: bet.providerId,
        operatorId: bet.operatorId,
        origin: 'reconciler',
        roundStream,
        sessionExpired: false,
      });
      deps.logger.info({ roundStream, bet: b.transactionId, status: tx.status, settled: isFinal(tx.status) }, 'stale bet rolled back');
    } catch (err) {
      if (!(err instanceof AppError && err.status === 409)) throw err;
      // Only fine if the bet was in fact rolled back meanwhile (by the provider); anything else is a fault to surface.
      const after = (await readRound(deps.eventStore, roundStream)).state.txs.get(b.transactionId);
      if (after?.rolledBackBy === undefined) throw err;
    }
  }
  return bets.length;
}

/** Best effort (API document 4.2 rule 5b): failure, timeout or an odd reply changes nothing. */
async function balanceCheck(deps: ReconcilerDeps, operatorId: string, playerRef: string): Promise<void> {
  const operator = deps.catalog.snapshot().operators.get(operatorId);
  if (!operator) return;
  const startedAt = performance.now();
  const r = await signedCall({
    ...walletTarget(operator),
    pathAndQuery: `/v1/wallet/balance?playerRef=${encodeURIComponent(playerRef)}`,
    method: 'GET',
  });
  deps.metrics?.walletBalance(operatorId, r, startedAt);
  deps.logger.info({ operatorId, playerRef, outcome: r.kind === 'response' ? r.status : r.kind }, 'stale round: balance before rollback');
}

export interface RunningReconciler {
  sweep(): Promise<SweepResult>;
  close(): Promise<void>;
}

export function startReconcilerRole(deps: ReconcilerDeps, logger: Logger): RunningReconciler {
  const inFlight: SweepsInFlight = new Map();
  const sweep = () => sweepStaleRounds(deps, inFlight);
  let running: Promise<unknown> = Promise.resolve();
  const tick = () => {
    running = sweep()
      .then((r) => {
        if (r.roundsClosed > 0) logger.info(r, 'stale rounds closed');
      })
      .catch((err: unknown) => logger.error({ err }, 'reconciler sweep failed'));
  };
  const timer = setInterval(tick, deps.intervalSeconds * 1000);
  return {
    sweep,
    async close() {
      clearInterval(timer);
      await running;
      await Promise.allSettled([...inFlight.values()]);
    },
  };
}
