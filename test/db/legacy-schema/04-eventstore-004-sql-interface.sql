
      CREATE FUNCTION es_lock_streams(p_streams text[]) RETURNS void LANGUAGE plpgsql AS $$
      DECLARE
        v_key int;
      BEGIN
        FOR v_key IN SELECT DISTINCT hashtext(x) FROM unnest(p_streams) AS x ORDER BY 1 LOOP
          PERFORM pg_advisory_xact_lock(7281004, v_key);
        END LOOP;
      END
      $$;

      -- Whether the stream holds an event of this type at or after this revision.
      CREATE FUNCTION es_stream_has(p_stream text, p_from bigint, p_type text) RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT EXISTS (SELECT 1 FROM es_events WHERE stream_id = p_stream AND revision >= p_from AND type = p_type)
      $$;
    