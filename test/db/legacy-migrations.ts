import type { Migration } from '../../shared/db/migrations.ts';

/**
 * The migrations of the release before the baselines (commit f5f7ff3), verbatim, in the order its
 * allMigrations applied them: what a database of that release holds. A fixture: never change it.
 */

const legacyEventStore: Migration[] = [
  {
    id: 'eventstore-001',
    sql: `
      CREATE TABLE es_streams (
        stream_id text PRIMARY KEY,
        revision bigint NOT NULL
      );
      CREATE TABLE es_events (
        global_position bigserial PRIMARY KEY,
        transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
        stream_id text NOT NULL,
        revision bigint NOT NULL,
        event_id uuid NOT NULL,
        type text NOT NULL,
        data jsonb NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CONSTRAINT es_events_stream_revision_key UNIQUE (stream_id, revision),
        CONSTRAINT es_events_event_id_key UNIQUE (event_id)
      );
      CREATE UNIQUE INDEX es_events_order_idx ON es_events (transaction_id, global_position);
    `,
  },
  {
    id: 'eventstore-002-append-function',
    sql: `
      CREATE FUNCTION es_append(p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (next_revision bigint, last_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_current bigint;
        v_last bigint;
      BEGIN
        INSERT INTO es_streams AS s (stream_id, revision) VALUES (p_stream, -1)
          ON CONFLICT (stream_id) DO UPDATE SET revision = s.revision
          RETURNING s.revision INTO v_current;
        IF p_expected IS NOT NULL AND v_current <> p_expected THEN
          RAISE EXCEPTION 'wrong expected revision' USING ERRCODE = 'P0001', DETAIL = v_current::text, HINT = 'es_wrong_expected_revision';
        END IF;
        WITH ins AS (
          INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
          SELECT p_stream, v_current + x.o, x.id, x.t, x.d, x.m
          FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS x(id, t, d, m, o)
          ORDER BY x.o
          RETURNING global_position
        )
        SELECT max(global_position) INTO v_last FROM ins;
        UPDATE es_streams SET revision = v_current + cardinality(p_ids) WHERE stream_id = p_stream;
        RETURN QUERY SELECT v_current + cardinality(p_ids), pg_current_xact_id()::text || '.' || v_last::text;
      END
      $$;
    `,
  },
  {
    id: 'eventstore-003-append-batch',
    sql: `
      CREATE FUNCTION es_append_batch(p_streams text[], p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_key int;
        v_current bigint;
        v_exists boolean;
        v_last bigint;
        v_from int := 1;
        v_to int;
        v_wrote boolean := false;
        i int;
      BEGIN
        FOR v_key IN SELECT DISTINCT hashtext(x) FROM unnest(p_streams) AS x ORDER BY 1 LOOP
          PERFORM pg_advisory_xact_lock(7281004, v_key);
        END LOOP;
        FOR i IN 1 .. cardinality(p_streams) LOOP
          v_to := v_from + p_counts[i] - 1;
          o_index := i;
          o_position := NULL;
          SELECT s.revision INTO v_current FROM es_streams s WHERE s.stream_id = p_streams[i];
          v_exists := FOUND;
          IF NOT v_exists THEN v_current := -1; END IF;
          IF p_expected[i] IS NOT NULL AND v_current <> p_expected[i] THEN
            o_conflict := true;
            o_revision := v_current;
          ELSE
            WITH ins AS (
              INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
              SELECT p_streams[i], v_current + x.o, x.id, x.t, x.d, x.m
              FROM unnest(p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]) WITH ORDINALITY AS x(id, t, d, m, o)
              ORDER BY x.o
              RETURNING global_position
            )
            SELECT max(global_position) INTO v_last FROM ins;
            IF v_exists THEN
              UPDATE es_streams SET revision = v_current + p_counts[i] WHERE stream_id = p_streams[i];
            ELSE
              INSERT INTO es_streams (stream_id, revision) VALUES (p_streams[i], v_current + p_counts[i]);
            END IF;
            o_conflict := false;
            o_revision := v_current + p_counts[i];
            o_position := pg_current_xact_id()::text || '.' || v_last::text;
          END IF;
          RETURN NEXT;
          v_from := v_to + 1;
          v_wrote := v_wrote OR NOT o_conflict;
        END LOOP;
        -- Delivered at commit, once per batch: subscribers in every process wake when the events are there to read.
        IF v_wrote THEN PERFORM pg_notify('es_appended', ''); END IF;
      END
      $$;

      -- es_append is no longer called by the store; a process of the previous version still may, so it
      -- stays, as one append through es_append_batch (same stream lock, same NOTIFY).
      CREATE OR REPLACE FUNCTION es_append(p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (next_revision bigint, last_position text) LANGUAGE plpgsql AS $$
      DECLARE
        r record;
      BEGIN
        SELECT * INTO r FROM es_append_batch(ARRAY[p_stream], ARRAY[p_expected], ARRAY[cardinality(p_ids)], p_ids, p_types, p_data, p_meta);
        IF r.o_conflict THEN
          RAISE EXCEPTION 'wrong expected revision' USING ERRCODE = 'P0001', DETAIL = r.o_revision::text, HINT = 'es_wrong_expected_revision';
        END IF;
        RETURN QUERY SELECT r.o_revision, r.o_position;
      END
      $$;
    `,
  },
  {
    id: 'eventstore-004-sql-interface',
    sql: `
      CREATE FUNCTION es_lock_streams(p_streams text[]) RETURNS void LANGUAGE plpgsql AS $$
      DECLARE
        v_key int;
      BEGIN
        FOR v_key IN SELECT DISTINCT hashtext(x) FROM unnest(p_streams) AS x ORDER BY 1 LOOP
          PERFORM pg_advisory_xact_lock(7281004, v_key);
        END LOOP;
      END
      $$;

      -- Whether the stream holds an event of this type at or after this revision.
      CREATE FUNCTION es_stream_has(p_stream text, p_from bigint, p_type text) RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT EXISTS (SELECT 1 FROM es_events WHERE stream_id = p_stream AND revision >= p_from AND type = p_type)
      $$;
    `,
  },
  {
    id: 'eventstore-005-stream-has-plan',
    sql: `
      CREATE OR REPLACE FUNCTION es_stream_has(p_stream text, p_from bigint, p_type text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
      BEGIN
        RETURN EXISTS (SELECT 1 FROM es_events WHERE stream_id = p_stream AND revision >= p_from AND type = p_type);
      END
      $$;
    `,
  },
  {
    id: 'eventstore-006-append-one',
    sql: `
      CREATE FUNCTION es_append_one(p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[],
        OUT o_conflict boolean, OUT o_revision bigint, OUT o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_current bigint;
        v_exists boolean;
        v_last bigint;
        v_count int := cardinality(p_ids);
      BEGIN
        PERFORM pg_advisory_xact_lock(7281004, hashtext(p_stream));
        SELECT s.revision INTO v_current FROM es_streams s WHERE s.stream_id = p_stream;
        v_exists := FOUND;
        IF NOT v_exists THEN v_current := -1; END IF;
        IF p_expected IS NOT NULL AND v_current <> p_expected THEN
          o_conflict := true;
          o_revision := v_current;
          RETURN;
        END IF;
        IF v_count = 1 THEN
          INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
          VALUES (p_stream, v_current + 1, p_ids[1], p_types[1], p_data[1], p_meta[1])
          RETURNING global_position INTO v_last;
        ELSE
          WITH ins AS (
            INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
            SELECT p_stream, v_current + x.o, x.id, x.t, x.d, x.m
            FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS x(id, t, d, m, o)
            ORDER BY x.o
            RETURNING global_position
          )
          SELECT max(global_position) INTO v_last FROM ins;
        END IF;
        IF v_exists THEN
          UPDATE es_streams SET revision = v_current + v_count WHERE stream_id = p_stream;
        ELSE
          INSERT INTO es_streams (stream_id, revision) VALUES (p_stream, v_current + v_count);
        END IF;
        -- Delivered at commit; repeats within one transaction are delivered once.
        PERFORM pg_notify('es_appended', '');
        o_conflict := false;
        o_revision := v_current + v_count;
        o_position := pg_current_xact_id()::text || '.' || v_last::text;
      END
      $$;

      CREATE OR REPLACE FUNCTION es_append_batch(p_streams text[], p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_from int := 1;
        v_to int;
        r record;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_streams);
        FOR i IN 1 .. cardinality(p_streams) LOOP
          v_to := v_from + p_counts[i] - 1;
          r := es_append_one(p_streams[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
          o_index := i;
          o_conflict := r.o_conflict;
          o_revision := r.o_revision;
          o_position := r.o_position;
          RETURN NEXT;
          v_from := v_to + 1;
        END LOOP;
      END
      $$;
    `,
  },
];

