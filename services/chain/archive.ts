import { withTransaction, type Pool, type PoolClient } from '../../shared/db/pool.ts';
import { START, type EventStore } from '../../shared/eventstore/port.ts';
import { BATCH_BYTES } from '../../shared/eventstore/text-size.ts';
import { applyBatch, readCheckpoint } from '../../projections/runner.ts';
import { CHAIN, chainProjection, type ChainProjection } from './projection.ts';

/**
 * Links the events the chain's runner has not linked yet (the service is stopped for a move between
 * stores, and its projector may have stopped a few events short), with `chain` (by default one of this
 * command's own, whose heads start from the tables': ChainHeads). Returns how many it linked.
 */
export async function catchUpChain(pool: Pool, store: EventStore, chain: ChainProjection = chainProjection(store)): Promise<number> {
  let from = await readCheckpoint(pool, CHAIN);
  let linked = 0;
  for (;;) {
    // Pages of up to 1,000 events and BATCH_BYTES (an outcome keeps a reply of up to 1 MiB).
    const { events: page } = await store.readPage({ from, maxCount: 1000, maxBytes: BATCH_BYTES });
    if (page.length === 0) return linked;
    from = await applyBatch(pool, chain, from, page);
    linked += page.length;
  }
}

/**
 * A move to another store: the chain of the store left behind (its links, its operators' links and its
 * signed checkpoints) is kept whole in the archive tables as one epoch, and the chain starts again from
 * the new store's first event, which the projector links from the start; `alongside` runs in the same
 * transaction. Returns the epoch.
 */
export async function archiveChain(pool: Pool, store: string, alongside: (tx: PoolClient) => Promise<void>): Promise<{ epoch: number; events: number }> {
  return withTransaction(pool, async (tx) => {
    await tx.query('LOCK TABLE chain_links, chain_operator_heads, chain_grant_owners, chain_checkpoints IN ACCESS EXCLUSIVE MODE');
    const { rows } = await tx.query<{ epoch: number; events: string }>(
      `INSERT INTO chain_archives (store, events, head_position, head_link)
       SELECT $1, count(*), (SELECT position FROM chain_links ORDER BY seq DESC LIMIT 1), (SELECT link FROM chain_links ORDER BY seq DESC LIMIT 1) FROM chain_links
       RETURNING epoch, events::text`,
      [store],
    );
    const epoch = rows[0]!.epoch;
    await tx.query(
      `INSERT INTO chain_archived_links (epoch, seq, position, stream_id, revision, link, operator_id, operator_seq, operator_link)
       SELECT $1, seq, position, stream_id, revision, link, operator_id, operator_seq, operator_link FROM chain_links`,
      [epoch],
    );
    await tx.query('INSERT INTO chain_archived_checkpoints SELECT $1, * FROM chain_checkpoints', [epoch]);
    await tx.query('DELETE FROM chain_checkpoints');
    await tx.query('DELETE FROM chain_operator_heads');
    await tx.query('DELETE FROM chain_grant_owners');
    await tx.query('DELETE FROM chain_links');
    await tx.query(
      `INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, events_applied = 0, last_event_at = NULL, updated_at = now(),
         failing_since = NULL, failing_event = NULL, failing_error = NULL`,
      [CHAIN, START],
    );
    // In the same transaction (the move's last step, which records the new store): a move interrupted
    // before it leaves the old chain in place, and a move run again verifies it again.
    await alongside(tx);
    return { epoch, events: Number(rows[0]!.events) };
  });
}
