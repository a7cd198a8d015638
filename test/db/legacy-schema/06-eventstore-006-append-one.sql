
      CREATE FUNCTION es_append_one(p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[],
        OUT o_conflict boolean, OUT o_revision bigint, OUT o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_current bigint;
        v_exists boolean;
        v_last bigint;
        v_count int := cardinality(p_ids);
      BEGIN
        PERFORM pg_advisory_xact_lock(7281004, hashtext(p_stream));
        SELECT s.revision INTO v_current FROM es_streams s WHERE s.stream_id = p_stream;
        v_exists := FOUND;
        IF NOT v_exists THEN v_current := -1; END IF;
        IF p_expected IS NOT NULL AND v_current <> p_expected THEN
          o_conflict := true;
          o_revision := v_current;
          RETURN;
        END IF;
        IF v_count = 1 THEN
          INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
          VALUES (p_stream, v_current + 1, p_ids[1], p_types[1], p_data[1], p_meta[1])
          RETURNING global_position INTO v_last;
        ELSE
          WITH ins AS (
            INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
            SELECT p_stream, v_current + x.o, x.id, x.t, x.d, x.m
            FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS x(id, t, d, m, o)
            ORDER BY x.o
            RETURNING global_position
          )
          SELECT max(global_position) INTO v_last FROM ins;
        END IF;
        IF v_exists THEN
          UPDATE es_streams SET revision = v_current + v_count WHERE stream_id = p_stream;
        ELSE
          INSERT INTO es_streams (stream_id, revision) VALUES (p_stream, v_current + v_count);
        END IF;
        -- Delivered at commit; repeats within one transaction are delivered once.
        PERFORM pg_notify('es_appended', '');
        o_conflict := false;
        o_revision := v_current + v_count;
        o_position := pg_current_xact_id()::text || '.' || v_last::text;
      END
      $$;

      CREATE OR REPLACE FUNCTION es_append_batch(p_streams text[], p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_from int := 1;
        v_to int;
        r record;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_streams);
        FOR i IN 1 .. cardinality(p_streams) LOOP
          v_to := v_from + p_counts[i] - 1;
          r := es_append_one(p_streams[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
          o_index := i;
          o_conflict := r.o_conflict;
          o_revision := r.o_revision;
          o_position := r.o_position;
          RETURN NEXT;
          v_from := v_to + 1;
        END LOOP;
      END
      $$;
    