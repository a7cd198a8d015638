
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
    