
      CREATE TABLE catalog_providers (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE catalog_games (id text PRIMARY KEY, provider_id text NOT NULL REFERENCES catalog_providers (id), doc jsonb NOT NULL);
      CREATE TABLE catalog_operators (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE catalog_campaigns (id text PRIMARY KEY, doc jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
    