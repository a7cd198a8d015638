
      CREATE OR REPLACE FUNCTION es_stream_has(p_stream text, p_from bigint, p_type text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
      BEGIN
        RETURN EXISTS (SELECT 1 FROM es_events WHERE stream_id = p_stream AND revision >= p_from AND type = p_type);
      END
      $$;
    