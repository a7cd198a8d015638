
      CREATE TABLE tx_registry (
        provider_id text NOT NULL,
        transaction_id text NOT NULL,
        content_hash text NOT NULL,
        round_stream text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (provider_id, transaction_id)
      );
    