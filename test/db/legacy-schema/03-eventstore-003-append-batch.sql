
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
    