
      ALTER TABLE projection_checkpoints
        ADD COLUMN failing_since timestamptz,
        ADD COLUMN failing_event jsonb,
        ADD COLUMN failing_error text;
    