const legacyCatalog: Migration[] = [
  {
    id: 'catalog-001',
    sql: `
      CREATE TABLE catalog_providers (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE catalog_games (id text PRIMARY KEY, provider_id text NOT NULL REFERENCES catalog_providers (id), doc jsonb NOT NULL);
      CREATE TABLE catalog_operators (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE catalog_campaigns (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
    `,
  },
];

const legacyProjections: Migration[] = [
  {
    id: 'projections-001',
    sql: `
      CREATE TABLE projection_checkpoints (
        name text PRIMARY KEY,
        position text NOT NULL,
        events_applied bigint NOT NULL DEFAULT 0,
        last_event_at timestamptz,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    id: 'projections-002',
    sql: `
      ALTER TABLE projection_checkpoints
        ADD COLUMN failing_since timestamptz,
        ADD COLUMN failing_event jsonb,
        ADD COLUMN failing_error text;
    `,
  },
];

const legacySessionTokens: Migration[] = [
  {
    id: 'sessions-001-tokens',
    sql: `
      CREATE TABLE session_tokens (
        token text PRIMARY KEY,
        operator_id text NOT NULL,
        player_ref text NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        currency text NOT NULL,
        language text,
        demo boolean NOT NULL,
        start_revision bigint NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
    `,
  },
];

const legacyRegistry: Migration[] = [
  {
    id: 'ledger-001-registry',
    sql: `
      CREATE TABLE tx_registry (
        provider_id text NOT NULL,
        transaction_id text NOT NULL,
        content_hash text NOT NULL,
        round_stream text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (provider_id, transaction_id)
      );
    `,
  },
  {
    id: 'ledger-002-lease',
    sql: `ALTER TABLE tx_registry ADD COLUMN lease_token text, ADD COLUMN leased_until timestamptz;`,
  },
  {
    id: 'ledger-003-record-batch',
    sql: `
      CREATE FUNCTION ledger_record_batch(
        p_keys text[], p_tx_ids text[], p_hashes text[], p_rounds text[], p_tokens text[], p_ttls int[],
        p_guard_streams text[], p_guard_from bigint[], p_guard_types text[],
        p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_refused boolean, o_inserted boolean, o_leased boolean, o_content_hash text, o_round_stream text,
        o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_starts int[] := '{}';
        v_next int := 1;
        v_from int;
        v_to int;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_rounds);
        FOR i IN 1 .. cardinality(p_keys) LOOP
          v_starts := v_starts || v_next;
          v_next := v_next + p_counts[i];
        END LOOP;
        FOR i IN SELECT x.o FROM unnest(p_keys, p_tx_ids) WITH ORDINALITY AS x(k, t, o) ORDER BY x.k, x.t, x.o LOOP
          o_index := i;
          o_inserted := false;
          o_leased := false;
          o_content_hash := NULL;
          o_round_stream := NULL;
          o_conflict := NULL;
          o_revision := NULL;
          o_position := NULL;
          o_refused := p_guard_streams[i] IS NOT NULL AND es_stream_has(p_guard_streams[i], p_guard_from[i], p_guard_types[i]);
          IF NOT o_refused THEN
            INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, lease_token, leased_until)
            VALUES (p_keys[i], p_tx_ids[i], p_hashes[i], p_rounds[i], p_tokens[i], clock_timestamp() + p_ttls[i] * interval '1 millisecond')
            ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
              WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
                AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
            RETURNING r.content_hash, r.round_stream, (r.xmax = 0) INTO o_content_hash, o_round_stream, o_inserted;
            IF FOUND THEN
              o_leased := true;
            ELSE
              o_inserted := false; -- INTO found no row, and set it NULL
              SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream
              FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i];
            END IF;
            IF o_inserted AND p_counts[i] > 0 THEN
              v_from := v_starts[i];
              v_to := v_from + p_counts[i] - 1;
              SELECT b.o_conflict, b.o_revision, b.o_position INTO o_conflict, o_revision, o_position
              FROM es_append_batch(ARRAY[p_rounds[i]], ARRAY[p_expected[i]], ARRAY[p_counts[i]],
                p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]) b;
            END IF;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$;
    `,
  },
  {
    id: 'ledger-004-record-batch-append-one',
    sql: `
      CREATE OR REPLACE FUNCTION ledger_record_batch(
        p_keys text[], p_tx_ids text[], p_hashes text[], p_rounds text[], p_tokens text[], p_ttls int[],
        p_guard_streams text[], p_guard_from bigint[], p_guard_types text[],
        p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_refused boolean, o_inserted boolean, o_leased boolean, o_content_hash text, o_round_stream text,
        o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_starts int[] := '{}';
        v_next int := 1;
        v_from int;
        v_to int;
        v_append record;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_rounds);
        FOR i IN 1 .. cardinality(p_keys) LOOP
          v_starts := v_starts || v_next;
          v_next := v_next + p_counts[i];
        END LOOP;
        FOR i IN SELECT x.o FROM unnest(p_keys, p_tx_ids) WITH ORDINALITY AS x(k, t, o) ORDER BY x.k, x.t, x.o LOOP
          o_index := i;
          o_inserted := false;
          o_leased := false;
          o_content_hash := NULL;
          o_round_stream := NULL;
          o_conflict := NULL;
          o_revision := NULL;
          o_position := NULL;
          o_refused := p_guard_streams[i] IS NOT NULL AND es_stream_has(p_guard_streams[i], p_guard_from[i], p_guard_types[i]);
          IF NOT o_refused THEN
            INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, lease_token, leased_until)
            VALUES (p_keys[i], p_tx_ids[i], p_hashes[i], p_rounds[i], p_tokens[i], clock_timestamp() + p_ttls[i] * interval '1 millisecond')
            ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
              WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
                AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
            RETURNING r.content_hash, r.round_stream, (r.xmax = 0) INTO o_content_hash, o_round_stream, o_inserted;
            IF FOUND THEN
              o_leased := true;
            ELSE
              o_inserted := false; -- INTO found no row, and set it NULL
              SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream
              FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i];
            END IF;
            IF o_inserted AND p_counts[i] > 0 THEN
              v_from := v_starts[i];
              v_to := v_from + p_counts[i] - 1;
              v_append := es_append_one(p_rounds[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
              o_conflict := v_append.o_conflict;
              o_revision := v_append.o_revision;
              o_position := v_append.o_position;
            END IF;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$;
    `,
  },
  {
    id: 'ledger-005-wallet-key',
    sql: `
      ALTER TABLE tx_registry ADD COLUMN operator_id text, ADD COLUMN player_ref text;
      DO $backfill$ BEGIN
        IF to_regclass('es_events') IS NOT NULL THEN
          UPDATE tx_registry r SET operator_id = e.data->>'operatorId', player_ref = e.data->'request'->>'playerRef'
          FROM es_events e
          WHERE e.type = 'TransactionRecorded' AND e.stream_id = r.round_stream AND e.data->'request'->>'transactionId' = r.transaction_id;
        END IF;
      END $backfill$;
      UPDATE tx_registry r SET operator_id = NULL, player_ref = NULL
      FROM (
        SELECT provider_id, transaction_id,
          row_number() OVER (PARTITION BY operator_id, player_ref, transaction_id ORDER BY registered_at, provider_id) AS n
        FROM tx_registry WHERE operator_id IS NOT NULL
      ) d
      WHERE d.n > 1 AND r.provider_id = d.provider_id AND r.transaction_id = d.transaction_id;
      CREATE UNIQUE INDEX tx_registry_wallet_key ON tx_registry (operator_id, player_ref, transaction_id);
      DROP FUNCTION ledger_record_batch(text[], text[], text[], text[], text[], int[], text[], bigint[], text[], bigint[], int[], uuid[], text[], jsonb[], jsonb[]);
    `,
  },
  {
    id: 'ledger-006-claim-and-record',
    sql: `
      CREATE FUNCTION ledger_claim_and_record(
        p_keys text[], p_tx_ids text[], p_hashes text[], p_rounds text[], p_operators text[], p_players text[], p_tokens text[], p_ttls int[],
        p_guard_streams text[], p_guard_from bigint[], p_guard_types text[],
        p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_refused boolean, o_revoked boolean, o_taken boolean, o_inserted boolean, o_leased boolean,
        o_content_hash text, o_round_stream text, o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_starts int[] := '{}';
        v_next int := 1;
        v_from int;
        v_to int;
        v_append record;
        v_own boolean;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_rounds);
        FOR i IN 1 .. cardinality(p_keys) LOOP
          v_starts := v_starts || v_next;
          v_next := v_next + p_counts[i];
        END LOOP;
        FOR i IN SELECT x.o FROM unnest(p_keys, p_tx_ids) WITH ORDINALITY AS x(k, t, o) ORDER BY x.k, x.t, x.o LOOP
          o_index := i;
          o_refused := false;
          o_taken := false;
          o_inserted := false;
          o_leased := false;
          o_content_hash := NULL;
          o_round_stream := NULL;
          o_conflict := NULL;
          o_revision := NULL;
          o_position := NULL;
          o_revoked := p_guard_streams[i] IS NOT NULL AND es_stream_has(p_guard_streams[i], p_guard_from[i], p_guard_types[i]);
          v_own := EXISTS (SELECT 1 FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i]);
          IF o_revoked AND NOT v_own THEN
            o_refused := true;
            RETURN NEXT;
            CONTINUE;
          END IF;
          IF NOT v_own THEN
            SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream FROM tx_registry r
            WHERE r.operator_id = p_operators[i] AND r.player_ref = p_players[i] AND r.transaction_id = p_tx_ids[i] AND r.provider_id <> p_keys[i];
            IF FOUND THEN
              o_taken := true;
              RETURN NEXT;
              CONTINUE;
            END IF;
          END IF;
          INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, operator_id, player_ref, lease_token, leased_until)
          VALUES (p_keys[i], p_tx_ids[i], p_hashes[i], p_rounds[i], p_operators[i], p_players[i], p_tokens[i], clock_timestamp() + p_ttls[i] * interval '1 millisecond')
          ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
            WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
              AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
          RETURNING r.content_hash, r.round_stream, (r.xmax = 0) INTO o_content_hash, o_round_stream, o_inserted;
          IF FOUND THEN
            o_leased := true;
          ELSE
            o_inserted := false; -- INTO found no row, and set it NULL
            SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream
            FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i];
          END IF;
          IF o_inserted AND p_counts[i] > 0 THEN
            v_from := v_starts[i];
            v_to := v_from + p_counts[i] - 1;
            v_append := es_append_one(p_rounds[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
            o_conflict := v_append.o_conflict;
            o_revision := v_append.o_revision;
            o_position := v_append.o_position;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$;
    `,
  },
];

const legacyRmSessions: Migration[] = [
  {
    id: 'rm-sessions-001',
    sql: `
      CREATE TABLE rm_sessions (
        token text PRIMARY KEY,
        operator_id text NOT NULL,
        player_ref text NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        currency text NOT NULL,
        language text,
        lobby_url text,
        demo boolean NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
      CREATE INDEX rm_sessions_player_idx ON rm_sessions (operator_id, player_ref, created_at);
    `,
  },
];

const legacyRmRounds: Migration[] = [
  {
    id: 'rm-rounds-001',
    sql: `
      CREATE TABLE rm_transactions (
        round_stream text NOT NULL,
        transaction_id text NOT NULL,
        provider_id text NOT NULL,
        operator_id text NOT NULL,
        round_id text NOT NULL,
        origin text NOT NULL,
        type text NOT NULL,
        player_ref text NOT NULL,
        game_id text NOT NULL,
        amount bigint NOT NULL,
        currency text NOT NULL,
        direction text,
        original_transaction_id text,
        round_complete boolean NOT NULL,
        status text NOT NULL,
        attempts int NOT NULL,
        last_error text,
        reply jsonb,
        recorded_at timestamptz NOT NULL,
        settled_at timestamptz,
        dead_lettered_at timestamptz,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (round_stream, transaction_id)
      );
      CREATE INDEX rm_transactions_unsettled_idx ON rm_transactions (status) WHERE status IN ('recorded', 'failed', 'timed_out', 'dead');
      CREATE TABLE rm_rounds (
        round_stream text PRIMARY KEY,
        provider_id text NOT NULL,
        operator_id text NOT NULL,
        round_id text NOT NULL,
        game_id text NOT NULL,
        player_ref text NOT NULL,
        currency text NOT NULL,
        status text NOT NULL,
        force_closed boolean NOT NULL DEFAULT false,
        bets int NOT NULL DEFAULT 0,
        bet_amount bigint NOT NULL DEFAULT 0,
        wins int NOT NULL DEFAULT 0,
        win_amount bigint NOT NULL DEFAULT 0,
        rollbacks int NOT NULL DEFAULT 0,
        outstanding_bets int NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL,
        last_activity_at timestamptz NOT NULL
      );
      CREATE INDEX rm_rounds_stale_idx ON rm_rounds (last_activity_at) WHERE status = 'open' AND outstanding_bets > 0;
      CREATE INDEX rm_rounds_lookup_idx ON rm_rounds (operator_id, round_id);
    `,
  },
  {
    id: 'rm-rounds-002',
    sql: `ALTER TABLE rm_rounds ALTER COLUMN bet_amount TYPE numeric, ALTER COLUMN win_amount TYPE numeric;`,
  },
];

const legacyRmGrants: Migration[] = [
  {
    id: 'rm-grants-001',
    sql: `
      CREATE TABLE rm_grants (
        id uuid PRIMARY KEY,
        campaign_id text,
        operator_id text NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        player_ref text NOT NULL,
        spins int NOT NULL,
        bet_amount_minor bigint NOT NULL,
        currency text NOT NULL,
        external_ref text,
        status text NOT NULL,
        idempotency_key text NOT NULL,
        expires_at text,
        last_error text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        version bigint NOT NULL
      );
      CREATE INDEX rm_grants_list_idx ON rm_grants (operator_id, created_at DESC);
    `,
  },
  {
    id: 'rm-grants-002',
    sql: `ALTER TABLE rm_grants ALTER COLUMN spins TYPE bigint;`,
  },
];

/** Every migration of that release, in its order. */
export const legacyMigrations: Migration[] = [
  ...legacyEventStore,
  ...legacyCatalog,
  ...legacyProjections,
  ...legacySessionTokens,
  ...legacyRegistry,
  ...legacyRmSessions,
  ...legacyRmRounds,
  ...legacyRmGrants,
];
