import type { Pool } from '../../shared/db/pool.ts';
import type { EventStore, RecordedEvent } from '../../shared/eventstore/port.ts';
import { wholeLog } from '../../shared/eventstore/whole-log.ts';
import { checkpointOf, checkpointSignatureValid } from './checkpoints.ts';
import { chainedEvent, eventBytes, GENESIS, nextLink } from './link.ts';
import { knownGrantOwners, ownerOf } from './tenancy.ts';
import { chainName } from './projection.ts';

/**
 * npm run audit -- verify-chain: recomputes the chain from the events the store holds, in log order,
 * and compares every link with the one written when the event was first linked, every operator's link
 * with its own, and every signed checkpoint with the link at its count and with its key. Reads the
 * history and the chain's tables page by page, side by side: its memory does not grow with the history.
 */

export interface ChainBreak {
  /** The event's place in the global chain (1 = first). */
  count: number;
  position: string | undefined;
  stream: string | undefined;
  what: string;
  /** The break is in a signed checkpoint of that event, not in the events (which all link as recorded). */
  inCheckpoint?: true;
}

export interface ChainReport {
  /** Events verified against their links. */
  events: number;
  /** Newer events the chain's runner has not linked yet (not verified: nothing to compare them with). */
  unlinked: number;
  checkpoints: number;
  seconds: number;
  broken: ChainBreak | undefined;
}

const PAGE = 2000;

/** Rows of a table in key order, a page at a time (keyset pagination), the next page asked for while this one is used. */
async function* rowsOf<R extends Record<string, unknown>>(pool: Pool, sql: (after: number) => { text: string; values: unknown[] }, key: (r: R) => number): AsyncGenerator<R> {
  let pending = pool.query<R>(sql(0));
  for (;;) {
    const { rows } = await pending;
    if (rows.length === PAGE) pending = pool.query<R>(sql(key(rows[rows.length - 1]!)));
    yield* rows;
    if (rows.length < PAGE) return;
  }
}

/** The store's whole log, a page at a time, the next page read while this one is hashed. */
async function* eventsOf(store: EventStore): AsyncGenerator<RecordedEvent[]> {
  const pages = wholeLog(store, undefined, PAGE);
  let next = pages.next();
  for (;;) {
    const page = await next;
    if (page.done) return;
    next = pages.next();
    yield page.value;
  }
}

