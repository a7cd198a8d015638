
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
    