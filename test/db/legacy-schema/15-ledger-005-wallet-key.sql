
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
    