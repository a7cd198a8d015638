import type { Migration } from '../../shared/db/migrations.ts';
import type { PoolClient } from '../../shared/db/pool.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Projection } from '../../projections/runner.ts';
import { chainedEvent, eventBytes, GENESIS, nextLink } from './link.ts';
import { knownGrantOwners, ownerOf } from './tenancy.ts';

/**
 * The chain's tables. Links are written once, by the chain's runner, in log order, one row an event:
 * `seq` is the event's place in the global chain (1 for the first event), `operator_seq` its place in its
 * operator's, so a link can be neither skipped nor written twice (the primary key and the operator's
 * unique index), and the runner moves its checkpoint in the same transaction. Nothing else writes here:
 * an audit rebuild does not touch the chain (it is not a read model, and is never rebuilt).
 */
export const chainMigrations: Migration[] = [
  {
    id: 'chain-001',
    sql: `
      CREATE TABLE chain_links (
        seq bigint PRIMARY KEY,
        position text NOT NULL,
        stream_id text NOT NULL,
        revision bigint NOT NULL,
        link bytea NOT NULL
      );
      CREATE TABLE chain_operator_links (
        operator_id text NOT NULL,
        seq bigint NOT NULL,
        global_seq bigint NOT NULL UNIQUE REFERENCES chain_links (seq),
        link bytea NOT NULL,
        PRIMARY KEY (operator_id, seq)
      );
      CREATE TABLE chain_operator_heads (
        operator_id text PRIMARY KEY,
        seq bigint NOT NULL,
        global_seq bigint NOT NULL,
        link bytea NOT NULL
      );
      CREATE TABLE chain_grant_owners (
        stream_id text PRIMARY KEY,
        operator_id text NOT NULL
      );
      CREATE TABLE chain_keys (
        key_id text PRIMARY KEY,
        public_key text NOT NULL,
        -- Only for a key the service generated itself (CHAIN_SIGNING_KEY unset).
        private_key text,
        created_at timestamptz NOT NULL DEFAULT now(),
        -- When another key took over (a rotation), and how far the global chain was linked then: a
        -- checkpoint of this key beyond that count is not valid, whatever time it claims.
        retired_at timestamptz,
        retired_at_seq bigint
      );
      CREATE TABLE chain_checkpoints (
        -- '' for the global chain, else the operator's id.
        chain text NOT NULL,
        seq bigint NOT NULL,
        position text NOT NULL,
        link text NOT NULL,
        signed_at timestamptz NOT NULL,
        key_id text NOT NULL REFERENCES chain_keys (key_id),
        signature text NOT NULL,
        PRIMARY KEY (chain, seq)
      );
      -- A chain is one store's (its positions and recording times are hashed): moving the history to
      -- another store archives the old chain here, whole, and the new store's chain starts again.
      CREATE TABLE chain_archives (
        epoch serial PRIMARY KEY,
        store text NOT NULL,
        events bigint NOT NULL,
        head_position text,
        head_link bytea,
        archived_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE TABLE chain_archived_links (epoch int NOT NULL REFERENCES chain_archives, LIKE chain_links, PRIMARY KEY (epoch, seq));
      CREATE TABLE chain_archived_operator_links (epoch int NOT NULL REFERENCES chain_archives, LIKE chain_operator_links, PRIMARY KEY (epoch, operator_id, seq));
      CREATE TABLE chain_archived_checkpoints (epoch int NOT NULL REFERENCES chain_archives, LIKE chain_checkpoints, PRIMARY KEY (epoch, chain, seq));
    `,
  },
  {
    // One row an event: its operator's link beside its global one, where chain-001 wrote a second row (in
    // chain_operator_links, whose foreign key locked the global row) for it. The operator's link cannot
    // exist without the event's place in the global chain, and the runner writes half the rows, index
    // entries and log records (docs/benchmarks.md, "Measured design decisions"). The live links are
    // copied into a new table, not updated in place, so a long chain is written once, not twice; the
    // locks keep a chain runner of the release before waiting, then failing, until it is replaced (its
    // checkpoint does not move, so nothing is skipped). The archived chains, small, are updated in place.
    // Either way every operator link must find its event's row: the migration stops if one does not.
    id: 'chain-002-one-row-an-event',
    sql: `
      LOCK TABLE chain_links, chain_operator_links IN ACCESS EXCLUSIVE MODE;
      ALTER TABLE chain_links RENAME TO chain_links_before;
      ALTER INDEX chain_links_pkey RENAME TO chain_links_before_pkey;
      CREATE TABLE chain_links (
        seq bigint PRIMARY KEY,
        position text NOT NULL,
        stream_id text NOT NULL,
        revision bigint NOT NULL,
        link bytea NOT NULL,
        -- The event's place and link in its operator's chain; all three NULL for an event of no operator.
        operator_id text,
        operator_seq bigint,
        operator_link bytea,
        CONSTRAINT chain_links_operator_whole CHECK ((operator_id IS NULL) = (operator_seq IS NULL) AND (operator_id IS NULL) = (operator_link IS NULL))
      );
      INSERT INTO chain_links (seq, position, stream_id, revision, link, operator_id, operator_seq, operator_link)
        SELECT g.seq, g.position, g.stream_id, g.revision, g.link, o.operator_id, o.seq, o.link
        FROM chain_links_before g LEFT JOIN chain_operator_links o ON o.global_seq = g.seq ORDER BY g.seq;
      CREATE UNIQUE INDEX chain_links_operator_idx ON chain_links (operator_id, operator_seq);

      ALTER TABLE chain_archived_links ADD COLUMN operator_id text, ADD COLUMN operator_seq bigint, ADD COLUMN operator_link bytea;
      UPDATE chain_archived_links a SET operator_id = o.operator_id, operator_seq = o.seq, operator_link = o.link
        FROM chain_archived_operator_links o WHERE o.epoch = a.epoch AND o.global_seq = a.seq;
      CREATE UNIQUE INDEX chain_archived_links_operator_idx ON chain_archived_links (epoch, operator_id, operator_seq);
      DO $carried$ BEGIN
        IF (SELECT count(*) FROM chain_operator_links) <> (SELECT count(*) FROM chain_links WHERE operator_id IS NOT NULL)
          OR (SELECT count(*) FROM chain_archived_operator_links) <> (SELECT count(*) FROM chain_archived_links WHERE operator_id IS NOT NULL) THEN
          RAISE EXCEPTION 'an operator link has no row of its event in the global chain: the chain is not as it was written (npm run audit -- verify-chain)';
        END IF;
      END $carried$;
      DROP TABLE chain_operator_links, chain_links_before, chain_archived_operator_links;
    `,
  },
];

