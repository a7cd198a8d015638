
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
    