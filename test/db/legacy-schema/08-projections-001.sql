
      CREATE TABLE projection_checkpoints (
        name text PRIMARY KEY,
        position text NOT NULL,
        events_applied bigint NOT NULL DEFAULT 0,
        last_event_at timestamptz,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
    