interface OperatorHead {
  seq: number;
  globalSeq: number;
  link: Buffer;
}

/** Links every event of a batch to the global chain and its operator's, after the heads the tables hold. */
async function link(events: RecordedEvent[], tx: PoolClient): Promise<void> {
  const { rows: globalHead } = await tx.query<{ seq: string; link: Buffer }>('SELECT seq, link FROM chain_links ORDER BY seq DESC LIMIT 1');
  let seq = Number(globalHead[0]?.seq ?? 0);
  let previous = globalHead[0]?.link ?? GENESIS;

  // Whose later grant events these are: remembered from each grant's first event (the new ones kept below).
  const grantOwners = await knownGrantOwners(tx, events);
  const firstSeen = new Map<string, string>();
  const owners = events.map((e) => {
    const owner = ownerOf(e, (s) => grantOwners.get(s));
    if (owner?.remember && !grantOwners.has(e.streamId)) {
      grantOwners.set(e.streamId, owner.operatorId);
      firstSeen.set(e.streamId, owner.operatorId);
    }
    return owner?.operatorId;
  });

  const operators = [...new Set(owners.filter((o): o is string => o !== undefined))];
  const heads = new Map<string, OperatorHead>();
  if (operators.length > 0) {
    const { rows } = await tx.query<{ operator_id: string; seq: string; global_seq: string; link: Buffer }>(
      'SELECT operator_id, seq, global_seq, link FROM chain_operator_heads WHERE operator_id = ANY($1::text[]) FOR UPDATE',
      [operators],
    );
    for (const r of rows) heads.set(r.operator_id, { seq: Number(r.seq), globalSeq: Number(r.global_seq), link: r.link });
  }

  const links: Array<{ seq: number; position: string; streamId: string; revision: number; link: Buffer; operatorId: string | null; operatorSeq: number | null; operatorLink: Buffer | null }> = [];
  events.forEach((e, i) => {
    const chained = eventBytes(chainedEvent(e));
    seq += 1;
    previous = nextLink(previous, chained);
    const operatorId = owners[i];
    let inOperatorChain: OperatorHead | undefined;
    if (operatorId !== undefined) {
      const head = heads.get(operatorId) ?? { seq: 0, globalSeq: 0, link: GENESIS };
      inOperatorChain = { seq: head.seq + 1, globalSeq: seq, link: nextLink(head.link, chained) };
      heads.set(operatorId, inOperatorChain);
    }
    links.push({
      seq, position: e.position, streamId: e.streamId, revision: e.revision, link: previous,
      operatorId: operatorId ?? null, operatorSeq: inOperatorChain?.seq ?? null, operatorLink: inOperatorChain?.link ?? null,
    });
  });

  await tx.query(
    `INSERT INTO chain_links (seq, position, stream_id, revision, link, operator_id, operator_seq, operator_link)
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bytea[], $6::text[], $7::bigint[], $8::bytea[])`,
    [
      links.map((l) => l.seq), links.map((l) => l.position), links.map((l) => l.streamId), links.map((l) => l.revision), links.map((l) => l.link),
      links.map((l) => l.operatorId), links.map((l) => l.operatorSeq), links.map((l) => l.operatorLink),
    ],
  );
  if (operators.length > 0) {
    const touched = operators.map((o) => ({ o, h: heads.get(o)! }));
    await tx.query(
      `INSERT INTO chain_operator_heads (operator_id, seq, global_seq, link)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[])
       ON CONFLICT (operator_id) DO UPDATE SET seq = EXCLUDED.seq, global_seq = EXCLUDED.global_seq, link = EXCLUDED.link`,
      [touched.map((t) => t.o), touched.map((t) => t.h.seq), touched.map((t) => t.h.globalSeq), touched.map((t) => t.h.link)],
    );
  }
  if (firstSeen.size > 0) {
    await tx.query(
      `INSERT INTO chain_grant_owners (stream_id, operator_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT (stream_id) DO NOTHING`,
      [[...firstSeen.keys()], [...firstSeen.values()]],
    );
  }
}

/**
 * The chain, run by the projector role like a read model (one runner owns it; each batch and the
 * checkpoint commit together, so a killed process or a lost connection leaves neither a gap nor a
 * link written twice), but not one: it is in no list an audit rebuild or verify goes through.
 */
export const chainProjection: Projection = {
  name: 'chain',
  tables: [{ name: 'chain_links', key: ['seq'] }],
  eventTypes: 'all',
  apply: link,
  reset() {
    throw new Error('the chain is never rebuilt: a chain computed again proves nothing (npm run audit -- verify-chain checks it)');
  },
};
