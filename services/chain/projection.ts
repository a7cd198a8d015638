import type { Migration } from '../../shared/db/migrations.ts';
import type { Logger } from 'pino';
import type { Pool, PoolClient } from '../../shared/db/pool.ts';
import { START, type EventStore, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { BATCH_BYTES } from '../../shared/eventstore/text-size.ts';
import { everyInterval } from '../../shared/periodic.ts';
import { ProjectionHaltError, type Projection } from '../../projections/runner.ts';
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

/** Where a chain stands after its last link: its count, the event's place in the global chain and the log, the link. */
export interface ChainHead {
  seq: number;
  globalSeq: number;
  position: string;
  link: Buffer;
}

/** Each chain's head: '' the global chain, else an operator's. */
export type ChainHeadsMap = Map<string, ChainHead>;

const BEFORE_FIRST: ChainHead = { seq: 0, globalSeq: 0, position: START, link: GENESIS };

/** One link row: an event's place and link in the global chain and, if it has an operator, in its operator's. */
interface LinkRow {
  seq: number;
  position: string;
  streamId: string;
  revision: number;
  link: Buffer;
  operatorId: string | null;
  operatorSeq: number | null;
  operatorLink: Buffer | null;
}

/** The chain's refusal to link after rows this process did not write (see ChainHeads): its runner halts, holding the chain. */
export class ChainRewrittenError extends ProjectionHaltError {
  override name = 'ChainRewrittenError';
}

/** How a chain is named in messages ('' = the global one). */
export const chainName = (chain: string): string => (chain === '' ? 'the global chain' : `operator ${chain}'s chain`);
const sameHead = (a: ChainHead | undefined, b: ChainHead | undefined): boolean =>
  a === undefined || b === undefined ? a === b : a.seq === b.seq && a.globalSeq === b.globalSeq && a.link.equals(b.link);

/** Each event's operator (undefined: none), and the grant streams first seen in these events with theirs. */
async function ownersOf(events: RecordedEvent[], tx: Pool | PoolClient): Promise<{ owners: Array<string | undefined>; firstSeen: Map<string, string> }> {
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
  return { owners, firstSeen };
}

/** Links events after `heads`, which it moves on: the rows of the chain's table, one an event. */
function linkEvents(events: RecordedEvent[], owners: Array<string | undefined>, heads: ChainHeadsMap): LinkRow[] {
  return events.map((e, i) => {
    const chained = eventBytes(chainedEvent(e));
    const before = heads.get('') ?? BEFORE_FIRST;
    const global: ChainHead = { seq: before.seq + 1, globalSeq: before.seq + 1, position: e.position, link: nextLink(before.link, chained) };
    heads.set('', global);
    const operatorId = owners[i];
    let mine: ChainHead | undefined;
    if (operatorId !== undefined) {
      const head = heads.get(operatorId) ?? BEFORE_FIRST;
      mine = { seq: head.seq + 1, globalSeq: global.seq, position: e.position, link: nextLink(head.link, chained) };
      heads.set(operatorId, mine);
    }
    return {
      seq: global.seq, position: e.position, streamId: e.streamId, revision: e.revision, link: global.link,
      operatorId: operatorId ?? null, operatorSeq: mine?.seq ?? null, operatorLink: mine?.link ?? null,
    };
  });
}

/**
 * The heads the tables hold, in one statement (one moment): the global chain's and, of the operators'
 * (every one, or those named), the count, the event's place in the global chain and the log, and the link.
 */
async function headsInDatabase(db: Pool | PoolClient, operators?: string[]): Promise<ChainHeadsMap> {
  const heads: ChainHeadsMap = new Map();
  const { rows } = await db.query<{ chain: string; seq: string; global_seq: string; position: string | null; link: Buffer }>(
    `SELECT '' AS chain, seq, seq AS global_seq, position, link FROM (SELECT seq, position, link FROM chain_links ORDER BY seq DESC LIMIT 1) g
     UNION ALL
     SELECT h.operator_id, h.seq, h.global_seq, l.position, h.link FROM chain_operator_heads h LEFT JOIN chain_links l ON l.seq = h.global_seq
     ${operators === undefined ? '' : 'WHERE h.operator_id = ANY($1::text[])'}`,
    operators === undefined ? [] : [operators],
  );
  for (const r of rows) heads.set(r.chain, { seq: Number(r.seq), globalSeq: Number(r.global_seq), position: r.position ?? '', link: r.link });
  return heads;
}

/** Throws ChainRewrittenError at the first of `chains` whose head in the tables (`found`) is not the one known (`expected`). */
function expectHeads(chains: Iterable<string>, expected: ChainHeadsMap, found: ChainHeadsMap): void {
  for (const chain of chains) {
    const known = expected.get(chain);
    const there = found.get(chain);
    if (sameHead(known, there)) continue;
    throw new ChainRewrittenError(
      `${chainName(chain)} in the database ends at count ${there?.seq ?? 0}, not at the count ${known?.seq ?? 0} and link this process linked last: ` +
        'it was changed under the running service, so nothing is linked after it (npm run audit -- verify-chain; put the rows back, or restart the projector once the history is known to be whole)',
    );
  }
}

/**
 * What this process knows of the chain, kept for its life: the head of every chain as its runner
 * committed it last or, while another process's runner owns the chain, as this process checked it
 * (follow). The chain is linked on from these heads, never from rows someone else could have written:
 *
 * - a process takes the heads the tables hold once, when it starts (a process started afresh remembers
 *   nothing, docs/auditors.md);
 * - after that, links another process's runner adds are each computed again from the store's events and
 *   compared with their rows: every second while this process stands by (follow), and before its runner
 *   links after them when it takes the chain over;
 * - its runner links a batch only if the tables' heads are those, and the chain's checkpoint is at the
 *   last event linked. Anything else (a head forged past the chain, links rewritten, a chain cut short, an
 *   operator's head changed, the checkpoint moved) is refused: the runner halts holding the chain (no
 *   other process links in its place) and names it (projection_failing, /readyz) until the tables hold
 *   what it linked again, or the projector processes are restarted after an audit (verify-chain);
 * - the checkpoint signer of the same process signs only these heads, and only while its runner owns
 *   the chain (services/chain/checkpoints.ts).
 */
export class ChainHeads {
  private known: ChainHeadsMap | undefined;
  private staged: ChainHeadsMap | undefined;

  /** The heads linked or checked last (undefined until the first batch or check): what the signer may sign. */
  linked(): ReadonlyMap<string, ChainHead> | undefined {
    return this.known;
  }

  /** The heads to link a batch after, once the tables are found to hold them (or, the first time, read from them). */
  async before(tx: PoolClient, store: Pick<EventStore, 'readPage'>, operators: string[]): Promise<ChainHeadsMap> {
    this.staged = undefined;
    // Links another runner added since: checked before any lock is taken (a lock would hold back every
    // reader of a Postgres store while the log is read and hashed). Usually none: they are followed.
    const known = this.known === undefined ? undefined : await caughtUp(tx, store, new Map(this.known));
    // The chain's checkpoint, locked: a runner that lost the chain without noticing waits here for the
    // one that took it, and the batch must start right after the last event linked.
    const { rows: checkpoint } = await tx.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1 FOR UPDATE', [CHAIN]);
    const heads = known === undefined ? await headsInDatabase(tx) : await checked(tx, store, operators, known);
    const last = heads.get('') ?? BEFORE_FIRST;
    if (checkpoint[0]?.position !== last.position) {
      throw new ChainRewrittenError(
        `the chain's checkpoint in the database is at ${checkpoint[0]?.position ?? 'no position'}, not at the last event linked (${last.position}, count ${last.seq}): ` +
          'it was moved under the running service, which would link events twice or leave some out, so nothing is linked (npm run audit -- verify-chain)',
      );
    }
    return heads;
  }

  /** The heads a batch linked to, kept once its transaction commits. */
  stage(heads: ChainHeadsMap): void {
    this.staged = heads;
  }

  committed(): void {
    if (this.staged !== undefined) this.known = this.staged;
    this.staged = undefined;
  }

  /**
   * While another process's runner owns the chain: checks the links it added since the last check
   * (computed again from the store's events) and the heads the tables hold, and knows them from then
   * on. Throws ChainRewrittenError when the tables hold what it cannot compute again: its heads stay
   * where they were checked, so its runner will not link after them if it takes the chain over.
   */
  async follow(pool: Pool, store: Pick<EventStore, 'readPage'>): Promise<void> {
    const start = this.known;
    if (start === undefined) {
      const found = await headsInDatabase(pool);
      // Unless this process's runner committed meanwhile (its first batch takes them too).
      if (this.known === undefined) this.known = found;
      return;
    }
    const heads = await caughtUp(pool, store, new Map(start));
    const inTables = await headsInDatabase(pool);
    const global = heads.get('') ?? BEFORE_FIRST;
    const found = inTables.get('');
    // Linked further in the meantime: checked at the next call. Otherwise every chain must be as checked.
    if ((found?.seq ?? 0) <= global.seq) expectHeads(new Set([...heads.keys(), ...inTables.keys()]), heads, inTables);
    // Unless this process's runner linked meanwhile (what it committed is newer).
    if (this.known === start) this.known = heads;
  }
}

/** `heads` moved on past the links the tables hold after them, each checked against the log (see checkLinkedByAnother). */
async function caughtUp(db: Pool | PoolClient, store: Pick<EventStore, 'readPage'>, heads: ChainHeadsMap): Promise<ChainHeadsMap> {
  const { rows } = await db.query<{ seq: string }>('SELECT max(seq) AS seq FROM chain_links');
  const theirs = Number(rows[0]?.seq ?? 0);
  const mine = (heads.get('') ?? BEFORE_FIRST).seq;
  if (theirs > mine) await checkLinkedByAnother(db, store, heads, theirs - mine);
  return heads;
}

/**
 * `heads`, once the tables' heads of the global chain and of `operators` are found to be those (read
 * under the chain's checkpoint lock: no other runner writes them meanwhile).
 */
async function checked(tx: PoolClient, store: Pick<EventStore, 'readPage'>, operators: string[], heads: ChainHeadsMap): Promise<ChainHeadsMap> {
  const inTables = await headsInDatabase(tx, operators);
  const mine = heads.get('') ?? BEFORE_FIRST;
  const theirs = inTables.get('') ?? BEFORE_FIRST;
  // Linked further since the check before the lock (a runner that lost the chain without noticing).
  if (theirs.seq > mine.seq) await checkLinkedByAnother(tx, store, heads, theirs.seq - mine.seq);
  expectHeads(['', ...operators], heads, inTables);
  return heads;
}

/**
 * The links another runner added after `heads` (`count` of them), each computed again from the store's
 * events and compared with its row; `heads` moves on to their end. Throws at the first that differs.
 */
async function checkLinkedByAnother(db: Pool | PoolClient, store: Pick<EventStore, 'readPage'>, heads: ChainHeadsMap, count: number): Promise<void> {
  let left = count;
  while (left > 0) {
    const from = (heads.get('') ?? BEFORE_FIRST).position;
    const { events } = await store.readPage({ from, maxCount: Math.min(left, 1000), maxBytes: BATCH_BYTES });
    const first = (heads.get('') ?? BEFORE_FIRST).seq + 1;
    // Links of events this read does not return yet (a store node behind the one they were read from;
    // links forged past the log differ from the log's events before this point): try again later.
    if (events.length === 0) throw new Error(`the global chain in the database has links from count ${first} on, past the last event this read of the log returns; checked again later`);
    const { owners } = await ownersOf(events, db);
    const expected = linkEvents(events, owners, heads);
    const { rows } = await db.query<{ seq: string; position: string; stream_id: string; revision: string; link: Buffer; operator_id: string | null; operator_seq: string | null; operator_link: Buffer | null }>(
      'SELECT seq, position, stream_id, revision, link, operator_id, operator_seq, operator_link FROM chain_links WHERE seq >= $1 AND seq < $2 ORDER BY seq',
      [first, first + events.length],
    );
    expected.forEach((e, i) => {
      const r = rows[i];
      const same =
        r !== undefined && Number(r.seq) === e.seq && r.position === e.position && r.stream_id === e.streamId && Number(r.revision) === e.revision && r.link.equals(e.link) &&
        r.operator_id === e.operatorId && (r.operator_seq === null ? null : Number(r.operator_seq)) === e.operatorSeq &&
        (r.operator_link === null ? e.operatorLink === null : e.operatorLink !== null && r.operator_link.equals(e.operatorLink));
      if (!same) {
        throw new ChainRewrittenError(
          `the global chain in the database holds at count ${e.seq} a link this process did not write and cannot compute again from the log's event there: ` +
            'it was changed under the running service, so nothing is linked after it (npm run audit -- verify-chain)',
        );
      }
    });
    left -= events.length;
  }
}

/** Links a batch after the heads `heads` holds to (see ChainHeads), writing its rows, the operators' heads and new grant owners. */
async function link(events: RecordedEvent[], tx: PoolClient, store: Pick<EventStore, 'readPage'>, chainHeads: ChainHeads): Promise<void> {
  const { owners, firstSeen } = await ownersOf(events, tx);
  const operators = [...new Set(owners.filter((o): o is string => o !== undefined))];
  const heads = await chainHeads.before(tx, store, operators);
  const links = linkEvents(events, owners, heads);

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
  chainHeads.stage(heads);
}

export const CHAIN = 'chain';

/**
 * The projector role's witness of the chain: while another process's runner owns it (`owns` false),
 * every `everyMs` this process checks the links it added (ChainHeads.follow). A refusal is logged and
 * counted (`onRefused`) at each check until the tables hold what was checked again.
 */
export function startChainWitness(
  pool: Pool,
  store: Pick<EventStore, 'readPage'>,
  heads: ChainHeads,
  owns: () => boolean,
  logger: Logger,
  onRefused: () => void = () => undefined,
  everyMs = 1000,
): { stop(): Promise<void> } {
  const check = () =>
    heads.follow(pool, store).catch((err: unknown) => {
      if (err instanceof ChainRewrittenError) {
        logger.error({ error: err.message }, 'chain not followed: its tables hold links this process cannot compute again from the log; it will not link after them (npm run audit -- verify-chain)');
        onRefused();
      } else {
        logger.warn({ err: (err as Error).message }, 'chain not followed; trying again');
      }
    });
  // At once: the heads the tables hold when the process starts are the ones it trusts (ChainHeads).
  return everyInterval(everyMs, check, { now: true, when: () => !owns() });
}

/** The chain's runner's projection, with the heads it linked last (what its process's signer signs). */
export interface ChainProjection extends Projection {
  heads: ChainHeads;
}

/**
 * The chain, run by the projector role like a read model (one runner owns it; each batch and the
 * checkpoint commit together, so a killed process or a lost connection leaves neither a gap nor a
 * link written twice), but not one: it is in no list an audit rebuild or verify goes through. Each
 * process makes one, its heads shared with its signer; the store is read only to check links another
 * process's runner added (ChainHeads).
 */
export function chainProjection(store: Pick<EventStore, 'readPage'>, heads: ChainHeads = new ChainHeads()): ChainProjection {
  return {
    name: CHAIN,
    tables: [{ name: 'chain_links', key: ['seq'] }],
    eventTypes: 'all',
    heads,
    apply: (events, tx) => link(events, tx, store, heads),
    committed: () => heads.committed(),
    reset() {
      throw new Error('the chain is never rebuilt: a chain computed again proves nothing (npm run audit -- verify-chain checks it)');
    },
  };
}
