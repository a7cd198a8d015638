import { Router } from 'express';
import { drainedOrClosed } from '../../shared/http/drain.ts';
import { z } from 'zod';
import type { Pool } from '../../shared/db/pool.ts';
import { notFound } from '../../shared/errors.ts';
import type { EventStore, RecordedEvent } from '../../shared/eventstore/port.ts';
import { queryLimit } from '../../shared/http/query.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';
import { callingOperator } from '../context.ts';
import { checkpoints } from './checkpoints.ts';
import { chainedEvent, type ChainedEvent } from './link.ts';

const count = () => z.string().regex(/^\d{1,15}$/, 'must be a whole number (a count of events)').transform(Number);

export const historyEventsQuery = z.strictObject({ after: count().optional(), limit: queryLimit(1000).optional() });
export const checkpointsQuery = z.strictObject({ after: count().optional(), limit: queryLimit(1000).optional() });
export const publicKeyQuery = z.strictObject({ keyId: z.string().regex(/^[0-9a-f]{16}$/, 'must be a key id as checkpoints name it (16 hex digits)').optional() });

/** One event of an operator's chain: what its link hashes, its place, and the link. */
export interface HistoryEvent extends ChainedEvent {
  count: number;
  link: string;
}

const READ_CONCURRENCY = 8;
/**
 * Events read from the store at a time for a page of an operator's history: a page is up to 1,000 events,
 * and an outcome keeps its wallet's reply (up to 1 MiB), so a page read whole could hold a gigabyte in the
 * api. Read and sent in runs of this many, it holds at most about 32 MiB.
 */
export const HISTORY_READ_RUN = 32;

type LinkRow = { seq: string; link: Buffer; stream_id: string; revision: string; position: string };

/**
 * The operator's events after its `after`-th, in chain order, each with its link, read from the event
 * store itself (the chain's tables say only where each one is), in runs of HISTORY_READ_RUN: a stream's
 * consecutive events of a run are read in one call.
 */
export async function* operatorHistoryRuns(pool: Pool, store: EventStore, operatorId: string, after: number, limit: number): AsyncGenerator<HistoryEvent[]> {
  const { rows } = await pool.query<LinkRow>(
    `SELECT operator_seq AS seq, operator_link AS link, stream_id, revision, position FROM chain_links
     WHERE operator_id = $1 AND operator_seq > $2 ORDER BY operator_seq LIMIT $3`,
    [operatorId, after, limit],
  );
  for (let i = 0; i < rows.length; i += HISTORY_READ_RUN) yield linkedEvents(store, rows.slice(i, i + HISTORY_READ_RUN));
}

/** All of a page of operatorHistoryRuns. */
export async function operatorHistory(pool: Pool, store: EventStore, operatorId: string, after: number, limit: number): Promise<HistoryEvent[]> {
  const out: HistoryEvent[] = [];
  for await (const run of operatorHistoryRuns(pool, store, operatorId, after, limit)) out.push(...run);
  return out;
}

async function linkedEvents(store: EventStore, rows: LinkRow[]): Promise<HistoryEvent[]> {
  const wanted = new Map<string, { from: number; to: number }>();
  for (const r of rows) {
    const rev = Number(r.revision);
    const w = wanted.get(r.stream_id);
    wanted.set(r.stream_id, w ? { from: Math.min(w.from, rev), to: Math.max(w.to, rev) } : { from: rev, to: rev });
  }
  const found = new Map<string, RecordedEvent>();
  const streams = [...wanted];
  for (let i = 0; i < streams.length; i += READ_CONCURRENCY) {
    await Promise.all(
      streams.slice(i, i + READ_CONCURRENCY).map(async ([stream, w]) => {
        for (const e of await store.readStream(stream, { fromRevision: w.from, maxCount: w.to - w.from + 1 })) found.set(`${stream}\n${e.revision}`, e);
      }),
    );
  }
  return rows.map((r) => {
    const e = found.get(`${r.stream_id}\n${r.revision}`);
    // Linked but gone from the store: shown as missing, so the operator's recomputation breaks here.
    const chained = e ? chainedEvent(e) : { stream: r.stream_id, type: '(missing from the event store)', data: null, metadata: null, position: r.position, recordedAt: '' };
    return { count: Number(r.seq), ...chained, link: r.link.toString('hex') };
  });
}

/** GET /v1/operator/history/events and /checkpoints (contract section 10): an operator's own chain. */
export function historyRoutes(ctx: ServiceContext): Router {
  const router = Router();
  router.get('/history/events', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const q = parseOr400(historyEventsQuery, req.query, 'query');
    // Written as it is read, run by run (HISTORY_READ_RUN), never held whole: a page of large events is
    // large. A failure after the first run cuts the connection (the error handler), so a client never
    // takes a cut page for a whole one.
    const runs = operatorHistoryRuns(ctx.pool, ctx.eventStore, operator.id, q.after ?? 0, q.limit ?? 100);
    let next = q.after ?? 0;
    let first = true;
    for await (const run of runs) {
      if (res.destroyed) return; // the caller went away: read no more
      if (run.length === 0) continue;
      if (first) res.type('application/json').write('{"events":[');
      const text = `${first ? '' : ','}${run.map((e) => JSON.stringify(e)).join(',')}`;
      first = false;
      next = run.at(-1)!.count;
      if (!res.write(text)) await drainedOrClosed(res);
      if (res.destroyed) return; // the caller went away: read no more
    }
    if (first) res.type('application/json').write('{"events":[');
    res.end(`],"next":${next}}`);
  });
  router.get('/history/checkpoints', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const q = parseOr400(checkpointsQuery, req.query, 'query');
    res.json({ checkpoints: await checkpoints(ctx.pool, operator.id, q.after ?? 0, q.limit ?? 1000) });
  });
  return router;
}

/** GET /v1/audit/chain/public-key and /checkpoints (bearer ADMIN_TOKEN). */
export function chainAuditRoutes(ctx: ServiceContext): Router {
  const router = Router();
  router.get('/chain/public-key', async (req, res) => {
    const { keyId } = parseOr400(publicKeyQuery, req.query, 'query');
    // The key in use (the one not retired), or a former one by its id.
    const { rows } = await ctx.pool.query<{ key_id: string; public_key: string }>(
      keyId !== undefined
        ? 'SELECT key_id, public_key FROM chain_keys WHERE key_id = $1'
        : 'SELECT key_id, public_key FROM chain_keys ORDER BY (retired_at IS NULL) DESC, created_at DESC LIMIT 1',
      keyId !== undefined ? [keyId] : [],
    );
    if (!rows[0]) throw notFound(keyId !== undefined ? 'no key with this id' : 'no signing key yet: the projector role creates it at its first start');
    res.setHeader('X-Key-Id', rows[0].key_id);
    res.type('application/x-pem-file').send(rows[0].public_key);
  });
  router.get('/chain/checkpoints', async (req, res) => {
    const q = parseOr400(checkpointsQuery, req.query, 'query');
    res.json({ checkpoints: await checkpoints(ctx.pool, '', q.after ?? 0, q.limit ?? 1000) });
  });
  return router;
}
