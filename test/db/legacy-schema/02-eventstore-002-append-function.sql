
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
    