
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
    