export async function verifyChain(pool: Pool, store: EventStore, progress?: (events: number) => void): Promise<ChainReport> {
  const started = performance.now();
  const links = rowsOf<{ seq: string; position: string; stream_id: string; revision: string; link: Buffer; operator_id: string | null; operator_seq: string | null; operator_link: Buffer | null; [k: string]: unknown }>(
    pool,
    (after) => ({
      text: 'SELECT seq, position, stream_id, revision, link, operator_id, operator_seq, operator_link FROM chain_links WHERE seq > $1 ORDER BY seq LIMIT $2',
      values: [after, PAGE],
    }),
    (r) => Number(r.seq),
  );
  let previous = GENESIS;
  const operatorHeads = new Map<string, { seq: number; link: Buffer }>();
  let count = 0;
  let unlinked = 0;
  const report = (b: Omit<ChainBreak, 'count'> & { count?: number }): ChainReport => ({
    events: count,
    unlinked,
    checkpoints: 0,
    seconds: (performance.now() - started) / 1000,
    broken: { count: b.count ?? count, position: b.position, stream: b.stream, what: b.what, ...(b.inCheckpoint ? { inCheckpoint: true as const } : {}) },
  });

  let linkedAll = true;
  for await (const page of eventsOf(store)) {
    if (!linkedAll) {
      unlinked += page.length;
      continue;
    }
    // Whose later grant events these are, as the chain remembered it from each grant's first event (checked there).
    const grantOwners = await knownGrantOwners(pool, page);
    for (const [i, e] of page.entries()) {
      const where = { position: e.position, stream: e.streamId };
      const stored = await links.next();
      if (stored.done) {
        // The chain's runner links as events come; these came after it last did (or it is not running).
        linkedAll = false;
        unlinked += page.length - i;
        break;
      }
      const linked = stored.value;
      count += 1;
      const chained = eventBytes(chainedEvent(e));
      previous = nextLink(previous, chained);
      if (linked.position !== e.position) {
        return report({ ...where, what: `the chain linked the event at position ${linked.position} here: an event was inserted, deleted or moved at or before this place` });
      }
      if (!linked.link.equals(previous)) return report({ ...where, what: 'the event is not the one that was linked here (edited, or an earlier one was)' });
      // The link covers the log's order; a stream's own order (its revisions, which every fold follows) is
      // checked against what the chain recorded when it linked the event.
      if (linked.stream_id !== e.streamId || Number(linked.revision) !== e.revision) {
        return report({ ...where, what: `the chain linked revision ${linked.revision} of stream ${linked.stream_id} here, the history holds revision ${e.revision} of ${e.streamId}: events were moved within their stream` });
      }

      const owner = ownerOf(e, (s) => grantOwners.get(s));
      if (owner?.remember && grantOwners.get(e.streamId) !== owner.operatorId) {
        return report({ ...where, what: `the chain took this grant for operator ${grantOwners.get(e.streamId) ?? '(none)'}, its first event says ${owner.operatorId}` });
      }
      if (owner === undefined) {
        if (linked.operator_id !== null) return report({ ...where, what: `the chain of operator ${linked.operator_id} holds this event, which is no operator's` });
        continue;
      }
      if (linked.operator_id !== owner.operatorId || linked.operator_seq === null || linked.operator_link === null) {
        return report({ ...where, what: `operator ${owner.operatorId}'s chain does not hold this event of its stream` });
      }
      const head = operatorHeads.get(owner.operatorId) ?? { seq: 0, link: GENESIS };
      const next = { seq: head.seq + 1, link: nextLink(head.link, chained) };
      if (Number(linked.operator_seq) !== next.seq || !linked.operator_link.equals(next.link)) {
        return report({ ...where, what: `operator ${owner.operatorId}'s link #${linked.operator_seq} is not the one this event makes (#${next.seq})` });
      }
      operatorHeads.set(owner.operatorId, next);
    }
    progress?.(count);
  }
  const extra = linkedAll ? await links.next() : { done: true as const, value: undefined };
  if (!extra.done) {
    return report({ count: count + 1, position: extra.value.position, stream: undefined, what: 'the chain links an event the history no longer holds (deleted at the end)' });
  }

  // Every checkpoint: its link is the chain's at its count (just verified against the history), its signature its key's.
  let checkpoints = 0;
  async function* signedCheckpoints() {
    for (let offset = 0; ; offset += PAGE) {
      const { rows } = await pool.query<{
        chain: string; seq: string; position: string; link: string; signed_at: Date; key_id: string; signature: string; public_key: string;
        retired_at: Date | null; retired_at_seq: string | null; global_seq: string | null; at: string | null; at_position: string | null;
      }>(
        `SELECT c.*, k.public_key, k.retired_at, k.retired_at_seq, encode(CASE WHEN c.chain = '' THEN g.link ELSE og.operator_link END, 'hex') AS at,
                CASE WHEN c.chain = '' THEN g.position ELSE og.position END AS at_position,
                CASE WHEN c.chain = '' THEN g.seq ELSE og.seq END AS global_seq
         FROM chain_checkpoints c JOIN chain_keys k ON k.key_id = c.key_id
         LEFT JOIN chain_links g ON c.chain = '' AND g.seq = c.seq
         LEFT JOIN chain_links og ON c.chain <> '' AND og.operator_id = c.chain AND og.operator_seq = c.seq
         ORDER BY c.chain, c.seq OFFSET $1 LIMIT $2`,
        [offset, PAGE],
      );
      yield* rows;
      if (rows.length < PAGE) return;
    }
  }
  const signed = signedCheckpoints();
  for await (const r of signed) {
    checkpoints += 1;
    const c = checkpointOf(r);
    const chain = chainName(r.chain);
    if (r.at !== r.link || r.at_position !== r.position) return { ...report({ count: Number(r.seq), position: r.position, stream: undefined, what: `the checkpoint of ${chain} at count ${r.seq} (signed ${c.signedAt}) does not match the chain there`, inCheckpoint: true }), checkpoints };
    // Judged by how far the chain was linked when the key was retired, not by the time it claims.
    if (r.retired_at_seq !== null && r.global_seq !== null && Number(r.global_seq) > Number(r.retired_at_seq)) {
      return {
        ...report({
          count: Number(r.seq),
          position: r.position,
          stream: undefined,
          what: `${chain}'s checkpoint at count ${r.seq} covers event #${r.global_seq}, signed with key ${r.key_id} after that key was retired (at event #${r.retired_at_seq}, ${r.retired_at?.toISOString()})`,
          inCheckpoint: true,
        }),
        checkpoints,
      };
    }
    if (!checkpointSignatureValid(c, r.public_key)) return { ...report({ count: Number(r.seq), position: r.position, stream: undefined, what: `the signature of ${chain}'s checkpoint at count ${r.seq} is not valid for key ${r.key_id}`, inCheckpoint: true }), checkpoints };
  }
  return { events: count, unlinked, checkpoints, seconds: (performance.now() - started) / 1000, broken: undefined };
}
